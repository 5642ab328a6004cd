"""Bahdanau's additive (concat) scoring."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int
from keras_attn.layers.scoring.attention_score import AttentionScore, PerHead


@keras_attn_export("keras_attn.layers.AdditiveScore")
class AdditiveScore(AttentionScore):
    """Additive scoring, `score(q, k) = v_h^T tanh(W_h^q q + W_h^k k)`.

    Bahdanau et al. (2015) score a decoder state against each encoder state with
    a one-hidden-layer network; `W [q; k]` splits into `W^q q + W^k k`, which lets
    the projections be computed once per query and once per key. Each head has its
    own `W^q`, `W^k` and `v`. Memory grows as `q_len * k_len * units` per head.

    Args:
        units: width of the hidden layer (`None`: the key dimension).
        kernel_initializer: initializer of `W^q`, `W^k` and `v`.
            Defaults to `"glorot_uniform"`, with fans computed per head.
        kernel_regularizer: optional regularizer of the same weights.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(batch, query_len, num_heads, query_dim)` or
            `(batch, query_len, query_dim)`.
        key: `(batch, key_len, num_heads, key_dim)` or `(batch, key_len, key_dim)`.

    Returns:
        Scores `(batch, num_heads, query_len, key_len)` (or without the heads axis).

    Example:

    >>> import numpy as np
    >>> from keras_attn.layers import AdditiveScore
    >>> decoder_state = np.ones((2, 1, 32), "float32")  # (batch, 1, state_dim)
    >>> encoder_states = np.ones((2, 7, 64), "float32")  # (batch, src_len, dim)
    >>> tuple(AdditiveScore(units=16)(decoder_state, encoder_states).shape)
    (2, 1, 7)

    References:
        - [Bahdanau et al., 2015](https://arxiv.org/abs/1409.0473)
    """

    layout_roles = dict.fromkeys(("query_kernel", "key_kernel", "score_vector"), "column")

    requires_equal_dims = False

    def __init__(
        self,
        units=None,
        kernel_initializer="glorot_uniform",
        kernel_regularizer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("units", units, allow_none=True)
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)

    def build_weights(self, num_heads, query_dim, key_dim):
        units = self.units or key_dim
        common = dict(
            initializer=PerHead(self.kernel_initializer),
            regularizer=self.kernel_regularizer,
        )
        self.query_kernel = self.add_weight(
            name="query_kernel", shape=(num_heads, query_dim, units), **common
        )
        self.key_kernel = self.add_weight(
            name="key_kernel", shape=(num_heads, key_dim, units), **common
        )
        self.score_vector = self.add_weight(
            name="score_vector", shape=(num_heads, units, 1), **common
        )

    def _calculate_scores(self, query, key):
        query = ops.einsum("bqhd,hdu->bhqu", query, self.query_kernel)
        key = ops.einsum("bkhd,hdu->bhku", key, self.key_kernel)
        # (batch, heads, q, 1, units) + (batch, heads, 1, k, units)
        hidden = ops.tanh(query[:, :, :, None, :] + key[:, :, None, :, :])
        return ops.einsum("bhqku,hu->bhqk", hidden, self.score_vector[:, :, 0])

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "units": self.units,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "kernel_regularizer": keras.regularizers.serialize(self.kernel_regularizer),
            }
        )
        return config
