"""Small helpers shared by the layers (internal): initializer copies, cache writes,
layouts, the attention projections and fused kernel, the single-head sequence attentions'
build."""

import math

import keras
from keras import ops

from keras_attn.argument_checks import check_positive_number
from keras_attn.layers.masking import keras_mask
from keras_attn.layers.rotary_embedding import RotaryEmbedding


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


def fused_attention(query, key, value, attention_mask, key_dim):
    """`(b, q, heads, v_dim)` and which queries have a key, by the fused op."""
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


def check_output_shape(output_shape):
    """`output_shape` (None, an int or a tuple of positive ints) as a tuple or None."""
    if output_shape is None:
        return None
    shape = (output_shape,) if isinstance(output_shape, int) else output_shape
    try:
        shape = tuple(shape)
    except TypeError:
        shape = None
    if not shape or not all(isinstance(d, int) and d > 0 for d in shape):
        raise ValueError(
            "Expected `output_shape` to be a positive int or a tuple of positive ints. "
            f"Received: output_shape={output_shape!r}"
        )
    return shape


def use_fused_kernel(layer, training, return_attention_scores):
    """Whether a `MultiHeadAttention` call runs as `keras.ops.dot_product_attention`:
    on PyTorch, whose fused kernel (`scaled_dot_product_attention`) made Keras's layer
    1.4-2.4x faster than the einsum-and-softmax path on CPU, when nothing needs that
    path: scaled
    dot scores, no position bias, no scores returned, no dropout, float32 (the
    mixed-precision path keeps its float32 softmax)."""
    return (
        keras.config.backend() == "torch"
        and layer.score == "scaled_dot"
        and layer.position_bias_layer is None
        and not return_attention_scores
        and (not training or layer.dropout == 0)
        and layer.compute_dtype == "float32"
    )


def check_kv_cache(cache, length, num_heads, key_dim):
    """A ValueError unless `cache` is `(batch, 2, length, num_heads, key_dim)`."""
    shape = tuple(cache.shape)
    expected = (2, length, num_heads, key_dim)
    if len(shape) != 5 or not all(
        e is None or s is None or s == e for s, e in zip(shape[1:], expected, strict=False)
    ):
        raise ValueError(
            "Expected `cache` of shape (batch, 2, length, num_heads, head_dim) = "
            f"(batch, {', '.join(str(e) for e in expected)}). Received: "
            f"cache.shape={shape}"
        )


def check_attention_inputs(layer, query_shape, value_shape, key_shape):
    """A ValueError unless `query`, `value`, `key` are (batch, length, features) with
    known features, `key` and `value` agree in length, and (once `layer` is built)
    the features are those it was built for."""
    shapes = {"query": query_shape, "value": value_shape, "key": key_shape}
    for name, shape in shapes.items():
        if len(shape) != 3 or shape[-1] is None:
            raise ValueError(
                f"Expected `{name}` of shape (batch, length, features) with a "
                f"known last dimension. Received: {name}.shape={tuple(shape)}"
            )
    if None not in (value_shape[1], key_shape[1]) and value_shape[1] != key_shape[1]:
        raise ValueError(
            "Expected `key` and `value` with the same length (axis 1). "
            f"Received: key.shape={tuple(key_shape)}, value.shape={tuple(value_shape)}"
        )
    batches = {shape[0] for shape in shapes.values()} - {None}
    if len(batches) > 1:  # never broadcast: Keras's layer refuses a batch of 1 too
        raise ValueError(
            "Expected `query`, `value` and `key` with the same batch size (axis 0). "
            f"Received: query.shape={tuple(query_shape)}, value.shape={tuple(value_shape)}, "
            f"key.shape={tuple(key_shape)}"
        )
    dims = (query_shape[-1], value_shape[-1], key_shape[-1])
    if layer.built and dims != layer._input_dims:
        raise ValueError(
            f"Layer '{layer.name}' was built for last dimensions (query, value, "
            f"key) = {layer._input_dims}. Received: query.shape={tuple(query_shape)}, "
            f"value.shape={tuple(value_shape)}, key.shape={tuple(key_shape)}"
        )


def repeat_heads(x, num_heads):
    """`(batch, length, kv_heads, dim)` keys or values shared by groups of query heads
    (grouped-query attention): each of the `kv_heads` repeated `num_heads // kv_heads`
    times, so query head `h` reads key/value head `h // (num_heads // kv_heads)` (as
    `keras.layers.GroupQueryAttention` and Llama's `repeat_kv`)."""
    repeats = num_heads // x.shape[2]
    return x if repeats == 1 else ops.repeat(x, repeats, axis=2)


def projection_config(layer):
    """The config entries of `layer`'s projection initializers, regularizers and
    constraints (`kernel_*`, `bias_*`)."""
    return {
        f"{part}_{kind}": module.serialize(getattr(layer, f"{part}_{kind}"))
        for part in ("kernel", "bias")
        for kind, module in (
            ("initializer", keras.initializers),
            ("regularizer", keras.regularizers),
            ("constraint", keras.constraints),
        )
    }


def attention_output_spec(layer, query, value, key, return_attention_scores, cache):
    """An attention layer's output specs: the output, then (`return_attention_scores`)
    the `(batch, num_heads, query_len, key_len)` scores, then the updated `cache`."""
    key_shape = None if key is None else key.shape
    output_shape = layer.compute_output_shape(query.shape, value.shape, key_shape)
    outputs = (keras.KerasTensor(output_shape, dtype=layer.compute_dtype),)
    key_length = value.shape[1] if cache is None else cache.shape[2]
    if return_attention_scores:
        scores_shape = (query.shape[0], layer.num_heads, query.shape[1], key_length)
        outputs += (keras.KerasTensor(scores_shape, dtype=layer.compute_dtype),)
    if cache is not None:
        outputs += (keras.KerasTensor(cache.shape, dtype=cache.dtype),)
    return outputs[0] if len(outputs) == 1 else outputs


def check_cache_arguments(layer, cache, cache_update_index, value):
    """A ValueError unless an attention `layer`'s `cache` is `(batch, 2, length, K,
    key_dim)` (`length`: `value`'s for a cross-attention cache, any for an
    incremental one) and `cache_update_index` comes with a cache."""
    if cache is not None:
        length = None if cache_update_index is not None else value.shape[1]
        check_kv_cache(cache, length, layer.num_key_value_heads, layer.key_dim)
    elif cache_update_index is not None:
        raise ValueError("`cache_update_index` needs a `cache`. Received: cache=None")


def check_rotary(max_wavelength, scaling_factor, key_dim):
    """ValueErrors for an attention layer's RoPE arguments: positive numbers, and an
    even `key_dim` (RoPE rotates pairs of features)."""
    check_positive_number("rotary_max_wavelength", max_wavelength, allow_none=True)
    check_positive_number("rotary_scaling_factor", scaling_factor)
    if max_wavelength is not None and key_dim % 2:
        raise ValueError(
            "Expected an even `key_dim` with `rotary_max_wavelength` (RoPE rotates pairs "
            f"of features). Received: key_dim={key_dim}"
        )


def rotary_embedding(layer):
    """The `RotaryEmbedding` of an attention `layer` with `rotary_max_wavelength`
    (None without)."""
    if layer.rotary_max_wavelength is None:
        return None
    return RotaryEmbedding(
        layer.rotary_max_wavelength,
        layer.rotary_scaling_factor,
        name="rotary",
        dtype=layer.dtype_policy,
    )
