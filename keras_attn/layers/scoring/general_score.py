"""Luong's general (bilinear) scoring."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.scoring.attention_score import AttentionScore, PerHead


@keras_attn_export("keras_attn.layers.GeneralScore")
class GeneralScore(AttentionScore):
    """General (bilinear) scoring, `score(q, k) = q^T W_h k` (Luong et al., 2015).

    Each head has its own matrix `W_h` of shape `(query_dim, key_dim)`, so query
    and key may differ in width (a decoder state against encoder states).

    Args:
        kernel_initializer: initializer of `W`. Defaults to `"glorot_uniform"`,
            with fans computed per head.
        kernel_regularizer: optional regularizer of `W`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(batch, query_len, num_heads, query_dim)` or
            `(batch, query_len, query_dim)`.
        key: `(batch, key_len, num_heads, key_dim)` or `(batch, key_len, key_dim)`.

    Returns:
        Scores `(batch, num_heads, query_len, key_len)` (or without the heads axis).

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import GeneralScore
    >>> layer = GeneralScore()
    >>> q = np.array([[[1.0, 2.0]]], "float32")
    >>> k = np.array([[[3.0, 4.0, 5.0]]], "float32")
    >>> layer.build(q.shape, k.shape)
    >>> _ = layer.kernel.assign(np.ones((1, 2, 3), "float32"))  # (heads, q_dim, k_dim)
    >>> ops.convert_to_numpy(layer(q, k)).tolist()  # (1 + 2) * (3 + 4 + 5)
    [[[36.0]]]

    References:
        - [Luong et al., 2015](https://arxiv.org/abs/1508.04025)
    """

    layout_roles = {"kernel": "column"}

    requires_equal_dims = False

    def __init__(self, kernel_initializer="glorot_uniform", kernel_regularizer=None, **kwargs):
        super().__init__(**kwargs)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)

    def build_weights(self, num_heads, query_dim, key_dim):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(num_heads, query_dim, key_dim),
            initializer=PerHead(self.kernel_initializer),
            regularizer=self.kernel_regularizer,
        )

    def _calculate_scores(self, query, key):
        query = ops.einsum("bqhd,hde->bqhe", query, self.kernel)  # (b, q, heads, k_dim)
        return ops.einsum("bqhe,bkhe->bhqk", query, key)  # (batch, heads, q, k)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
            }
        )
        return config
