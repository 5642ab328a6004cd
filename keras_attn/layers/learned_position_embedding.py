"""A trainable table of position embeddings (BERT's)."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int


@keras_attn_export("keras_attn.layers.LearnedPositionEmbedding")
class LearnedPositionEmbedding(keras.layers.Layer):
    """Learned position embeddings, a trainable `(sequence_length, d_model)` table.

    Returns the rows for the input's positions, broadcast to the input's shape,
    for the caller to add (BERT adds token, segment and position embeddings).

    Args:
        sequence_length: the number of positions the table holds (BERT: 512).
        initializer: initializer of the table. Defaults to `"glorot_uniform"`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(batch, length, d_model)` or `(length, d_model)`; only the shape
            is used. `start_index + length` must not exceed `sequence_length`.
        start_index: position of the first element (int or scalar tensor), for
            decoding one position at a time. Defaults to `0`.

    Returns:
        Position embeddings with the shape of `inputs`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.layers import LearnedPositionEmbedding
    >>> layer = LearnedPositionEmbedding(sequence_length=512)
    >>> tuple(layer(np.zeros((2, 10, 64), "float32")).shape)
    (2, 10, 64)

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805)
    """

    layout_roles = {"embeddings": "table"}

    def __init__(self, sequence_length, initializer="glorot_uniform", **kwargs):
        super().__init__(**kwargs)
        check_positive_int("sequence_length", sequence_length)
        self.sequence_length = sequence_length
        self.initializer = keras.initializers.get(initializer)
        self.supports_masking = True

    def build(self, inputs_shape):
        if len(inputs_shape) < 2 or inputs_shape[-1] is None:
            raise ValueError(
                "Expected `inputs` of shape (..., length, d_model) with a known "
                f"d_model. Received: inputs.shape={tuple(inputs_shape)}"
            )
        self._check_length(inputs_shape[-2], 0)
        self.position_embeddings = self.add_weight(
            name="embeddings",
            shape=(self.sequence_length, inputs_shape[-1]),
            initializer=self.initializer,
        )
        self.built = True

    def _check_length(self, length, start_index):
        if isinstance(length, int) and isinstance(start_index, int):
            if start_index + length > self.sequence_length:
                raise ValueError(
                    f"Sequence too long for layer '{self.name}': positions "
                    f"{start_index}..{start_index + length - 1} requested, "
                    f"`sequence_length` is {self.sequence_length}. Received: "
                    f"inputs length {length}, start_index={start_index}"
                )

    def call(self, inputs, start_index=0):
        self._check_length(inputs.shape[-2], start_index)
        length = ops.shape(inputs)[-2]
        table = ops.convert_to_tensor(self.position_embeddings)
        # ops.slice fails at run time if a dynamic length runs past the table.
        embeddings = ops.slice(table, (start_index, 0), (length, inputs.shape[-1]))
        return ops.broadcast_to(ops.cast(embeddings, inputs.dtype), ops.shape(inputs))

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "sequence_length": self.sequence_length,
                "initializer": keras.initializers.serialize(self.initializer),
            }
        )
        return config
