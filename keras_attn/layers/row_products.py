"""The projections and feed-forward nets as 2-D matrix products on rows (`project`,
`feedforward`), on Keras's int8 kernels as well (`int8_product`)."""

import math

import keras
from keras import ops

from keras_attn.layers.compute_plan import PLAIN


def _plain(dense):
    """Whether `dense`'s kernel may be read directly: not quantized by Keras nor kept in
    GGUF's blocks (`BlockDense`); Keras's `kernel` of a layer with LoRA is the merged
    one, as its own `call` uses."""
    return not getattr(dense, "quantization_mode", None) and not hasattr(dense, "block_format")


def row_kernels(layers, input_axes=1):
    """What `rows_product` multiplies by for each of `layers`: `None` for a float kernel,
    `_int8_kernel`'s pair for Keras's int8 one; `None` instead of the list when a layer
    is quantized otherwise (its own call is then used for all)."""
    kernels = []
    for layer in layers:
        if _plain(layer):
            kernels.append(None)
            continue
        int8 = _int8_kernel(layer, input_axes)
        if int8 is None:  # quantized otherwise: int4, LoRA on int8
            return None
        kernels.append(int8)
    return kernels


def _int8_kernel(dense, input_axes):
    """`(kernel, scale)` of a `Dense` or `EinsumDense` Keras quantized to int8 (its
    `quantize("int8")`, or weights only), as `(in, out)` int8 and `(out,)` float (the
    kernel's multiplier: `kernel ≈ float kernel * scale`); `None` for any other layer,
    layout or mode, and with LoRA on (the layer's own call adds it)."""
    if getattr(dense, "quantization_mode", None) != "int8" or getattr(dense, "lora_enabled", 0):
        return None
    kernel, scale = dense._kernel, dense.kernel_scale
    if isinstance(dense, keras.layers.EinsumDense):
        scale = dense._adjust_scale_for_dequant(scale)  # broadcasts against the kernel
    out_shape = tuple(kernel.shape[input_axes:])
    if tuple(scale.shape[len(scale.shape) - len(out_shape) :]) != out_shape or math.prod(
        scale.shape
    ) != math.prod(out_shape):
        return None
    in_size = math.prod(kernel.shape[:input_axes])
    return ops.reshape(kernel, (in_size, -1)), ops.reshape(scale, (-1,))


def int8_product(rows, kernel, scale, quantizer, transposed=False):
    """`rows` `(n, in)` by an int8 `kernel` `(in, out)` (`(out, in)` if `transposed`,
    as a tied embedding's table) whose float form is
    `kernel / scale` (`scale` `(out,)`, Keras's int8 layers' `kernel_scale`): the rows
    quantized by `quantizer` (the layer's own: absmax per row), multiplied in int8 with
    int32 sums on one 2-D product, scaled back, as Keras's int8 `Dense` computes; with
    no `quantizer` (weights-only int8) the float rows by the kernel made float. A single
    row is multiplied as two (a zero row added): XLA's CPU backend runs an int8
    matrix-vector product on a slow generic loop, a two-row product on its fast kernel
    (docs/speed.md). A `transposed` kernel on TensorFlow is transposed inside
    the product for one row (a transpose of its own XLA copies each call); several rows
    multiply it each as a batch of one, the form the tied head had (the 2-D one measured
    no faster at batch 8)."""
    if not quantizer:
        kernel = ops.cast(kernel, rows.dtype)
        return ops.divide(
            ops.matmul(rows, ops.transpose(kernel) if transposed else kernel),
            ops.cast(scale, rows.dtype),
        )
    quantized, row_scale = quantizer(rows, axis=-1)
    single = rows.shape[0] == 1
    if single:
        quantized = ops.pad(quantized, ((0, 1), (0, 0)))
    if transposed and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        if single:  # the transpose inside the product: a separate one XLA copies
            sums = tf.linalg.matmul(quantized, kernel, transpose_b=True, output_type=tf.int32)
        else:  # each row a batch of one: the 2-D form was no faster for several rows
            sums = ops.matmul(quantized[:, None, :], ops.transpose(kernel))[:, 0]
    else:
        sums = ops.matmul(quantized, ops.transpose(kernel) if transposed else kernel)
    if single:
        sums = sums[:1]
    return ops.divide(ops.cast(sums, rows.dtype), ops.cast(row_scale * scale, rows.dtype))


def _exact_gelu(x):
    # erf(x / sqrt 2), as Grappler's remapper matches it to fuse with oneDNN into the
    # product before it (`GeluExact`); TensorFlow's own GELU is written with erfc.
    return 0.5 * x * (1.0 + ops.erf(x * 0.7071067811865476))


def rows_product(dense, rows, input_axes=1, int8=None, plan=PLAIN):
    """`dense` (a `Dense` or `EinsumDense`) on `rows` `(n, in)`: one matrix product, its
    bias added as a `BiasAdd` on TensorFlow (Grappler fuses the two into one
    `_FusedMatMul`; an `AddV2` after a reshape it cannot), then a `Dense`'s activation;
    `plan.product(dense, input_axes)` in place of the product when it gives one."""
    with keras.name_scope(dense.name):  # the layer's name in graphs and profiles
        replaced = plan.product(dense, input_axes)
        if replaced is not None:
            return _activation(dense, replaced(rows))
        if int8 is not None:  # `row_kernels`' pair for an int8 layer
            rows = int8_product(rows, *int8, getattr(dense, "inputs_quantizer", None))
        else:
            kernel = ops.cast(dense.kernel, rows.dtype)
            in_size = math.prod(kernel.shape[:input_axes])
            rows = ops.matmul(rows, ops.reshape(kernel, (in_size, -1)))
        if dense.bias is not None:
            bias = ops.reshape(ops.cast(dense.bias, rows.dtype), (-1,))
            if keras.backend.backend() == "tensorflow":
                import tensorflow as tf

                rows = tf.nn.bias_add(rows, bias)
            else:
                rows = rows + bias
        return _activation(dense, rows)


def _activation(dense, rows):
    activation = getattr(dense, "activation", None)
    if activation is keras.activations.gelu:
        return _exact_gelu(rows)
    return rows if activation is None else activation(rows)


def _flatten(x, input_axes):
    """`x` `(*leading, *in)` as rows `(n, in)`: itself when it is rows already."""
    if len(x.shape) == 1 + input_axes and input_axes == 1:
        return x
    return ops.reshape(x, (-1, math.prod(x.shape[len(x.shape) - input_axes :])))


def _unflatten(rows, x, out_shape, input_axes=1):
    """A product's `rows` `(n, out)` shaped as `x`'s leading axes and `out_shape`."""
    leading = len(x.shape) - input_axes
    if leading == 1 and len(out_shape) == 1:
        return rows
    return ops.reshape(rows, (*(ops.shape(x)[i] for i in range(leading)), *out_shape))


def project(dense, x, input_axes=1, plan=PLAIN):
    """`dense(x)` as one 2-D matrix product: `(batch, length, *in) -> (batch, length, *out)`,
    or on rows `(n, *in) -> (n, *out)` (a block on its real tokens' rows).

    The same weights and result as calling the `EinsumDense` layer, whose
    einsum TensorFlow runs as a broadcast batched product (slower on CPU, with
    and without XLA); `input_axes` is how many trailing axes it contracts. A
    layer Keras quantized to int8 multiplies on `int8_product`; other quantized
    layers (int4, LoRA on int8) are called as they are. `plan`: the calling layer's
    `compute_plan` (`keras_attn.layers.compute_plan`).
    """
    kernels = row_kernels([dense], input_axes)
    if kernels is None:
        return dense(x) if len(x.shape) > 1 + input_axes else dense(x[None])[0]
    rows = rows_product(dense, _flatten(x, input_axes), input_axes, kernels[0], plan)
    return _unflatten(rows, x, tuple(dense.kernel.shape[input_axes:]), input_axes)


def feedforward(first, second, x, dropout=None, training=None, gate=None, plan=PLAIN):
    """`second(dropout(first(x)))`, two `Dense` layers on `(batch, length, dim)` (or rows
    `(n, dim)`), on rows
    `(batch * length, dim)`: each product with its bias and activation as TensorFlow's
    graph optimizer fuses them (`rows_product`; the served MiniLM's profile in
    docs/speed.md measured it), where `Dense` on a sequence reshapes around each product
    and adds its bias apart. With a `gate` (a `Dense` with the activation: a gated linear
    unit, Llama's SwiGLU, Gemma's GeGLU) the inner rows are `gate(x) * first(x)`. Keras's
    int8 layers multiply on `int8_product`; other quantized layers are called as they are.
    `plan`: the calling block's `compute_plan`."""
    layers = (first, second) if gate is None else (first, second, gate)
    kernels = row_kernels(layers)
    if kernels is None:
        inner = first(x) if gate is None else gate(x) * first(x)
        return second(inner if dropout is None else dropout(inner, training=training))
    flat = _flatten(x, 1)
    rows = rows_product(first, flat, int8=kernels[0], plan=plan)
    if gate is not None:
        rows = rows_product(gate, flat, int8=kernels[2], plan=plan) * rows
    if dropout is not None:
        rows = dropout(rows, training=training)
    return _unflatten(rows_product(second, rows, int8=kernels[1], plan=plan), x, (second.units,))
