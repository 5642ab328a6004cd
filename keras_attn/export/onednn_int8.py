"""int8 projections on oneDNN's quantized matrix products, for SavedModels.

Keras's int8 layers (`quantized_copy`) multiply in TensorFlow's generic integer
kernels, which on CPUs are slower than float32 (docs/speed.md measured 3× at batch
32). TensorFlow built with oneDNN, as its x86 wheels and TF Serving are, has
`QuantizedMatMulWithBiasAndDequantize`: unsigned 8-bit activations by signed 8-bit
weights with 32-bit sums (AVX-512 VNNI's instruction where the CPU has it), the float
bias added and the result scaled back to float32. `int8_products(model)`, while a
serving function is traced, makes every projection that runs through
`keras_attn.layers.layer_utils`' row products (the attention's four, the
feed-forward net's two) call that op instead of the float `MatMul`:

- weights: int8 with one scale per output column (absmax / 127), made once here;
- activations: quantized per call and per row, as Keras's int8 layers do: each row
  divided by its largest magnitude and shifted from [-1, 1] into [0, 2], the op's one
  fixed range, then rounded to unsigned 8 bits; the shift comes back out through the
  op's bias (`-Σ_i q[i, j]`), and the row's and column's scales and the float bias are
  applied to the float result. One range for the whole tensor (ONNX Runtime's dynamic
  quantization) is cheaper, but a batch then shares the range of its widest row: the
  fine-tuned MiniLM's labels matched float32's on 98.1% of the Rotten Tomatoes test
  split at batch 32 that way, on 99.2% per row (docs/speed.md).

Heads, embeddings, layer norms and the attention's scores stay float32. The op has a
kernel only where TensorFlow's oneDNN is on (by default on CPUs with AVX-512 VNNI,
bfloat16 or AMX; elsewhere `TF_ENABLE_ONEDNN_OPTS=1`): `onednn_int8_available()` asks
TensorFlow by running the op once; without oneDNN TensorFlow registers a kernel that
gives no output, and a request fails with "Missing 0-th output", never a wrong answer.
"""

import contextlib
import functools
import math
import re

import numpy as np

from keras_attn.layers import layer_utils


@functools.cache
def onednn_int8_available():
    """Whether this TensorFlow runs oneDNN's int8 product (and gets it right): the op on
    a 2 × 3 by 3 × 2 product, compared with float32."""
    import tensorflow as tf

    rows = np.array([[0.5, -1.0, 2.0], [1.5, 0.25, -0.75]], "float32")
    kernel = np.array([[1.0, -0.5], [0.25, 2.0], [-1.5, 0.75]], "float32")
    bias = np.array([0.1, -0.2], "float32")
    try:
        product = Int8Product(kernel, bias)
        answer = product(tf.constant(rows)).numpy()
    except (tf.errors.OpError, TypeError, ValueError):
        return False
    return bool(np.abs(answer - (rows @ kernel + bias)).max() < 0.05)


class Int8Product:
    """`rows @ kernel + bias` for `rows` `(n, in)` on oneDNN's int8 product.

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
        self.step = tf.Variable(step, trainable=False, name="kernel_step")
        shift = -quantized.astype("float32").sum(axis=0)
        self.shift = tf.Variable(shift, trainable=False, name="kernel_shift")
        self.bias = tf.Variable(bias.astype("float32"), trainable=False, name="bias")

    def __call__(self, rows):
        import tensorflow as tf

        rows = tf.convert_to_tensor(rows, tf.float32)
        # Each row divided by its largest magnitude, into [-1, 1], then shifted into
        # [0, 2]: one fixed range for the whole tensor, 8 bits of it per row.
        scale = tf.reduce_max(tf.abs(rows), axis=-1, keepdims=True)
        # A row of zeros stays zeros; a row holding NaN gives NaN, as float32's would.
        scale = tf.maximum(scale, 1e-30)
        quantized, _, _ = tf.raw_ops.QuantizeV2(
            input=rows * tf.math.reciprocal(scale) + 1.0,
            min_range=0.0,
            max_range=2.0,
            T=tf.quint8,
            mode="SCALED",
            round_mode="HALF_TO_EVEN",
        )
        # The op adds its bias in the product's units: -Σ_i q[i, j] takes the shift
        # back out; a weight range of ±127 makes its weight scale exactly 1.
        product = tf.raw_ops.QuantizedMatMulWithBiasAndDequantize(
            a=quantized,
            b=tf.bitcast(self.kernel, tf.qint8),
            bias=self.shift,
            min_a=tf.constant(0.0),
            max_a=tf.constant(2.0),
            min_b=tf.constant(-127.0),
            max_b=tf.constant(127.0),
            min_freezed_output=tf.constant(-1.0),
            max_freezed_output=tf.constant(1.0),
            Toutput=tf.float32,
            input_quant_mode="SCALED",
        )
        return tf.nn.bias_add(product * self.step * scale, self.bias)


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


@contextlib.contextmanager
def int8_products(model):
    """While tracing inside it, `model`'s projections compute on oneDNN's int8 product.

    Args:
        model: a built float Keras model (LoRA adapters merged).

    Returns:
        A context manager.

    Example:

    >>> import numpy as np, tensorflow as tf
    >>> from keras_attn.export.onednn_int8 import int8_products, onednn_int8_available
    >>> from keras_attn.models import BertBackbone
    >>> model = BertBackbone.from_size("tiny", vocabulary_size=50)
    >>> x = {"token_ids": np.array([[2, 7, 9, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32")}
    >>> floats = np.asarray(model(x)["sequence_output"])
    >>> with int8_products(model):
    ...     served = tf.function(model).get_concrete_function(x)
    >>> ops = [node.op for node in served.graph.as_graph_def().node]
    >>> ops.count("QuantizedMatMulWithBiasAndDequantize")  # 2 layers, 6 products each
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
    with layer_utils.replaced_products(products):
        yield
