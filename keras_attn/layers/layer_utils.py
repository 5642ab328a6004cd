"""Small helpers shared by the layers (internal), each with more than one user:
initializer copies, the attention projections and feed-forward nets, cache writes,
layouts, Transformer-XL's memory, the single-head sequence attentions' build, and what
a graph for TF Serving asks of the blocks (real rows, fused layer norms)."""

import contextlib
import math
import threading

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


class _TraceState(threading.local):
    """What an export's trace asks of the layers, per thread: tracing runs in the thread
    that calls the function, so a model trained or exported in one thread never sees
    another thread's export (`served_graph`, `replaced_products`)."""

    def __init__(self):
        self.served_graph = 0  # > 0 while a TF Serving graph is traced
        # `RealRows` of the padding masks traced so far, and the rows of each padded
        # tensor they scattered, by `Tensor.ref()` (emptied when the trace ends).
        self.real_rows = {}
        self.scattered = {}
        # `{id(layer): (layer, input_axes, product)}`: products an export puts in place of
        # some layers' (`keras_attn.export.onednn_int8`), `product(rows)` the rows'
        # product with the kernel, bias added.
        self.replaced_products = {}
        # How many `replaced_products(..., onednn=True)` are open: their products are
        # oneDNN's, so the graph is served only where oneDNN is on (`normalize`).
        self.onednn_products = 0
        # While a block runs on its real rows: whether they are `FUSED_NORM_ROWS` or more
        # (a boolean tensor, `normalize`), else None.
        self.fused_norms = None


_TRACE = _TraceState()
_SAME_WIDTH_INTEGERS = {"float32": "int32", "bfloat16": "int16", "float16": "int16"}


@contextlib.contextmanager
def served_graph():
    """While tracing inside it, `heads_first` transposes on TensorFlow's own kernel.

    For graphs TF Serving runs (`export_saved_model`), never trained or compiled with
    XLA. With oneDNN on, TensorFlow runs a float `Transpose` as `_MklTranspose`, whose
    per-call cost is most of a small tensor's transpose: at the fine-tuned MiniLM's shape
    for one request, (1, 25, 12, 32), about 13 us a call where TensorFlow's Eigen
    transpose of the same bits read as integers takes 2; the served MiniLM answered 5-10%
    sooner (docs/speed.md, issue 61). Bitcasts share the buffer.
    """
    _TRACE.served_graph += 1
    try:
        yield
    finally:
        _TRACE.served_graph -= 1
        if not _TRACE.served_graph:
            _TRACE.real_rows.clear()
            _TRACE.scattered.clear()


def serves_real_rows(padding_mask):
    """Whether a block traced now runs its per-token layers on its real rows only
    (`RealRows`): in a graph for TF Serving (`served_graph`), with a padding mask."""
    return (
        bool(_TRACE.served_graph)
        and padding_mask is not None
        and keras.backend.backend() == "tensorflow"
    )


class RealRows:
    """The real tokens of a padded batch as rows, for graphs TF Serving runs.

    A request of texts is padded to its longest; every projection, layer norm and
    feed-forward net computes the padding positions' rows for nothing. A block in a
    served graph (`serves_real_rows`) gathers the `n` real rows of its `(batch, length,
    dim)` input, runs its per-token layers on `(n, dim)` and scatters the result back
    (zeros at the padding positions, which no real token reads: the attention masks
    them as keys). At batch 32 of Rotten Tomatoes snippets 52% of the positions are
    real (docs/speed.md, issue 61). TensorFlow only: the row count is known when the
    graph runs.

    `RealRows.of(padding_mask)` is made once per mask tensor while a served graph is
    traced, and `gather` of a tensor its `scatter` made returns the rows it scattered:
    a stack of blocks gathers once and scatters once, the scatters between blocks left
    with no reader (the graph drops them).

    Args:
        padding_mask: `(batch, length)`, True (or 1) at real tokens.
    """

    def __init__(self, padding_mask):
        import tensorflow as tf

        self._tf = tf
        shape = tf.shape(padding_mask)
        self._batch, self._length = shape[0], shape[1]
        self._positions = self._batch * self._length
        real = tf.reshape(tf.cast(padding_mask, "bool"), [-1])
        self._index = tf.cast(tf.where(real)[:, 0], "int32")  # (n,): the real positions
        # Each position's row: a real token's own, a padding position the zero row after
        # the last (n). Scattering is a gather by it: TensorFlow's `ScatterNd` took 0.54
        # ms a call at batch 32, three times a gather's (docs/speed.md).
        rows = tf.cumsum(tf.cast(real, "int32")) - 1
        count = tf.shape(self._index)[0]
        self._rows = tf.where(real, rows, count)
        self._many = count >= FUSED_NORM_ROWS  # one test per request (`normalize`)

    @classmethod
    def of(cls, padding_mask):
        """The `RealRows` of `padding_mask`, one per mask tensor in a served trace."""
        key = padding_mask.ref()
        if key not in _TRACE.real_rows:
            _TRACE.real_rows[key] = (padding_mask, cls(padding_mask))
        return _TRACE.real_rows[key][1]

    @contextlib.contextmanager
    def fused_norms(self):
        """Inside it, `normalize` fuses the layer norms of these rows when they are many."""
        outer, _TRACE.fused_norms = _TRACE.fused_norms, self._many
        try:
            yield
        finally:
            _TRACE.fused_norms = outer

    def gather(self, x):
        """`(batch, length, *dims)` -> `(n, *dims)`: the real tokens' rows."""
        kept = _TRACE.scattered.get(x.ref())
        if kept is not None and kept[0] is self:
            return kept[1]
        flat = self._tf.reshape(x, [self._positions, *x.shape[2:]])
        return self._tf.gather(flat, self._index)

    def scatter(self, rows):
        """`(n, *dims)` -> `(batch, length, *dims)`, zeros at the padding positions."""
        tf = self._tf
        dims = list(rows.shape[1:])
        with_zeros = tf.pad(rows, [[0, 1]] + [[0, 0]] * len(dims))  # row n: zeros
        padded = tf.reshape(tf.gather(with_zeros, self._rows), [self._batch, self._length, *dims])
        _TRACE.scattered[padded.ref()] = (self, rows, padded)
        return padded


def normalize(norm, x):
    """`norm(x)`; in a block's rows in a graph for TF Serving (`RealRows.fused_norms`),
    a `LayerNormalization` over the last axis of `FUSED_NORM_ROWS` rows or more is
    written as Keras 2 wrote its fused form (a `FusedBatchNormV3` in training mode over
    the rows, then the scale and the offset), which Grappler's remapper makes one oneDNN
    `_MklLayerNorm` where oneDNN is on: one pass over the rows in the compute dtype,
    where Keras's form is about ten element-wise ops and, under bfloat16, a cast to
    float32 and back. Fewer rows keep Keras's form: the oneDNN op's fixed cost per call
    is more than it saves there.

    Only in the exports made for oneDNN's processors: bfloat16 compute, and float32 among
    oneDNN's int8 products (`replaced_products(..., onednn=True)`); oneDNN's op takes
    float32 and bfloat16, not float16.
    A float32 SavedModel is also served where oneDNN is off, and there TensorFlow's own
    `FusedBatchNormV3` is slower than Keras's form: the fused MiniLM took 8.5% longer at
    batch 32 (docs/speed.md, issue 61).
    """
    many = _TRACE.fused_norms
    dtype = keras.backend.standardize_dtype(x.dtype)
    if not (
        many is not None
        and isinstance(norm, keras.layers.LayerNormalization)
        and len(x.shape) == 2
        and (dtype == "bfloat16" or (_TRACE.onednn_products and dtype == "float32"))
        and norm.axis in (-1, [-1])
        and norm.center
        and norm.scale
        and not norm.rms_scaling
    ):
        return norm(x)
    import tensorflow as tf

    def fused():
        rows = tf.shape(x)[0]
        ones = tf.fill([rows], tf.constant(1.0))
        zeros = tf.fill([rows], tf.constant(0.0))
        empty = tf.constant([], "float32")
        y = tf.raw_ops.FusedBatchNormV3(
            x=tf.reshape(x, [1, rows, x.shape[-1], 1]), scale=ones, offset=zeros,
            mean=empty, variance=empty, epsilon=norm.epsilon, data_format="NCHW",
            is_training=True,
        )[0]  # fmt: skip
        y = tf.reshape(y, tf.shape(x)) * tf.cast(norm.gamma, x.dtype)
        return y + tf.cast(norm.beta, x.dtype)

    return tf.cond(many, fused, lambda: norm(x))


FUSED_NORM_ROWS = 256


def heads_first(x):
    """`(batch, length, heads, dim)` -> `(batch, heads, length, dim)` (its own inverse)."""
    integer = _SAME_WIDTH_INTEGERS.get(keras.backend.standardize_dtype(x.dtype))
    if _TRACE.served_graph and integer and keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        bits = tf.transpose(tf.bitcast(x, integer), (0, 2, 1, 3))
        return tf.bitcast(bits, x.dtype)
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


def _plain(dense):
    """Whether `dense`'s kernel may be read directly: not quantized (Keras's `kernel`
    of a layer with LoRA is the merged one, as its own `call` uses)."""
    return not getattr(dense, "quantization_mode", None)


def _row_kernels(layers, input_axes=1):
    """What `_rows_product` multiplies by for each of `layers`: `None` for a float kernel,
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
    (docs/speed.md, issue 62). A `transposed` kernel on TensorFlow is transposed inside
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


@contextlib.contextmanager
def replaced_products(products, onednn=False):
    """Within it (in this thread), `_rows_product` of each layer in `products` calls the
    product given; `onednn`: those products are oneDNN's own ops (a graph holding them
    is served only where oneDNN is on, so `normalize` may take oneDNN's forms too)."""
    _TRACE.replaced_products.update(products)
    _TRACE.onednn_products += bool(onednn)
    try:
        yield
    finally:
        _TRACE.onednn_products -= bool(onednn)
        for key in products:
            _TRACE.replaced_products.pop(key, None)


def _rows_product(dense, rows, input_axes=1, int8=None):
    """`dense` (a `Dense` or `EinsumDense`) on `rows` `(n, in)`: one matrix product, its
    bias added as a `BiasAdd` on TensorFlow (Grappler fuses the two into one
    `_FusedMatMul`; an `AddV2` after a reshape it cannot), then a `Dense`'s activation."""
    with keras.name_scope(dense.name):  # the layer's name in graphs and profiles
        replaced = _TRACE.replaced_products.get(id(dense))
        if replaced is not None and replaced[0] is dense and replaced[1] == input_axes:
            return _activation(dense, replaced[2](rows))
        if int8 is not None:  # `_row_kernels`' pair for an int8 layer
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


def project(dense, x, input_axes=1):
    """`dense(x)` as one 2-D matrix product: `(batch, length, *in) -> (batch, length, *out)`,
    or on rows `(n, *in) -> (n, *out)` (`RealRows`).

    The same weights and result as calling the `EinsumDense` layer, whose
    einsum TensorFlow runs as a broadcast batched product (slower on CPU, with
    and without XLA); `input_axes` is how many trailing axes it contracts. A
    layer Keras quantized to int8 multiplies on `int8_product`; other quantized
    layers (int4, LoRA on int8) are called as they are.
    """
    kernels = _row_kernels([dense], input_axes)
    if kernels is None:
        return dense(x) if len(x.shape) > 1 + input_axes else dense(x[None])[0]
    rows = _rows_product(dense, _flatten(x, input_axes), input_axes, kernels[0])
    return _unflatten(rows, x, tuple(dense.kernel.shape[input_axes:]), input_axes)


def feedforward(first, second, x, dropout=None, training=None, gate=None):
    """`second(dropout(first(x)))`, two `Dense` layers on `(batch, length, dim)` (or rows
    `(n, dim)`), on rows
    `(batch * length, dim)`: each product with its bias and activation as TensorFlow's
    graph optimizer fuses them (`_rows_product`; the served MiniLM's profile in
    docs/speed.md measured it), where `Dense` on a sequence reshapes around each product
    and adds its bias apart. With a `gate` (a `Dense` with the activation: a gated linear
    unit, Llama's SwiGLU, Gemma's GeGLU) the inner rows are `gate(x) * first(x)`. Keras's
    int8 layers multiply on `int8_product`; other quantized layers are called as they are."""
    layers = (first, second) if gate is None else (first, second, gate)
    kernels = _row_kernels(layers)
    if kernels is None:
        inner = first(x) if gate is None else gate(x) * first(x)
        return second(inner if dropout is None else dropout(inner, training=training))
    flat = _flatten(x, 1)
    rows = _rows_product(first, flat, int8=kernels[0])
    if gate is not None:
        rows = _rows_product(gate, flat, int8=kernels[2]) * rows
    if dropout is not None:
        rows = dropout(rows, training=training)
    return _unflatten(_rows_product(second, rows, int8=kernels[1]), x, (second.units,))


def repeat_heads(x, num_heads):
    """`(batch, length, kv_heads, dim)` keys or values shared by groups of query heads
    (grouped-query attention): each of the `kv_heads` repeated `num_heads // kv_heads`
    times, so query head `h` reads key/value head `h // (num_heads // kv_heads)` (as
    `keras.layers.GroupQueryAttention` and Llama's `repeat_kv`)."""
    repeats = num_heads // x.shape[2]
    return x if repeats == 1 else ops.repeat(x, repeats, axis=2)
