"""The Transformer's fixed sinusoidal position embedding."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_number


@keras_attn_export("keras_attn.layers.SinusoidalPositionEmbedding")
class SinusoidalPositionEmbedding(keras.layers.Layer):
    """Fixed sinusoidal position embeddings, shaped like the input.

    `PE(pos, 2i) = sin(pos / max_wavelength^(2i / d_model))`,
    `PE(pos, 2i+1) = cos(pos / max_wavelength^(2i / d_model))`, with sine and
    cosine interleaved as in the paper. The layer returns the embeddings; the
    caller adds them ("we add positional encodings to the input embeddings",
    Vaswani et al., 2017, who also multiply the embeddings by `sqrt(d_model)`).

    Args:
        max_wavelength: the base of the geometric progression of wavelengths
            (positive). Defaults to `10000`, the paper's.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(batch, length, d_model)` or `(length, d_model)` embeddings; only
            the shape is used.
        start_index: position of the first element (int or scalar tensor), for
            decoding one position at a time. Defaults to `0`.

    Returns:
        Position embeddings with the shape and dtype of `inputs`.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import SinusoidalPositionEmbedding
    >>> embeddings = np.zeros((2, 3, 4), "float32")
    >>> pe = SinusoidalPositionEmbedding()(embeddings)
    >>> row = ops.convert_to_numpy(pe[0, 1]).astype("float64")  # sin 1, cos 1, sin .01, cos .01
    >>> np.round(row, 3).tolist()
    [0.841, 0.54, 0.01, 1.0]

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
    """

    def __init__(self, max_wavelength=10000, **kwargs):
        super().__init__(**kwargs)
        check_positive_number("max_wavelength", max_wavelength)
        self.max_wavelength = max_wavelength
        self.supports_masking = True

    def build(self, inputs_shape):
        if len(inputs_shape) < 2 or inputs_shape[-1] is None:
            raise ValueError(
                "Expected `inputs` of shape (..., length, d_model) with a known "
                f"d_model. Received: inputs.shape={tuple(inputs_shape)}"
            )
        self.built = True

    def call(self, inputs, start_index=0):
        length, d_model = ops.shape(inputs)[-2], inputs.shape[-1]
        positions = ops.cast(ops.arange(length) + start_index, "float32")
        dims = ops.arange(d_model)
        # 2i for both members of a (sin, cos) pair: 0, 0, 2, 2, 4, 4, ...
        even_dims = ops.cast(dims - dims % 2, "float32")
        inverse_wavelengths = ops.power(
            ops.cast(self.max_wavelength, "float32"), -even_dims / d_model
        )
        angles = positions[:, None] * inverse_wavelengths[None, :]  # (length, d_model)
        embeddings = ops.where(dims % 2 == 0, ops.sin(angles), ops.cos(angles))
        return ops.broadcast_to(ops.cast(embeddings, inputs.dtype), ops.shape(inputs))

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update({"max_wavelength": self.max_wavelength})
        return config
