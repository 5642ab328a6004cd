"""Small helpers shared by the layers (internal), each with more than one user:
initializer copies, the attention projections, cache writes, layouts, Transformer-XL's
memory, the single-head sequence attentions' build."""

import math

import keras
from keras import ops

from keras_attn.layers.masking import keras_mask


def clone_initializer(initializer):
    """A new initializer of the same config: sub-layers given one seeded initializer
    object would otherwise draw identical kernels."""
    return initializer.__class__.from_config(initializer.get_config())


def einsum_dense(layer, equation, output_shape, bias_axes, name, use_bias):
    """The attention layers' projections: an `EinsumDense` with `layer`'s initializers
    (copied), regularizers and constraints where it has them, and its dtype policy."""
    return keras.layers.EinsumDense(
        equation,
        output_shape=output_shape,
        bias_axes=bias_axes if use_bias else None,
        kernel_initializer=clone_initializer(layer.kernel_initializer),
        bias_initializer=clone_initializer(layer.bias_initializer),
        kernel_regularizer=getattr(layer, "kernel_regularizer", None),
        bias_regularizer=getattr(layer, "bias_regularizer", None),
        kernel_constraint=getattr(layer, "kernel_constraint", None),
        bias_constraint=getattr(layer, "bias_constraint", None),
        name=name,
        dtype=layer.dtype_policy,
    )


def zero_keyless(output, probabilities, has_key):
    """A query with every key masked attends to nothing: its rows of `output`
    `(batch, q_len, heads, dim)` and of `probabilities` `(batch, heads, q_len, k_len)`
    (either may be `None`) set to zero; `has_key` `(batch|1, q_len|1)` or `None`."""
    if has_key is None:
        return output, probabilities
    if output is not None:
        output = output * ops.cast(has_key[:, :, None, None], output.dtype)
    if probabilities is not None:
        probabilities = probabilities * ops.cast(has_key[:, None, :, None], probabilities.dtype)
    return output, probabilities


def next_memory(memory, inputs, length=None):
    """Transformer-XL's memory after a segment: `[memory; inputs]` (`memory` may be
    `None`) over its last `length` positions (`None`: all), the gradient stopped."""
    kept = inputs
    if memory is not None:
        kept = ops.concatenate([ops.cast(memory, inputs.dtype), inputs], axis=1)
    if length is not None:
        kept = kept[:, -length:]
    return ops.stop_gradient(kept)


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


def heads_first(x):
    """`(batch, length, heads, dim)` -> `(batch, heads, length, dim)`."""
    return ops.transpose(x, (0, 2, 1, 3))


def unmasked(x):
    """`x` without its Keras mask (a copy only when it carries one)."""
    return ops.copy(x) if keras_mask(x) is not None else x


def build_sequence_score(score, query_shape, value_shape, key_shape=None):
    """Checks `(batch, length, dim)` query, value and key shapes (a ValueError names the
    input) and builds `score` on query and key unless it came built (deserialised):
    the build of `LocalAttention` and `HardAttention`."""
    key_shape = value_shape if key_shape is None else key_shape
    for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
        if len(shape) != 3 or shape[-1] is None:
            raise ValueError(
                f"Expected `{name}` of shape (batch, length, dim) with a known dim. "
                f"Received: {name}.shape={tuple(shape)}"
            )
    if not score.built:
        score.build(query_shape, key_shape)


def project(dense, x, input_axes=1):
    """`dense(x)` as one 2-D matrix product: `(batch, length, *in) -> (batch, length, *out)`.

    The same weights and result as calling the `EinsumDense` layer, whose
    einsum TensorFlow runs as a broadcast batched product (slower on CPU, with
    and without XLA); `input_axes` is how many trailing axes it contracts. A
    layer with LoRA or quantized weights is called as it is.
    """
    if getattr(dense, "lora_enabled", False) or getattr(dense, "quantization_mode", None):
        return dense(x)
    kernel = ops.cast(dense.kernel, x.dtype)
    in_size = math.prod(kernel.shape[:input_axes])
    out_shape = tuple(kernel.shape[input_axes:])
    y = ops.matmul(ops.reshape(x, (-1, in_size)), ops.reshape(kernel, (in_size, -1)))
    if dense.bias is not None:
        y = y + ops.reshape(ops.cast(dense.bias, y.dtype), (-1,))
    return ops.reshape(y, (ops.shape(x)[0], ops.shape(x)[1], *out_shape))


def repeat_heads(x, num_heads):
    """`(batch, length, kv_heads, dim)` keys or values shared by groups of query heads
    (grouped-query attention): each of the `kv_heads` repeated `num_heads // kv_heads`
    times, so query head `h` reads key/value head `h // (num_heads // kv_heads)` (as
    `keras.layers.GroupQueryAttention` and Llama's `repeat_kv`)."""
    repeats = num_heads // x.shape[2]
    return x if repeats == 1 else ops.repeat(x, repeats, axis=2)
