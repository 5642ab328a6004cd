"""Attention-mask helpers shared by the attention layer and the blocks (internal)."""

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
    padding_argument, attention_argument, keys_argument = names
    if padding_mask is None:
        padding_mask = keras_mask(keys)
    check_padding_mask(padding_mask, keys, padding_argument, keys_argument)
    check_attention_mask(attention_mask, query_length, keys.shape[1], attention_argument)
    return merge_masks(key_padding_to_attention_mask(padding_mask), attention_mask)


def causal_mask(query_length, key_length, offset=0):
    """`(1, q_len, k_len)` boolean, True where key position <= query position.

    Query row `i` sits at position `offset + i` (a decoding step with a cache: the
    queries are the new positions, the keys the whole cache).
    """
    rows = ops.arange(query_length)[:, None] + ops.cast(offset, "int32")
    cols = ops.arange(key_length)[None, :]
    return ops.expand_dims(ops.greater_equal(rows, cols), 0)


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


def check_attention_mask(attention_mask, query_length, key_length, argument):
    """Raises a ValueError unless the mask broadcasts to `(batch, q_len, k_len)`."""
    if attention_mask is None:
        return
    shape = tuple(attention_mask.shape)
    expected = (query_length, key_length)
    if len(shape) not in (2, 3) or not all(
        m is None or e is None or m in (1, e) for m, e in zip(shape[-2:], expected)
    ):
        raise ValueError(
            f"Expected `{argument}` broadcastable to (batch, query_len, key_len) = "
            f"(batch, {query_length}, {key_length}). Received: {argument}.shape={shape}"
        )


def _fits(a, b):
    return all(x is None or y is None or x == y for x, y in zip(a, b))
