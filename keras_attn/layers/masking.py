"""Attention masks and the masked softmax, for the attention layer and the blocks (internal)."""

from keras import ops


def keras_mask(x):
    """The Keras mask `x` carries (`(batch, length)`, True at real tokens), or None.

    The one place the private `_keras_mask` attribute is read."""
    return getattr(x, "_keras_mask", None)


def attention_mask(keys, padding_mask, attention_mask, query_length, names):
    """A block's mask for one attention: defaults, checks, merges.

    `padding_mask` `(batch, key_len)` defaults to the Keras mask of `keys`; both it
    and `attention_mask` (broadcastable to `(batch, query_len, key_len)`) are
    checked against `keys` and `query_length`, errors naming `names` = (padding
    argument, attention argument, keys argument); the result is their logical AND,
    `(batch, query_len, key_len)` boolean, or None when neither is given.
    """
    return padding_and_attention_mask(keys, padding_mask, attention_mask, query_length, names)[1]


def padding_and_attention_mask(keys, padding_mask, attention_mask, query_length, names):
    """`(padding_mask, mask)`: the checked, defaulted `padding_mask` and
    `attention_mask`'s result, from one check."""
    padding_mask = check_masks(keys, padding_mask, attention_mask, query_length, names)
    return padding_mask, merge_masks(key_padding_to_attention_mask(padding_mask), attention_mask)


def check_masks(keys, padding_mask, attention_mask, query_length, names):
    """`attention_mask`'s checks alone (a block's output specs run them on symbolic
    inputs); returns `padding_mask`, defaulted to the Keras mask of `keys`."""
    padding_argument, attention_argument, keys_argument = names
    if padding_mask is None:
        padding_mask = keras_mask(keys)
    check_padding_mask(padding_mask, keys, padding_argument, keys_argument)
    check_attention_mask(
        attention_mask, query_length, keys.shape[1], attention_argument, keys.shape[0]
    )
    return padding_mask


def causal_mask(query_length, key_length, offset=0):
    """`(1, q_len, k_len)` boolean, True where key position <= query position.

    Query row `i` sits at position `offset + i` (a decoding step with a cache: the
    queries are the new positions, the keys the whole cache).
    """
    rows = ops.arange(query_length)[:, None] + ops.cast(offset, "int32")
    cols = ops.arange(key_length)[None, :]
    return ops.expand_dims(ops.greater_equal(rows, cols), 0)


def window_mask(query_length, key_length, window, causal=False, offset=0):
    """`(1, q_len, k_len)` boolean: True where `|i - j| <= window` (causal: and `j <= i`),
    query row `i` at position `offset + i`."""
    rows = ops.arange(query_length)[:, None] + ops.cast(offset, "int32")
    cols = ops.arange(key_length)[None, :]
    distance = rows - cols
    band = ops.less_equal(ops.abs(distance), window)
    if causal:
        band = ops.logical_and(band, ops.greater_equal(distance, 0))
    return ops.expand_dims(band, 0)


def merge_masks(*masks):
    """Logical AND of the masks that are not None (broadcasting); None if all are."""
    merged = None
    for mask in masks:
        if mask is None:
            continue
        mask = ops.cast(mask, "bool")
        merged = mask if merged is None else ops.logical_and(merged, mask)
    return merged


def key_padding_to_attention_mask(padding_mask):
    """`(batch, k_len)` padding mask -> `(batch, 1, k_len)`, broadcast over queries."""
    if padding_mask is None:
        return None
    return ops.expand_dims(ops.cast(padding_mask, "bool"), 1)


def check_padding_mask(padding_mask, inputs, argument, inputs_name):
    """Raises a ValueError unless `padding_mask` is `(batch, length)` of `inputs`."""
    if padding_mask is None:
        return
    mask_shape, shape = tuple(padding_mask.shape), tuple(inputs.shape)
    if len(mask_shape) != 2 or not _fits(mask_shape, shape[:2]):
        raise ValueError(
            f"Expected `{argument}` of shape (batch, length) = {shape[:2]} to match "
            f"`{inputs_name}`. Received: {argument}.shape={mask_shape}"
        )


def check_attention_mask(attention_mask, query_length, key_length, argument, batch=None):
    """Raises a ValueError unless the mask broadcasts to `(batch, q_len, k_len)`."""
    if attention_mask is None:
        return
    shape = tuple(attention_mask.shape)
    expected = (query_length, key_length)
    fits = len(shape) in (2, 3) and all(
        m is None or e is None or m in (1, e) for m, e in zip(shape[-2:], expected, strict=True)
    )
    if fits and len(shape) == 3 and None not in (shape[0], batch):
        fits = shape[0] in (1, batch)
    if not fits:
        rows = "batch" if batch is None else batch
        raise ValueError(
            f"Expected `{argument}` broadcastable to (batch, query_len, key_len) = "
            f"({rows}, {query_length}, {key_length}). Received: {argument}.shape={shape}"
        )


def _fits(a, b):
    return all(x is None or y is None or x == y for x, y in zip(a, b, strict=False))


def layer_attention_mask(
    query,
    keys,
    query_mask,
    value_mask,
    key_mask,
    attention_mask,
    use_causal_mask,
    query_offset=0,
    window=None,
):
    """`MultiHeadAttention`'s masks merged into one `(batch|1, q_len, k_len)` boolean, or None.

    `keys` is the tensor whose axis 1 runs over the keys (`value`, or the cache
    `(batch, length, ...)` view); query row i sits at position `query_offset + i`;
    `window` adds the sliding-window band.
    """
    query_length, key_length = query.shape[1], keys.shape[1]
    check_attention_mask(attention_mask, query_length, key_length, "attention_mask", query.shape[0])
    check_padding_mask(query_mask, query, "query_mask", "query")
    check_padding_mask(value_mask, keys, "value_mask", "value")
    check_padding_mask(key_mask, keys, "key_mask", "key")
    if query_mask is not None:
        query_mask = ops.expand_dims(ops.cast(query_mask, "bool"), -1)  # (b, q, 1)
    causal = None
    if window is not None:
        causal = window_mask(
            ops.shape(query)[1], ops.shape(keys)[1], window, use_causal_mask, query_offset
        )
    elif use_causal_mask:
        causal = causal_mask(ops.shape(query)[1], ops.shape(keys)[1], query_offset)
    return merge_masks(
        attention_mask,
        query_mask,
        key_padding_to_attention_mask(value_mask),
        key_padding_to_attention_mask(key_mask),
        causal,
    )


def masked_softmax(scores, attention_mask, bias=None):
    """Probabilities `(batch, heads, q, k)` and the queries that have a key.

    `bias`: optional float32, broadcastable to the scores (a position bias
    `(heads, q, k)`), added in float32 before the mask.

    The softmax runs in float32 (stable under mixed precision). Masked keys get
    the float32 maximum subtracted, on the mask's own broadcast shape, which is
    cheaper than a full-size select and cannot overflow whatever the compute
    dtype; their probabilities come out exactly 0 whenever the row has a key.
    Returns `(probabilities, has_key)`, `has_key` `(batch|1, q|1)` boolean or
    None: rows without any key are uniform here and zeroed by the caller.
    """
    dtype = scores.dtype
    scores = ops.cast(scores, "float32")
    if bias is not None:  # a subtraction, for the reason below
        scores = ops.subtract(scores, ops.negative(bias))
    if attention_mask is None:
        return ops.cast(_softmax(scores), dtype), None
    if len(attention_mask.shape) == 2:
        attention_mask = attention_mask[None]  # (1, q, k)
    penalty = ops.where(attention_mask, 0.0, 3.4028235e38)  # (batch|1, q|1, k)
    # A subtraction, not `scores + (-penalty)` (the same IEEE result): TensorFlow's
    # oneDNN rewrite fuses a batched matmul with a following broadcast Add into one
    # op that ran ~30x slower here (a causal (1, 1, q, k) bias, no XLA: 89 ms
    # against 3 ms for a layer call in decoding); it leaves a Sub alone.
    probabilities = _softmax(ops.subtract(scores, ops.expand_dims(penalty, 1)))
    return ops.cast(probabilities, dtype), ops.any(attention_mask, axis=-1)


def _softmax(scores):
    if scores.shape[-1] == 1:
        return ops.ones_like(scores)  # one key (Keras warns on a size-1 softmax)
    return ops.softmax(scores, axis=-1)
