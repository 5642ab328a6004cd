"""Masked mean pooling: a sentence embedding from token embeddings."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.layers.MeanPooling")
class MeanPooling(keras.layers.Layer):
    """The mean of the token vectors that are not padding, optionally L2-normalised.

    Sentence-BERT's pooling (Reimers & Gurevych, 2019), the one
    sentence-transformers models such as all-MiniLM-L6-v2 are trained with:
    `sum_t m_t h_t / sum_t m_t`, then `x / ||x||` when `normalize=True`. A sequence
    with no real token pools to zeros (never NaN). The padding comes from the
    `padding_mask` argument or, if absent, from the Keras mask of `inputs`; the
    output carries no mask.

    Args:
        normalize: L2-normalise the pooled vector (cosine-similarity embeddings).
        epsilon: floor of the norm when normalising.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: `(batch, length, dim)` token vectors.
        padding_mask: optional `(batch, length)`, 1 (True) for real tokens.

    Returns:
        `(batch, dim)`.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import MeanPooling
    >>> x = np.array([[[1.0, 2.0], [3.0, 4.0], [9.0, 9.0]]])
    >>> ops.convert_to_numpy(MeanPooling()(x, padding_mask=np.array([[1, 1, 0]]))).tolist()
    [[2.0, 3.0]]
    >>> ops.convert_to_numpy(MeanPooling(normalize=True)(np.array([[[3.0, 4.0]]]))).tolist()
    [[0.6000000238418579, 0.800000011920929]]

    References:
        - [Reimers & Gurevych, 2019](https://arxiv.org/abs/1908.10084)
    """

    def __init__(self, normalize=False, epsilon=1e-12, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(normalize, bool):
            raise TypeError(f"Expected `normalize` to be a bool. Received: normalize={normalize!r}")
        self.normalize = normalize
        self.epsilon = epsilon
        self.supports_masking = True

    def build(self, input_shape):
        if len(input_shape) != 3:
            raise ValueError(
                "Expected `inputs` of shape (batch, length, dim). Received: "
                f"input_shape={tuple(input_shape)}"
            )
        self.built = True

    def call(self, inputs, padding_mask=None, mask=None):
        if padding_mask is None:
            padding_mask = mask
        if padding_mask is None:
            pooled = ops.mean(inputs, axis=1)
        else:
            weights = ops.cast(ops.expand_dims(padding_mask, -1), inputs.dtype)
            total = ops.sum(inputs * weights, axis=1)
            count = ops.sum(weights, axis=1)
            pooled = total / ops.maximum(count, ops.cast(1.0, inputs.dtype))
        if self.normalize:
            norm = ops.sqrt(ops.sum(ops.square(pooled), axis=-1, keepdims=True))
            pooled = pooled / ops.maximum(norm, ops.cast(self.epsilon, pooled.dtype))
        return pooled

    def compute_mask(self, inputs, mask=None, padding_mask=None):
        return None

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None):
        return (inputs_shape[0], inputs_shape[2])

    def get_config(self):
        config = super().get_config()
        config.update({"normalize": self.normalize, "epsilon": self.epsilon})
        return config
