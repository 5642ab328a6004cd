"""The graph a SavedModel serves: the model's blocks on their real tokens' rows, layer
norms in oneDNN's fused form, transposes on TensorFlow's own kernel, and products an
exporter chooses (oneDNN's int8), given to a copy of the model the export owns."""

import keras

from keras_attn.layers.compute_plan import ComputePlan

_SAME_WIDTH_INTEGERS = {"float32": "int32", "bfloat16": "int16", "float16": "int16"}
# From this many real rows on, a block's layer norms take oneDNN's fused form.
FUSED_NORM_ROWS = 256


class ServingPlan(ComputePlan):
    """How the layers of a model served by TF Serving write their arithmetic (a
    `keras_attn.layers.compute_plan.ComputePlan`); TensorFlow only, never for training.

    - **Real rows** (`RealRows`): an encoder block with a padding mask runs its
      projections, norms and feed-forward net on the real tokens alone.
    - **Transposes** (`heads_first`) of float tensors run on the bits read as integers.
    - **Layer norms** over many real rows take oneDNN's fused form (`normalize`).
    - **Products** (`products`) put in place of some layers' own.

    A plan belongs to one export: while a graph is traced it keeps the rows it made for
    each padding mask, so a stack of blocks gathers its input once (run eagerly, a copy
    keeps nothing between calls).

    Args:
        products: `{id(layer): (layer, input_axes, product)}`: `product(rows)` is the
            rows' product with the layer's kernel, bias added
            (`keras_attn.export.onednn_int8.int8_products`); `None`: none.
        onednn: whether those products are oneDNN's own ops (the graph is then served
            only where oneDNN is on, and float32 layer norms take its fused form too).
    """

    def __init__(self, products=None, onednn=False):
        self._products = dict(products or {})
        self._onednn = bool(onednn)
        self._rows = {}  # `Tensor.ref()` of a padding mask -> (mask, its RealRows)
        self.scattered = {}  # `Tensor.ref()` of a scatter's output -> (RealRows, rows, it)

    def attach(self, model):
        """Gives every layer of `model` that reads a `compute_plan` this plan; returns
        `model`. For a copy the export owns: the layers compute this way from then on."""
        for layer in model._flatten_layers(include_self=True):
            if isinstance(getattr(type(layer), "compute_plan", None), ComputePlan):
                layer.compute_plan = self
        return model

    def heads_first(self, x):
        """The transpose on TensorFlow's Eigen kernel: with oneDNN on, TensorFlow runs a
        float `Transpose` as `_MklTranspose`, whose per-call cost is most of a small
        tensor's transpose (about 13 us a call at MiniLM's (1, 25, 12, 32) where the same
        bits as integers take 2; the served MiniLM answered 5-10% sooner, docs/speed.md).
        Bitcasts share the buffer."""
        integer = _SAME_WIDTH_INTEGERS.get(keras.backend.standardize_dtype(x.dtype))
        if not integer or keras.backend.backend() != "tensorflow":
            return super().heads_first(x)
        import tensorflow as tf

        return tf.bitcast(tf.transpose(tf.bitcast(x, integer), (0, 2, 1, 3)), x.dtype)

    def real_rows(self, padding_mask):
        """The `RealRows` of `padding_mask`, one per mask tensor traced; `None` without a
        mask or off TensorFlow."""
        if padding_mask is None or keras.backend.backend() != "tensorflow":
            return None
        import tensorflow as tf

        if tf.executing_eagerly():  # nothing to share between calls: kept nowhere
            return RealRows(padding_mask, None)
        key = padding_mask.ref()
        if key not in self._rows:
            self._rows[key] = (padding_mask, RealRows(padding_mask, self))
        return self._rows[key][1]

    def normalize(self, norm, x, rows=None):
        """`norm(x)`; on a block's real rows (`rows`), a `LayerNormalization` over the
        last axis of `FUSED_NORM_ROWS` rows or more is written as Keras 2 wrote its fused
        form (a `FusedBatchNormV3` in training mode over the rows, then the scale and the
        offset), which Grappler's remapper makes one oneDNN `_MklLayerNorm` where oneDNN
        is on: one pass over the rows in the compute dtype, where Keras's form is about
        ten element-wise ops and, under bfloat16, a cast to float32 and back. Fewer rows
        keep Keras's form: the oneDNN op's fixed cost per call is more than it saves.

        Only in the exports made for oneDNN's processors: bfloat16 compute, and float32
        among oneDNN's int8 products; oneDNN's op takes float32 and bfloat16, not
        float16. A float32 SavedModel is also served where oneDNN is off, and there
        TensorFlow's own `FusedBatchNormV3` is slower than Keras's form (the fused
        MiniLM took 8.5% longer at batch 32, docs/speed.md)."""
        dtype = keras.backend.standardize_dtype(x.dtype)
        if not (
            isinstance(rows, RealRows)
            and isinstance(norm, keras.layers.LayerNormalization)
            and len(x.shape) == 2
            and (dtype == "bfloat16" or (self._onednn and dtype == "float32"))
            and norm.axis in (-1, [-1])
            and norm.center
            and norm.scale
            and not norm.rms_scaling
        ):
            return norm(x)
        import tensorflow as tf

        def fused():
            count = tf.shape(x)[0]
            ones = tf.fill([count], tf.constant(1.0))
            zeros = tf.fill([count], tf.constant(0.0))
            empty = tf.constant([], "float32")
            y = tf.raw_ops.FusedBatchNormV3(
                x=tf.reshape(x, [1, count, x.shape[-1], 1]), scale=ones, offset=zeros,
                mean=empty, variance=empty, epsilon=norm.epsilon, data_format="NCHW",
                is_training=True,
            )[0]  # fmt: skip
            y = tf.reshape(y, tf.shape(x)) * tf.cast(norm.gamma, x.dtype)
            return y + tf.cast(norm.beta, x.dtype)

        return tf.cond(rows.many, fused, lambda: norm(x))

    def product(self, dense, input_axes):
        replaced = self._products.get(id(dense))
        if replaced is not None and replaced[0] is dense and replaced[1] == input_axes:
            return replaced[2]
        return None


class RealRows:
    """The real tokens of a padded batch as rows, for graphs TF Serving runs.

    A request of texts is padded to its longest; every projection, layer norm and
    feed-forward net computes the padding positions' rows for nothing. A block given
    these (`ServingPlan.real_rows`) gathers the `n` real rows of its `(batch, length,
    dim)` input, runs its per-token layers on `(n, dim)` and scatters the result back
    (zeros at the padding positions, which no real token reads: the attention masks
    them as keys). At batch 32 of Rotten Tomatoes snippets 52% of the positions are
    real (docs/speed.md). The row count is known when the graph runs.

    `gather` of a tensor its `scatter` made returns the rows it scattered: a stack of
    blocks gathers once and scatters once, the scatters between blocks left with no
    reader (the graph drops them).

    Args:
        padding_mask: `(batch, length)`, True (or 1) at real tokens.
        plan: the `ServingPlan` that keeps what the scatters made while a graph is
            traced, or `None` (run eagerly: nothing kept).
    """

    def __init__(self, padding_mask, plan):
        import tensorflow as tf

        self._tf, self._plan = tf, plan
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
        self.many = count >= FUSED_NORM_ROWS  # one test per request (`normalize`)

    def gather(self, x):
        """`(batch, length, *dims)` -> `(n, *dims)`: the real tokens' rows."""
        kept = None if self._plan is None else self._plan.scattered.get(x.ref())
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
        if self._plan is not None:
            self._plan.scattered[padded.ref()] = (self, rows, padded)
        return padded


def serving_copy(model, onednn_int8=False, owned=False):
    """The model a SavedModel serves: a copy of `model` (or `model` itself when `owned`:
    a copy the export made already) whose layers compute with a `ServingPlan`; with
    `onednn_int8`, its float projections on oneDNN's int8 products
    (`keras_attn.export.onednn_int8.int8_products`, made for the copy's own layers).
    `model` itself is left as it is: a model trained or exported elsewhere at the same
    time computes as ever."""
    if not owned:
        from keras_attn.export.quantization import rebuilt_copy

        model = rebuilt_copy(model)
    products = None
    if onednn_int8:
        from keras_attn.export.onednn_int8 import int8_products

        products = int8_products(model)
    return ServingPlan(products, onednn=onednn_int8).attach(model)
