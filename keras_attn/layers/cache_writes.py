"""Writing keys and values into a decoding cache, and Transformer-XL's memory."""

from keras import ops

CACHE_WRITES = ("slice", "scatter")


def check_cache_write(cache_write):
    if cache_write not in CACHE_WRITES:
        raise ValueError(
            f"Expected `cache_write` in {CACHE_WRITES}. Received: cache_write={cache_write!r}"
        )


def update_positions(inputs, updates, index, method="slice"):
    """`inputs` with `updates` written at positions `index ... index + n - 1` of axis 1.

    `method="slice"`: `ops.slice_update` (XLA's dynamic-update-slice; the fastest
    under XLA). `"scatter"`: `ops.scatter_update`, a core TensorFlow op
    (`TensorScatterUpdate`), as fast without XLA: what a graph exported for TF
    Serving needs, since the server does not link XLA's ops.
    """
    check_cache_write(method)
    updates = ops.cast(updates, inputs.dtype)
    if method == "slice":
        start = [0] * len(inputs.shape)
        start[1] = index
        return ops.slice_update(inputs, start, updates)
    batch, count = ops.shape(updates)[0], ops.shape(updates)[1]
    rows = ops.repeat(ops.arange(batch)[:, None], count, axis=1)  # (batch, count)
    columns = ops.cast(index, "int32") + ops.repeat(ops.arange(count)[None, :], batch, axis=0)
    indices = ops.reshape(ops.stack([rows, columns], axis=-1), (-1, 2))  # (batch * count, 2)
    flat = ops.reshape(updates, (-1, *updates.shape[2:]))  # (batch * count, ...)
    return ops.scatter_update(inputs, indices, flat)


def next_memory(memory, inputs, length=None):
    """Transformer-XL's memory after a segment: `[memory; inputs]` (`memory` may be
    `None`) over its last `length` positions (`None`: all), the gradient stopped."""
    kept = inputs
    if memory is not None:
        kept = ops.concatenate([ops.cast(memory, inputs.dtype), inputs], axis=1)
    if length is not None:
        kept = kept[:, -length:]
    return ops.stop_gradient(kept)
