"""int8 projections on oneDNN's quantized matrix products, for SavedModels.

Keras's int8 layers (`quantized_copy`) multiply in TensorFlow's generic integer
kernels, which on CPUs are slower than float32 (docs/speed.md measured 3× at batch
32). TensorFlow built with oneDNN, as its x86 wheels and TF Serving are, has
`_QuantizedMatMul`: unsigned 8-bit activations by signed 8-bit weights with 32-bit sums
(AVX-512 VNNI's instruction where the CPU has it), each output column scaled back to
float32 and the float bias added inside the op. `int8_products(model)` gives, for a
served copy's plan (`keras_attn.export.serving_plan`), that op in place of the float
`MatMul` of every projection that runs through `keras_attn.layers.row_products` (the
attention's four, the feed-forward net's two):

- weights: int8 with one scale per output column (absmax / 127), made once here;
- activations: quantized per call and per row, as Keras's int8 layers do: each row
  divided by its largest magnitude and shifted from [-1, 1] into [0, 2], the op's one
  fixed range, then rounded to unsigned 8 bits; the shift comes back out through the
  op's bias (`-Σ_i W[i, j]`), and the row's scale and the float bias are applied to the
  float result. One range for the whole tensor (ONNX Runtime's dynamic quantization)
  is cheaper, but a batch then shares the range of its widest row: the fine-tuned
  MiniLM's labels matched float32's on 98.1% of the Rotten Tomatoes test split at batch
  32 that way, on 99.2% per row (docs/speed.md).

`_QuantizedMatMul` rather than `QuantizedMatMulWithBiasAndDequantize` (one weight
range per tensor, the column scales applied after it): oneDNN reorders that op's
weights on every call, which makes a single request slower in int8 than in float32
(158 against 58.7 us per product at one request). `_QuantizedMatMul`'s kernel keeps the
int8 weights in oneDNN's layout after the first call (the op's `is_weight_const`): the
weights of an int8 SavedModel are frozen at export, as a served model's are.

Heads, embeddings, layer norms and the attention's scores stay float32. The op is one
of TensorFlow's core ops with no Python wrapper (`_fused_int8_product` builds it from
its definition); its only kernel is oneDNN's, which runs whatever
`TF_ENABLE_ONEDNN_OPTS` says (that variable turns TensorFlow's rewrites of other ops
to oneDNN's on and off: tested). `onednn_int8_available()` asks TensorFlow by running
the op once; a TensorFlow built without oneDNN has no kernel for it, so a server's
warm-up replay or first request fails naming the op, never a wrong answer (not tested
here: every TensorFlow this project installs has oneDNN).
"""

import functools
import math
import re

import numpy as np


@functools.cache
def onednn_int8_available():
    """Whether this TensorFlow runs oneDNN's int8 product (and gets it right): the op on
    a 2 × 3 by 3 × 2 product, compared with float32. A TensorFlow whose private
    `op_def_library._apply_op_helper` (which builds the op) has moved counts as one
    without it: `--quantize int8` then serves Keras's int8 layers, as documented."""
    import tensorflow as tf

    rows = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], "float32")
    kernel = np.array([[1.0, -0.5], [0.25, 2.0], [-1.5, 0.75]], "float32")
    bias = np.array([0.1, -0.2], "float32")
    try:
        product = Int8Product(kernel, bias)
        answer = product(tf.constant(rows)).numpy()
    except (tf.errors.OpError, TypeError, ValueError, ImportError, AttributeError):
        return False
    return bool(np.abs(answer - (rows @ kernel + bias)).max() < 0.05)


class Int8Product:
    """`rows @ kernel + bias` for `rows` `(n, in)` on oneDNN's int8 product.

    The int8 weights are made once here and are frozen: TensorFlow's kernel of the op
    keeps its first call's copy of them (`_fused_int8_product`), so assigning to
    `kernel` after a graph has run has no effect on that graph. Export a new model
    instead.

    Args:
        kernel: float `(in, out)` array.
        bias: float `(out,)` array or `None`.
    """

    def __init__(self, kernel, bias=None):
        import tensorflow as tf

        kernel = np.asarray(kernel, "float32")
        if kernel.ndim != 2:
            raise ValueError(f"Expected a 2-D kernel (in, out). Received shape {kernel.shape}")
        bias = np.zeros(kernel.shape[1], "float32") if bias is None else np.asarray(bias)
        if bias.shape != kernel.shape[1:]:
            raise ValueError(
                f"Expected a bias of shape {kernel.shape[1:]}. Received shape {bias.shape}"
            )
        if not (np.isfinite(kernel).all() and np.isfinite(bias).all()):
            raise ValueError(
                "Expected finite weights to quantize; this layer's kernel or bias holds NaN "
                "or infinity (a diverged run?)."
            )
        step = np.abs(kernel).max(axis=0) / 127.0
        step = np.where(step > 0, step, 1.0).astype("float32")  # a zero column: q = 0
        quantized = np.clip(np.rint(kernel / step), -127, 127).astype("int8")
        self.kernel = tf.Variable(quantized, trainable=False, name="kernel_int8")
        # Each column's range, 127 steps: the op scales each column itself, by the larger
        # magnitude of its two bounds, so this one tensor is passed as both. A variable,
        # not values computed per call: TensorFlow keys its cache of oneDNN primitives on
        # the ranges' buffers (the scales themselves are passed on every call: tested),
        # and a variable keeps its buffer for the servable's life.
        self.kernel_range = tf.Variable(127.0 * step, trainable=False, name="kernel_range")
        # -Σ_i W[i, j]: takes the rows' shift into [0, 2] back out, in float units.
        shift = -(quantized.astype("float32") * step).sum(axis=0)
        self.shift = tf.Variable(shift, trainable=False, name="kernel_shift")
        self.bias = tf.Variable(bias.astype("float32"), trainable=False, name="bias")

    def __call__(self, rows):
        import tensorflow as tf

        rows = tf.convert_to_tensor(rows, tf.float32)
        # Each row divided by its largest magnitude, into [-1, 1], then shifted into
        # [0, 2]: one fixed range for the whole tensor, 8 bits of it per row.
        scale = tf.reduce_max(tf.abs(rows), axis=-1, keepdims=True)
        # 8 bits of [0, 2]: round((rows / scale + 1) * 127.5), halves to even, as
        # `QuantizeV2`'s SCALED mode rounds, written as TensorFlow's own elementwise ops
        # (oneDNN's quantize op took 70 us a call at one request). A row of zeros gives
        # zeros (its scale 0 multiplies the product); a row holding NaN gives NaN, as
        # float32's would.
        steps = tf.round(rows * tf.math.divide_no_nan(127.5, scale) + 127.5)
        quantized = tf.bitcast(tf.cast(steps, tf.uint8), tf.quint8)
        inputs = [
            quantized,
            tf.bitcast(self.kernel, tf.qint8),
            self.shift,
            tf.constant(0.0),
            tf.constant(2.0),
            self.kernel_range,
            self.kernel_range,
        ]
        # (rows / scale) @ kernel: each column's scale applied inside the op.
        product = _fused_int8_product([tf.convert_to_tensor(t) for t in inputs])
        return tf.nn.bias_add(product * scale, self.bias)


PRODUCT_OP = "_QuantizedMatMul"


def _fused_int8_product(inputs, frozen_weights=True):
    """TensorFlow's `_QuantizedMatMul` (oneDNN's fused int8 matrix product; an op of
    TensorFlow's core library with no Python wrapper, hence built from its definition)
    on `[u8 rows, s8 kernel, float bias, min_a, max_a, min_b, max_b]`, `min_b`/`max_b`
    one range per output column, dequantized to float32 with the bias added.

    Against `QuantizedMatMulWithBiasAndDequantize` (one range per tensor, an inner
    product whose weights oneDNN reorders on every call) it takes 58.7 against 158 us
    for 25 x 384 by 384 x 1536 and 1.25 against 1.38 ms at 1,440 rows (docs/speed.md).

    `frozen_weights` (the op's `is_weight_const`): the op's kernel keeps the weights of
    its first call in oneDNN's own layout and multiplies on that copy from then on
    (where a later call's row count asks for another layout it reorders the weights it
    is given); unfrozen, oneDNN works from the stored layout on every call. Frozen, a
    served request of the fine-tuned MiniLM took 13-21% less time, with the same
    answers to the bit (docs/speed.md). The weights must then never change under a
    running graph: right for `Int8Product`, whose weights are its own and fixed; a
    graph that feeds other weights to the same op passes `False`."""
    import tensorflow as tf
    from tensorflow.python.framework import op_def_library

    if tf.executing_eagerly():  # the op is built into a graph, run here as a function
        function = functools.partial(_fused_int8_product, frozen_weights=frozen_weights)
        return tf.function(function, autograph=False)(inputs)
    attributes = dict(
        T1=tf.quint8,
        T2=tf.qint8,
        Tbias=tf.float32,
        Tout=tf.float32,
        U=tf.float32,
        Tdevice_outputs=[tf.float32],
        Thost_outputs=[],
        fused_ops=["BiasAdd", "Dequantize"],
        input_quant_mode="SCALED",
        output_quant_mode="SCALED",
        is_weight_const=frozen_weights,
        is_bias_const=True,
        transpose_a=False,
        transpose_b=False,
        leakyrelu_alpha=0.2,
    )
    _, _, op, _ = op_def_library._apply_op_helper(
        PRODUCT_OP, name="QuantizedMatMul", device_inputs=inputs, host_inputs=[], **attributes
    )
    return op.outputs[0]


def _contracted_axes(layer):
    """How many leading kernel axes `layer` (a `Dense` or `EinsumDense`) contracts with
    its input; `None` where they are not the leading ones."""
    equation = getattr(layer, "equation", None)
    if equation is None:
        return 1
    match = re.fullmatch(r"([\w.]+),(\w+)->([\w.]+)", equation.replace(" ", ""))
    if match is None:
        return None
    inputs, kernel, _ = match.groups()
    contracted = [axis in inputs for axis in kernel]
    count = sum(contracted)
    return count if count and all(contracted[:count]) else None


def int8_products(model):
    """oneDNN's int8 products for `model`'s float projections, as a `ServingPlan` takes
    them (`keras_attn.export.serving_plan.serving_copy(model, onednn_int8=True)` makes
    them for the copy it serves).

    Args:
        model: a built float Keras model (LoRA adapters merged).

    Returns:
        `{id(layer): (layer, input_axes, product)}`: `product(rows)` is the rows'
        product with the layer's kernel on `_QuantizedMatMul`, bias added.

    Example:

    >>> import numpy as np, tensorflow as tf
    >>> from keras_attn.export.onednn_int8 import onednn_int8_available
    >>> from keras_attn.export.serving_plan import serving_copy
    >>> from keras_attn.models import BertBackbone
    >>> model = BertBackbone.from_size("tiny", vocabulary_size=50)
    >>> x = {"token_ids": np.array([[2, 7, 9, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32")}
    >>> floats = np.asarray(model(x)["sequence_output"])
    >>> served = tf.function(serving_copy(model, onednn_int8=True)).get_concrete_function(x)
    >>> ops = [node.op for node in served.graph.as_graph_def().node]
    >>> ops.count("_QuantizedMatMul")  # 2 layers, 6 products each
    12
    >>> ints = served(x)["sequence_output"].numpy() if onednn_int8_available() else floats
    >>> bool(np.abs(ints - floats).max() < 0.2)
    True
    """
    import keras

    products = {}
    for layer in model._flatten_layers(include_self=False):
        if not isinstance(layer, (keras.layers.Dense, keras.layers.EinsumDense)):
            continue
        if getattr(layer, "quantization_mode", None) or getattr(layer, "lora_enabled", False):
            continue
        axes = _contracted_axes(layer)
        if axes is None:
            continue
        kernel = keras.ops.convert_to_numpy(layer.kernel)
        in_size = math.prod(kernel.shape[:axes])
        bias = None if layer.bias is None else keras.ops.convert_to_numpy(layer.bias)
        product = Int8Product(
            kernel.reshape(in_size, -1), None if bias is None else bias.reshape(-1)
        )
        products[id(layer)] = (layer, axes, product)
    return products
