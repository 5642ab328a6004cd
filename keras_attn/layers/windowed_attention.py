"""Sliding-window attention for `MultiHeadAttention(window=W)` (internal).

Query `i` attends to keys `j` with `|i - j| <= W` (causal: `i - W <= j <= i`). The
full form is a band mask on the `(query, key)` scores; the blockwise form cuts the
sequence into blocks of `B >= W` positions, and each block of queries scores only its
own block and its two neighbours, `3B` keys: time and memory grow as `L · 3B`
instead of `L²`, with the same probabilities (the band is the same for every block,
since the key-minus-query offset of block entries does not depend on the block).
"""

from keras import ops

from keras_attn.layers import masking
from keras_attn.layers.layer_utils import heads_first

MIN_BLOCK = 64  # smaller blocks cost more in per-block overhead than they save


def applies(query, value, key, attention_mask, cache, return_attention_scores):
    """Whether windowed attention runs blockwise: self-attention (one tensor, or equal
    static lengths) and nothing that needs the full score matrix (an `attention_mask`
    only of key padding, `(batch, 1, length)` as the blocks pass it, is fine)."""
    if cache is not None or return_attention_scores or not _key_padding(attention_mask):
        return False
    lengths = {query.shape[1], value.shape[1], key.shape[1]}
    return (query is value and value is key) or (len(lengths) == 1 and None not in lengths)


def _key_padding(attention_mask):
    shape = None if attention_mask is None else tuple(attention_mask.shape)
    return shape is None or (len(shape) == 3 and shape[1] == 1)


def block_size(window):
    return max(window, MIN_BLOCK)


def blockwise_attention(
    score_layer,
    query,
    key,
    value,
    key_mask,
    window,
    causal,
    dropout,
    training,
    heads_first=heads_first,
):
    """Windowed self-attention block by block.

    Args:
        score_layer: the `AttentionScore`.
        query, key: `(batch, length, heads, key_dim)` projections.
        value: `(batch, length, heads, value_dim)`.
        key_mask: `(batch, length)` boolean (True at real keys) or None.
        window: the half-width `W`.
        causal: also `j <= i`.
        dropout: the dropout layer applied to the probabilities.
        training: dropout on or off.
        heads_first: the transpose to `(batch, heads, length, dim)` and back (the
            layer's `compute_plan.heads_first`).

    Returns:
        `(batch, length, heads, value_dim)`; a query without any key in its window
        gets zeros.
    """
    size = block_size(window)
    batch, length = ops.shape(query)[0], ops.shape(query)[1]
    heads = query.shape[2]
    blocks = (length + size - 1) // size
    padded = blocks * size

    def pad(x, before, after):
        widths = [(0, 0)] * len(x.shape)
        widths[1] = (before, after)
        return ops.pad(x, widths)

    def neighbours(x):
        """`(batch, length, ...)` -> `(batch * blocks, 3 * size, ...)`: each block's
        previous, own and next block of positions (zeros beyond the ends)."""
        x = pad(x, size, padded - length + size)
        x = ops.reshape(x, (batch, blocks + 2, size, *x.shape[2:]))
        x = ops.concatenate([x[:, :-2], x[:, 1:-1], x[:, 2:]], axis=2)
        return ops.reshape(x, (batch * blocks, 3 * size, *x.shape[3:]))

    queries = ops.reshape(
        pad(query, 0, padded - length), (batch * blocks, size, heads, query.shape[-1])
    )
    keys, values = neighbours(key), neighbours(value)
    real = ops.ones((batch, length), "int32") if key_mask is None else ops.cast(key_mask, "int32")
    real = neighbours(real) > 0  # (batch * blocks, 3 * size): beyond the ends is padding
    # Key column c of a block sits at offset c - size - r from its query row r.
    offsets = ops.arange(3 * size)[None, :] - size - ops.arange(size)[:, None]
    band = ops.less_equal(ops.abs(offsets), window)
    if causal:
        band = ops.logical_and(band, ops.less_equal(offsets, 0))
    mask = ops.logical_and(band[None], real[:, None, :])  # (batch * blocks, size, 3 * size)
    if score_layer.supports_heads_first:
        scores = score_layer.heads_first_scores(heads_first(queries), heads_first(keys))
    else:
        scores = score_layer(queries, keys)  # (batch * blocks, heads, size, 3 * size)
    probabilities, has_key = masking.masked_softmax(scores, mask)
    dropped = dropout(probabilities, training=training)
    output = ops.einsum("bhqk,bhkd->bqhd", dropped, heads_first(values))
    output = output * ops.cast(has_key[:, :, None, None], output.dtype)
    output = ops.reshape(output, (batch, padded, heads, value.shape[-1]))
    return output[:, :length]
