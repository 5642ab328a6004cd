"""Luong's dot scoring."""

from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.scoring.attention_score import AttentionScore, heads_first_dot


@keras_attn_export("keras_attn.layers.DotScore")
class DotScore(AttentionScore):
    """Dot-product scoring, `score(q, k) = q^T k` (Luong et al., 2015).

    No parameters. Prefer `ScaledDotScore` for wide heads: unscaled dot products
    grow with the dimension and saturate the softmax.

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
    >>> from keras_attn.layers import DotScore
    >>> q = np.array([[[1.0, 2.0]]], "float32")  # (batch, query_len, dim)
    >>> k = np.array([[[3.0, 4.0], [1.0, 0.0]]], "float32")
    >>> ops.convert_to_numpy(DotScore()(q, k)).tolist()
    [[[11.0, 1.0]]]

    References:
        - [Luong et al., 2015](https://arxiv.org/abs/1508.04025)
    """

    def _calculate_scores(self, query, key):
        return ops.einsum("bqhd,bkhd->bhqk", query, key)  # (batch, heads, q, k)

    def _scores_heads_first(self, query, key):
        return heads_first_dot(query, key)

    # The heads-first form, for this class's own `_calculate_scores` only.
    _heads_first = (_calculate_scores, _scores_heads_first)
