"""Luong's location-based scoring: scores from the query alone."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int
from keras_attn.layers.scoring.attention_score import AttentionScore, PerHead


@keras_attn_export("keras_attn.layers.LocationScore")
class LocationScore(AttentionScore):
    """Location-based scoring, `a_t = softmax(W_a h_t)` (Luong et al., 2015, eq. 8).

    "The alignment scores are computed from solely the target hidden state": one
    score per key position, `W_a h_t`, whatever the keys hold. `W_a` has a row per
    position up to `max_length`; a call with `key_len` keys uses the first
    `key_len` rows. The owning attention layer masks and normalises as for every
    score. Each head has its own `W_a`.

    Args:
        max_length: the most key positions (the longest source), > 0.
        kernel_initializer: initializer of `W_a`. Defaults to `"glorot_uniform"`,
            with fans computed per head.
        kernel_regularizer: optional regularizer of `W_a`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(batch, query_len, num_heads, query_dim)` or
            `(batch, query_len, query_dim)`.
        key: `(batch, key_len, num_heads, key_dim)` or `(batch, key_len, key_dim)`;
            only its length is read, `key_len <= max_length`.

    Returns:
        Scores `(batch, num_heads, query_len, key_len)` (or without the heads axis).

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import LocationScore
    >>> layer = LocationScore(max_length=4)
    >>> q, k = np.ones((1, 1, 2), "float32"), np.zeros((1, 3, 5), "float32")
    >>> layer.build(q.shape, k.shape)
    >>> _ = layer.kernel.assign(np.arange(8, dtype="float32").reshape(1, 2, 4))
    >>> ops.convert_to_numpy(layer(q, k)).tolist()  # column s of W_a^T summed: (0+4, 1+5, 2+6)
    [[[4.0, 6.0, 8.0]]]

    References:
        - [Luong et al., 2015](https://arxiv.org/abs/1508.04025)
    """

    layout_roles = {"kernel": "column"}

    requires_equal_dims = False

    def __init__(
        self,
        max_length=None,
        kernel_initializer="glorot_uniform",
        kernel_regularizer=None,
        **kwargs,
    ):
        if max_length is None:
            raise ValueError(
                "LocationScore needs `max_length`, the most key positions it scores "
                "(it has one weight row per position). Received: max_length=None"
            )
        check_positive_int("max_length", max_length)
        super().__init__(**kwargs)
        self.max_length = max_length
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)

    def _check_shapes(self, query_shape, key_shape):
        dims = super()._check_shapes(query_shape, key_shape)
        key_len = tuple(key_shape)[1]
        if key_len is not None and key_len > self.max_length:
            raise ValueError(
                f"LocationScore scores at most `max_length`={self.max_length} key "
                f"positions. Received: key.shape={tuple(key_shape)} ({key_len} keys)"
            )
        return dims

    def build_weights(self, num_heads, query_dim, key_dim):
        self.kernel = self.add_weight(
            name="kernel",
            shape=(num_heads, query_dim, self.max_length),
            initializer=PerHead(self.kernel_initializer),
            regularizer=self.kernel_regularizer,
        )

    def _calculate_scores(self, query, key):
        scores = ops.einsum("bqhd,hds->bhqs", query, self.kernel)  # every position
        return scores[..., : ops.shape(key)[1]]

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "max_length": self.max_length,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
            }
        )
        return config
