"""Small helpers the attention layers share (internal), each with more than one user:
initializer copies, the projections' construction, input checks, and the heads' layout
(transposes, grouped-query repeats, keyless queries)."""

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


def heads_first(x):
    """`(batch, length, heads, dim)` -> `(batch, heads, length, dim)` (its own inverse)."""
    return ops.transpose(x, (0, 2, 1, 3))


def unmasked(x):
    """`x` without its Keras mask (a copy only when it carries one)."""
    return ops.copy(x) if keras_mask(x) is not None else x


def check_sequence_shapes(**shapes):
    """A ValueError naming the first of `shapes` (name=shape) that is not `(batch, length,
    dim)` with a known dim: the attention layers' inputs."""
    for name, shape in shapes.items():
        if len(shape) != 3 or shape[-1] is None:
            raise ValueError(
                f"Expected `{name}` of shape (batch, length, dim) with a known dim. "
                f"Received: {name}.shape={tuple(shape)}"
            )


def build_sequence_score(score, query_shape, value_shape, key_shape=None):
    """Checks `(batch, length, dim)` query, value and key shapes (a ValueError names the
    input) and builds `score` on query and key unless it came built (deserialised):
    the build of `LocalAttention` and `HardAttention`."""
    key_shape = value_shape if key_shape is None else key_shape
    check_sequence_shapes(query=query_shape, value=value_shape, key=key_shape)
    if not score.built:
        score.build(query_shape, key_shape)


def repeat_heads(x, num_heads):
    """`(batch, length, kv_heads, dim)` keys or values shared by groups of query heads
    (grouped-query attention): each of the `kv_heads` repeated `num_heads // kv_heads`
    times, so query head `h` reads key/value head `h // (num_heads // kv_heads)` (as
    `keras.layers.GroupQueryAttention` and Llama's `repeat_kv`)."""
    repeats = num_heads // x.shape[2]
    return x if repeats == 1 else ops.repeat(x, repeats, axis=2)
