"""Layers whose weights stay in GGUF's quantized blocks: `BlockDense` (a projection) and
`BlockEmbedding` (a tied token embedding and output head), and `block_product`."""

import math

import keras
import numpy as np
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.quantized_blocks import native
from keras_attn.layers.quantized_blocks.block_formats import block_format as _format
from keras_attn.layers.quantized_blocks.block_formats import dequantize

# Up to this many rows multiply on the custom call (decoding, a short prompt); more by the
# blocks made float once, where the float product's reuse of each weight wins (Gemma 3
# 270M on 2 cores: a 64-token prompt 0.10 s on the custom call, 0.22 s made float; 512
# rows 2.3 s and 1.5 s); rows repacked by eights multiply on it at any count (their int8
# products take 8 rows per unpacked block).
NATIVE_ROWS = 64


def block_product(rows, blocks, format_name):
    """`rows` `(n, in)` float32 times the matrix `blocks` `(out, row_bytes)` holds (uint8,
    each of its `out` rows GGUF's blocks of `in` weights in `format_name`): `(n, out)`.
    On JAX's CPU backend a few rows multiply on the custom call
    (`keras_attn.layers.quantized_blocks.native`), which reads the blocks as they are;
    where it has AVX-512 VNNI (`native.int8()`) the rows are rounded to int8 per 32
    columns first and the products are integer, as llama.cpp's are, and rows repacked by
    eights (`Q4_0x8` / `Q4_1x8`) multiply there at any count. Otherwise the blocks are
    made float (`block_formats.dequantize`) and multiplied."""
    f = _format(format_name)
    n = rows.shape[0]
    if f.by_eights and n is not None and native.usable(rows) and native.int8():
        return native.product(rows, ops.convert_to_tensor(blocks), f.code, 2)
    if n is not None and n <= NATIVE_ROWS and native.usable(rows) and not f.by_eights:
        mode = 1 if native.int8() else 0
        return native.product(rows, ops.convert_to_tensor(blocks), f.code, mode)
    weights = dequantize(blocks, f.name, rows.shape[-1])
    return ops.matmul(rows, ops.transpose(ops.cast(weights, rows.dtype)))


def _block_variable(layer, rows, columns, block_format_name, name):
    f = _format(block_format_name)
    return layer.add_weight(
        name=name,
        shape=(rows, f.row_bytes(columns)),
        initializer="zeros",
        dtype="uint8",
        trainable=False,
    )


@keras_attn_export("keras_attn.layers.BlockDense")
@keras.saving.register_keras_serializable(package="keras_attn")
class BlockDense(keras.layers.Layer):
    """A projection whose kernel stays in one of GGUF's quantized block formats (as
    llama.cpp keeps it): the last `input_axes` axes of the input times a matrix of
    `prod(output_shape)` rows, each row `in` weights in blocks of 32 or 256, plus a
    float bias. Loading a GGUF file with `from_gguf(path, keep_blocks=True)` builds its
    projections as these; `block_format` is the tensor's GGUF type (`"Q4_1"`, `"Q4_K"`).

    Args:
        output_shape: the output's trailing shape (an int or a tuple: `(heads, head_dim)`).
        block_format: a name in `keras_attn.layers.quantized_blocks.FORMATS`.
        input_axes: how many trailing input axes are contracted (2: a per-head input).
        activation: applied to the output (Keras's name or function).
        use_bias: whether a float bias is added.
        lora_rank: build with rank-`lora_rank` LoRA adapters (as `enable_lora` adds them;
            what a saved layer's config keeps), or `None`.
        lora_alpha: the adapters' scale numerator (default `lora_rank`).
        **kwargs: base `Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: `(..., *in)` float.

    Returns:
        `(..., *output_shape)`.

    Example:

    >>> import numpy as np
    >>> layer = BlockDense(8, block_format="Q8_0")
    >>> layer.build((None, 32))
    >>> tuple(layer.blocks.shape), str(layer.blocks.dtype)  # 8 rows of one 34-byte block
    ((8, 34), 'uint8')
    >>> tuple(layer(np.ones((2, 32), "float32")).shape)
    (2, 8)
    >>> layer.enable_lora(4)  # float adapters on the frozen blocks, as on Keras's `Dense`
    >>> [w.name for w in layer.trainable_weights]
    ['lora_kernel_a', 'lora_kernel_b']
    """

    def __init__(
        self,
        output_shape,
        block_format,
        input_axes=1,
        activation=None,
        use_bias=False,
        lora_rank=None,
        lora_alpha=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        shape = (output_shape,) if isinstance(output_shape, int) else tuple(output_shape)
        if not shape or any(not isinstance(d, int) or d < 1 for d in shape):
            raise ValueError(
                f"Expected `output_shape` of positive ints. Received: output_shape={output_shape}"
            )
        if not isinstance(input_axes, int) or input_axes < 1:
            raise ValueError(f"Expected `input_axes` >= 1. Received: input_axes={input_axes}")
        f = _format(block_format)
        if f.by_eights and math.prod(shape) % 8:
            raise ValueError(
                f"Expected a multiple of 8 outputs for rows repacked by eights "
                f"({f.name}). Received: output_shape={output_shape}"
            )
        self.block_format = f.name
        self.units_shape = shape
        self.input_axes = input_axes
        self.activation = keras.activations.get(activation)
        self.use_bias = use_bias
        if lora_rank is not None and (not isinstance(lora_rank, int) or lora_rank < 1):
            raise ValueError(f"Expected `lora_rank` >= 1 or None. Received: lora_rank={lora_rank}")
        self.lora_rank, self.lora_alpha, self.lora_enabled = lora_rank, lora_alpha, False

    def build(self, input_shape):
        columns = math.prod(input_shape[len(input_shape) - self.input_axes :])
        self.input_dim = columns
        units = math.prod(self.units_shape)
        self.blocks = _block_variable(self, units, columns, self.block_format, "blocks")
        self.bias = None
        if self.use_bias:
            self.bias = self.add_weight(name="bias", shape=(units,), initializer="zeros")
        self.built = True
        if self.lora_rank:
            self.enable_lora(self.lora_rank, self.lora_alpha)

    def enable_lora(self, rank, lora_alpha=None, a_initializer="he_uniform", b_initializer="zeros"):
        """Adds float low-rank adapters, as Keras's `Dense.enable_lora` does: the output
        gains `(lora_alpha / rank) x A B`, `A` `(in, rank)` and `B` `(rank, out)` float and
        trainable (the blocks never train; `B` starts at zero, so the output does not
        change until it moves)."""
        if not self.built:
            raise ValueError("Cannot enable LoRA on a BlockDense that is not built yet.")
        if self.lora_enabled:
            raise ValueError("LoRA is already enabled on this layer; enable it once.")
        if not isinstance(rank, int) or rank < 1:
            raise ValueError(f"Expected `rank` >= 1. Received: rank={rank}")
        self._tracker.unlock()
        self.lora_kernel_a = self.add_weight(
            name="lora_kernel_a", shape=(self.input_dim, rank), initializer=a_initializer
        )
        self.lora_kernel_b = self.add_weight(
            name="lora_kernel_b", shape=(rank, math.prod(self.units_shape)),
            initializer=b_initializer,
        )  # fmt: skip
        self._tracker.lock()
        self.lora_enabled, self.lora_rank = True, rank
        self.lora_alpha = lora_alpha if lora_alpha is not None else rank

    @property
    def kernel(self):
        """The blocks (what a family's weight table names as the kernel)."""
        return self.blocks

    def save_own_variables(self, store):
        """The blocks, the bias and any LoRA adapters under their own names (Keras's
        `Dense` merges its adapters into the kernel when saved; blocks cannot take them)."""
        store["blocks"] = self.blocks
        if self.bias is not None:
            store["bias"] = self.bias
        if self.lora_enabled:
            store["lora_kernel_a"] = self.lora_kernel_a
            store["lora_kernel_b"] = self.lora_kernel_b
            store["lora_alpha"] = np.array(self.lora_alpha, "float32")

    def load_own_variables(self, store):
        """What `save_own_variables` wrote, adapters enabled from the file's own shapes
        (a model rebuilt from its constructor arguments builds this layer without them)."""
        keys = set(store.keys())
        if "blocks" not in keys:  # written before the names: Keras's numbered variables
            return super().load_own_variables(store)
        self.blocks.assign(store["blocks"])
        if self.bias is not None:
            self.bias.assign(store["bias"])
        if "lora_kernel_a" not in keys:
            if self.lora_enabled:  # as Keras's Dense: adapters the file lacks start at zero
                self.lora_kernel_b.assign(np.zeros(self.lora_kernel_b.shape, "float32"))
            return
        a, b = store["lora_kernel_a"], store["lora_kernel_b"]
        rank = int(a.shape[-1])
        units = math.prod(self.units_shape)
        if tuple(a.shape) != (self.input_dim, rank) or tuple(b.shape) != (rank, units):
            raise ValueError(
                f"Expected {self.name}'s LoRA adapters of shapes ({self.input_dim}, r) and "
                f"(r, {units}). Received: {tuple(a.shape)} and {tuple(b.shape)}"
            )
        if not self.lora_enabled:
            self.enable_lora(rank, float(np.asarray(store["lora_alpha"])))
        self.lora_kernel_a.assign(a)
        self.lora_kernel_b.assign(b)

    def call(self, inputs):
        leading = ops.shape(inputs)[: len(inputs.shape) - self.input_axes]
        rows = ops.reshape(ops.cast(inputs, "float32"), (-1, self.input_dim))
        out = block_product(rows, self.blocks, self.block_format)
        if self.lora_enabled:
            adapted = ops.matmul(ops.matmul(rows, self.lora_kernel_a), self.lora_kernel_b)
            out = out + adapted * (self.lora_alpha / self.lora_rank)
        if self.bias is not None:
            out = out + self.bias
        out = ops.reshape(out, (*leading, *self.units_shape))
        return ops.cast(self.activation(out), self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return (*input_shape[: len(input_shape) - self.input_axes], *self.units_shape)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "output_shape": list(self.units_shape),
                "block_format": self.block_format,
                "input_axes": self.input_axes,
                "activation": keras.activations.serialize(self.activation),
                "use_bias": self.use_bias,
            }
        )
        if self.lora_rank:
            config.update({"lora_rank": self.lora_rank, "lora_alpha": self.lora_alpha})
        return config


@keras_attn_export("keras_attn.layers.BlockEmbedding")
@keras.saving.register_keras_serializable(package="keras_attn")
class BlockEmbedding(keras.layers.Layer):
    """A token embedding whose table stays in GGUF blocks, tied to the output head as
    `keras.layers.ReversibleEmbedding(tie_weights=True)` is: looking up a token makes
    its row float; `reverse=True` multiplies the hidden states by the table's rows.

    Args:
        input_dim: the vocabulary size.
        output_dim: the embedding width.
        block_format: a name in `keras_attn.layers.quantized_blocks.FORMATS`.
        logit_soft_cap: `tanh(logits / cap) * cap` on the reverse output, or `None`.
        **kwargs: base `Layer` arguments.

    Call arguments:
        inputs: int token ids, or with `reverse=True` hidden states `(..., output_dim)`.
        reverse: whether to compute logits.

    Returns:
        `(..., output_dim)` float embeddings, or `(..., input_dim)` float32 logits.

    Example:

    >>> import numpy as np
    >>> table = BlockEmbedding(10, 32, block_format="Q8_0")
    >>> table.build()
    >>> tuple(table(np.array([[1, 2]])).shape), tuple(table(np.ones((1, 32)), reverse=True).shape)
    ((1, 2, 32), (1, 10))
    """

    lora_enabled = False
    tie_weights = True

    def __init__(self, input_dim, output_dim, block_format, logit_soft_cap=None, **kwargs):
        super().__init__(**kwargs)
        for name, value in (("input_dim", input_dim), ("output_dim", output_dim)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Expected a positive `{name}`. Received: {name}={value!r}")
        self.input_dim = input_dim
        self.output_dim = output_dim
        f = _format(block_format)
        if f.by_eights:  # a token's row must be the file's own row
            raise ValueError(
                "Expected a table in a GGUF format, not repacked by eights. "
                f"Received: block_format={block_format!r}"
            )
        self.block_format = f.name
        self.logit_soft_cap = logit_soft_cap

    def build(self, input_shape=None):
        self.blocks = _block_variable(
            self, self.input_dim, self.output_dim, self.block_format, "blocks"
        )
        self.built = True

    @property
    def embeddings(self):
        """The blocks (what a family's weight table names as the table)."""
        return self.blocks

    def call(self, inputs, reverse=False):
        if reverse:
            rows = ops.reshape(ops.cast(inputs, "float32"), (-1, self.output_dim))
            logits = block_product(rows, self.blocks, self.block_format)
            if self.logit_soft_cap is not None:
                logits = ops.tanh(logits / self.logit_soft_cap) * self.logit_soft_cap
            return ops.reshape(logits, (*ops.shape(inputs)[:-1], self.input_dim))
        ids = ops.cast(inputs, "int32")
        picked = ops.take(self.blocks, ops.reshape(ids, (-1,)), axis=0)
        rows = dequantize(picked, self.block_format, self.output_dim)
        out = ops.reshape(rows, (*ops.shape(ids), self.output_dim))
        return ops.cast(out, self.compute_dtype)

    def compute_output_spec(self, inputs, reverse=False):
        if reverse:
            return keras.KerasTensor((*inputs.shape[:-1], self.input_dim), "float32")
        return keras.KerasTensor((*inputs.shape, self.output_dim), self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "input_dim": self.input_dim,
                "output_dim": self.output_dim,
                "block_format": self.block_format,
                "logit_soft_cap": self.logit_soft_cap,
            }
        )
        return config
