"""The Transformer's scaled dot-product scoring."""

import math

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.scoring.attention_score import AttentionScore, heads_first_dot


@keras_attn_export("keras_attn.layers.ScaledDotScore")
class ScaledDotScore(AttentionScore):
    """Scaled dot-product scoring, `score(q, k) = q^T k / sqrt(d_k)`.

    "We suspect that for large values of d_k, the dot products grow large in
    magnitude, pushing the softmax function into regions where it has extremely
    small gradients. To counteract this effect, we scale the dot products by
    1/sqrt(d_k)." (Vaswani et al., 2017). The query is scaled before the product,
    which costs `length * dim` multiplications instead of `length^2`.

    Args:
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(batch, query_len, num_heads, dim)` or `(batch, query_len, dim)`.
        key: `(batch, key_len, num_heads, dim)` or `(batch, key_len, dim)`.

    Returns:
        Scores `(batch, num_heads, query_len, key_len)` (or without the heads axis).

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import ScaledDotScore
    >>> q = np.array([[[1.0, 2.0, 0.0, 0.0]]], "float32")  # d_k = 4
    >>> k = np.array([[[3.0, 4.0, 0.0, 0.0]]], "float32")
    >>> ops.convert_to_numpy(ScaledDotScore()(q, k)).tolist()  # 11 / sqrt(4)
    [[[5.5]]]

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
    """

    def _calculate_scores(self, query, key):
        scale = ops.cast(1.0 / math.sqrt(query.shape[-1]), query.dtype)
        query = ops.multiply(query, scale)
        return ops.einsum("bqhd,bkhd->bhqk", query, key)  # (batch, heads, q, k)

    def _scores_heads_first(self, query, key):
        scale = ops.cast(1.0 / math.sqrt(query.shape[-1]), query.dtype)
        return heads_first_dot(ops.multiply(query, scale), key)

    # The heads-first form, for this class's own `_calculate_scores` only.
    _heads_first = (_calculate_scores, _scores_heads_first)
