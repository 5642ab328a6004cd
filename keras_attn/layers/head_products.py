"""How the heads attend once queries, keys and values are projected (internal to
`MultiHeadAttention`): the score layer and a masked softmax, grouped-query attention
scored without repeating the keys and values, and PyTorch's fused kernel."""

import math

from keras import ops

from keras_attn.layers import masking
from keras_attn.layers.layer_utils import heads_first, repeat_heads


def scored_attention(layer, query, key, value, attention_mask, offset, training):
    """`layer`'s (a `MultiHeadAttention`'s) `"scores"` path: `(output (b, q, heads,
    v_dim), probabilities, has_key)`; `key` and `value` have the key/value heads (fewer
    with grouped-query attention); `offset`: query row 0's position (a position bias)."""
    heads_first = layer.compute_plan.heads_first
    if groups_queries(layer, key):
        return grouped_attention(
            layer.score_layer,
            layer.dropout_layer,
            query,
            key,
            value,
            attention_mask,
            training,
            heads_first,
        )
    key = repeat_heads(key, layer.num_heads)  # (batch, k_len, heads, key_dim)
    value = repeat_heads(value, layer.num_heads)
    # Dot-product scores run heads-first, (batch, heads, length, dim): batched
    # matrix products over (batch, heads) with no transposes inside them.
    if layer.score_layer.supports_heads_first:
        scores = layer.score_layer.heads_first_scores(heads_first(query), heads_first(key))
    else:
        scores = layer.score_layer(query, key)  # (batch, heads, q_len, k_len)
    bias = None
    if layer.position_bias_layer is not None:
        query_positions = ops.arange(ops.shape(query)[1], dtype="int32") + offset
        bias = layer.position_bias_layer(query_positions, ops.arange(ops.shape(key)[1]))
    probabilities, has_key = masking.masked_softmax(scores, attention_mask, bias)
    dropped = layer.dropout_layer(probabilities, training=training)
    # A batched product then one transpose, (b, h, q, v) -> (b, q, h, v): the
    # einsum's own lowering in exports transposed the values through 5 axes.
    output = heads_first(ops.matmul(dropped, heads_first(value)))
    return output, probabilities, has_key


def groups_queries(layer, key):
    """Whether `layer`'s query heads that share a key/value head are scored as one group
    (`grouped_attention`): grouped-query attention with heads-first dot-product scores
    and no position bias (which differs by head)."""
    return (
        key.shape[2] != layer.num_heads
        and layer.score_layer.supports_heads_first
        and layer.position_bias_layer is None
    )


def grouped_attention(
    score_layer, dropout_layer, query, key, value, attention_mask, training, heads_first=heads_first
):
    """`MultiHeadAttention`'s `"scores"` path for grouped-query attention: `(output
    (b, q, heads, v_dim), probabilities (b, heads, q, k), has_key)` from `query`
    `(b, q, heads, d)` and `key`/`value` `(b, k, K, d)` with `K` dividing `heads`.

    The `G = heads / K` query heads that read key/value head `k` are stacked as `G * q`
    rows of one heads-first product with it, `(b, K, G * q, d)` by `(b, K, k, d)`, by
    `score_layer`'s heads-first scores (each row scored on its own). Repeating the heads
    instead copied the whole key/value cache `G` times every decoding step (SmolLM2's,
    G = 3: a fifth of a step at batch 8, docs/speed.md). The same scores, softmax
    (`masking.masked_softmax`, no position bias) and output as the repeated form."""
    batch, q_len, k_len = ops.shape(query)[0], ops.shape(query)[1], ops.shape(key)[1]
    num_heads, kv_heads = query.shape[2], key.shape[2]
    rows = num_heads // kv_heads * q_len
    grouped = ops.reshape(heads_first(query), (batch, kv_heads, rows, query.shape[-1]))
    scores = score_layer.heads_first_scores(grouped, heads_first(key))
    scores = ops.reshape(scores, (batch, num_heads, q_len, k_len))
    probabilities, has_key = masking.masked_softmax(scores, attention_mask, None)
    dropped = dropout_layer(probabilities, training=training)
    dropped = ops.reshape(dropped, (batch, kv_heads, rows, k_len))
    output = ops.matmul(dropped, heads_first(value))  # (b, K, G * q, v_dim)
    output = ops.reshape(output, (batch, num_heads, q_len, value.shape[-1]))
    return heads_first(output), probabilities, has_key


def fused_attention(query, key, value, attention_mask, key_dim):
    """`(b, q, heads, v_dim)` and which queries have a key, by Keras's fused
    `dot_product_attention` (PyTorch's kernel); `key` and `value` have every head."""
    mask = has_key = None
    if attention_mask is not None:
        mask = ops.cast(attention_mask, "bool")
        mask = mask if len(mask.shape) == 3 else mask[None]  # (b|1, q|1, k)
        has_key = ops.any(mask, axis=-1)
        # A query without keys gets every key here (a finite row, not NaN) and is
        # zeroed by the caller, as on the other path.
        mask = ops.logical_or(mask, ops.logical_not(has_key)[..., None])[:, None]
    output = ops.dot_product_attention(query, key, value, mask=mask, scale=1.0 / math.sqrt(key_dim))
    return output, has_key
