"""Multi-head attention with a pluggable scoring function."""

import string

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import (
    check_key_value_heads,
    check_output_shape,
    check_positive_int,
    check_positive_number,
    check_rate,
)
from keras_attn.layers import head_products, masking, windowed_attention
from keras_attn.layers import position_bias as position_biases
from keras_attn.layers.cache_writes import check_cache_write, update_positions
from keras_attn.layers.compute_plan import PLAIN
from keras_attn.layers.dropout import Dropout
from keras_attn.layers.layer_utils import (
    check_sequence_shapes,
    einsum_dense,
    repeat_heads,
    unmasked,
    zero_keyless,
)
from keras_attn.layers.quantized_blocks import BlockDense
from keras_attn.layers.quantized_blocks.block_formats import check_kernel_formats
from keras_attn.layers.rotary_embedding import RotaryEmbedding, check_rotary_arguments
from keras_attn.layers.row_products import project
from keras_attn.layers.scoring import lookup as scoring

# The projections' names (sub-layers), as `kernel_formats` names them.
PROJECTIONS = ("query", "key", "value", "attention_output")


@keras_attn_export("keras_attn.layers.MultiHeadAttention")
class MultiHeadAttention(keras.layers.Layer):
    """Multi-head attention whose scoring function is a choice.

    `head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)`,
    `MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O` (Vaswani et al., 2017),
    where `Attention` is `softmax(score(q, k)) v` with `score` one of the functions
    of `keras_attn.layers.scoring`. A drop-in for `keras.layers.MultiHeadAttention`:
    the same constructor and call arguments and the same weight layout (so
    `set_weights(keras_layer.get_weights())` works), plus `score`. Unlike Keras's
    layer it returns attention scores shaped `(batch, heads, query_len, key_len)`
    in symbolic mode too, and computes the softmax in float32 under mixed
    precision. Inputs are `(batch, length, features)`; Keras's `attention_axes`
    (attention over other axes) is not supported.

    Masks: `attention_mask` (True = may attend), the Keras masks of `query`,
    `value` and `key`, and `use_causal_mask` are combined with a logical AND.
    Masked keys get probability exactly 0; a query whose keys are all masked
    gets zero attention (and an output equal to the output bias), never NaN.

    Args:
        num_heads: number of attention heads (positive int).
        key_dim: size of each head for query and key (positive int).
        value_dim: size of each head for value (`None`: `key_dim`).
        dropout: dropout rate on the attention probabilities, in [0, 1).
        use_bias: whether the dense projections use bias vectors.
        output_bias: whether the output projection has one (`None`: `use_bias`;
            `False` with `use_bias=True`: Qwen 2's biases on query, key and value only).
        output_shape: size (int or tuple) of the output's trailing dimensions
            (`None`: the query's last dimension).
        score: `"scaled_dot"` (default), `"dot"`, `"additive"`, `"cosine"`,
            `"general"`, or an `AttentionScore` instance (a template: the layer
            builds its own copy from the instance's config, as `score_layer`).
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the projection biases.
        kernel_regularizer: regularizer of the projection kernels.
        bias_regularizer: regularizer of the projection biases.
        activity_regularizer: regularizer of the output.
        kernel_constraint: constraint on the projection kernels.
        bias_constraint: constraint on the projection biases.
        seed: optional int seed of the dropout.
        window: `W` for sliding-window attention: query `i` attends to keys `j`
            with `|i - j| <= W` (with `use_causal_mask`: `i - W <= j <= i`), besides
            every other mask. Self-attention without an `attention_mask` or returned
            scores runs blockwise (blocks of `max(W, 64)` positions, each scoring
            `3` blocks of keys): time and memory linear in the length. Otherwise
            (cross-attention, an explicit `attention_mask`, returned scores, a
            cache) the band is one more mask. `None` (default): full attention.
        num_key_value_heads: `K` key/value heads shared by groups of
            `num_heads // K` query heads (grouped-query attention, Ainslie et al.,
            2023; `K = 1`: multi-query attention, Shazeer, 2019); `K` divides
            `num_heads`. `None` (default): `num_heads`. A cache holds `K` heads.
        rotary_max_wavelength: rotary position embedding (RoPE, Su et al., 2021)
            of the projected queries and keys with this base wavelength (Llama:
            10000), query row `i` and key `j` at positions as `position_bias`
            says; `None` (default): none.
        rotary_scaling_factor: RoPE's position scaling (positions divided by it).
        qk_norm_epsilon: normalise each projected query and key head with an
            `RMSNormalization` over `key_dim` of this epsilon, before RoPE (QK-norm,
            Dehghani et al., 2023: Gemma 3, OLMo 2, Qwen 3): sub-layers `query_norm` and
            `key_norm`. `None` (default): none.
        position_bias: a relative-position bias added to the scores before the
            softmax: `"t5"` (T5's learned buckets, `RelativePositionBias`),
            `"t5_causal"` (its causal buckets, for a decoder), `"alibi"`
            (`AlibiBias`), a `PositionBias` instance (a template, as `score`) or
            `None` (default). Query row `i` is position `cache_update_index + i`,
            key `j` position `j`. With a `window` it runs as the band mask, not
            blockwise.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(batch, query_len, query_dim)`.
        value: `(batch, key_len, value_dim)`.
        key: optional `(batch, key_len, key_dim)`; `value` is used when absent.
        query_mask: optional `(batch, query_len)`, filled from the Keras mask.
        value_mask: optional `(batch, key_len)`, filled from the Keras mask.
        key_mask: optional `(batch, key_len)`, filled from the Keras mask.
        attention_mask: optional boolean, broadcastable to
            `(batch, query_len, key_len)`; True where attention is allowed.
        return_attention_scores: whether to also return the probabilities.
        training: whether dropout is active.
        use_causal_mask: whether query position i may attend only to key
            positions <= i (with `cache_update_index`: query row i is position
            `cache_update_index + i`).
        cache: optional `(batch, 2, cache_len, K, head_dim)`: projected keys
            (`[:, 0]`) and values (`[:, 1]`) of earlier positions, as made by
            `compute_cache`. With `cache_update_index` the projections of `key` /
            `value` are written into it at that position and attention runs over the
            whole cache (incremental decoding; the Keras masks of `value` and `key`
            do not apply, `attention_mask` is `(batch, query_len, cache_len)`);
            without, it replaces the projections of `value` and `key` (a
            cross-attention cache: the encoder output projected once).
        cache_update_index: int or scalar tensor, the position of `value`'s first
            row in `cache`.
        cache_write: how the new rows are written into `cache`: `"slice"` (XLA's
            dynamic-update-slice, the fastest under XLA) or `"scatter"` (core
            TensorFlow, what a graph exported for TF Serving needs); same values.

    Returns:
        `attention_output` `(batch, query_len, *output_shape)`, then, if
        `return_attention_scores`, the probabilities before dropout
        `(batch, num_heads, query_len, key_len)`, then, if `cache` is given, the
        updated cache.

    Example:

    >>> import numpy as np
    >>> from keras_attn.layers import MultiHeadAttention
    >>> layer = MultiHeadAttention(num_heads=2, key_dim=8, score="additive")
    >>> query = np.ones((4, 5, 16), "float32")
    >>> value = np.ones((4, 7, 16), "float32")
    >>> output, scores = layer(query, value, return_attention_scores=True)
    >>> tuple(output.shape), tuple(scores.shape)
    ((4, 5, 16), (4, 2, 5, 7))

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
        - [Bahdanau et al., 2015](https://arxiv.org/abs/1409.0473)
        - [Luong et al., 2015](https://arxiv.org/abs/1508.04025)
    """

    # How the projections and transposes are written into a graph (Keras's own ops); an
    # exporter gives a copy of the layer another (`keras_attn.export.serving_plan`).
    compute_plan = PLAIN

    def __init__(
        self,
        num_heads,
        key_dim,
        value_dim=None,
        dropout=0.0,
        use_bias=True,
        output_bias=None,
        output_shape=None,
        score="scaled_dot",
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        kernel_regularizer=None,
        bias_regularizer=None,
        activity_regularizer=None,
        kernel_constraint=None,
        bias_constraint=None,
        seed=None,
        window=None,
        position_bias=None,
        num_key_value_heads=None,
        rotary_max_wavelength=None,
        rotary_scaling_factor=1.0,
        qk_norm_epsilon=None,
        kernel_formats=None,
        **kwargs,
    ):
        super().__init__(activity_regularizer=activity_regularizer, **kwargs)
        self.kernel_formats = check_kernel_formats(kernel_formats, PROJECTIONS)
        check_positive_number("qk_norm_epsilon", qk_norm_epsilon, allow_none=True)
        self.qk_norm_epsilon = qk_norm_epsilon
        check_positive_int("num_heads", num_heads)
        check_positive_int("window", window, allow_none=True)
        check_positive_int("key_dim", key_dim)
        check_positive_int("value_dim", value_dim, allow_none=True)
        check_rate("dropout", dropout)
        check_key_value_heads(num_key_value_heads, num_heads)
        check_rotary_arguments(rotary_max_wavelength, rotary_scaling_factor, key_dim)
        self.num_heads = num_heads
        self.num_key_value_heads = num_key_value_heads or num_heads
        self.rotary_max_wavelength = rotary_max_wavelength
        self.rotary_scaling_factor = float(rotary_scaling_factor)
        self.key_dim = key_dim
        self.value_dim = value_dim or key_dim
        self.dropout = float(dropout)
        self.use_bias = use_bias
        self.output_bias = use_bias if output_bias is None else bool(output_bias)
        self.output_shape = check_output_shape(output_shape)
        # A name or a config (raises on an unknown name); an instance is a template,
        # the layer builds its own copy after the projections, so that weights come
        # in the order of Keras's layer.
        self.score = scoring.serialize(score)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.kernel_regularizer = keras.regularizers.get(kernel_regularizer)
        self.bias_regularizer = keras.regularizers.get(bias_regularizer)
        self.kernel_constraint = keras.constraints.get(kernel_constraint)
        self.bias_constraint = keras.constraints.get(bias_constraint)
        self.seed = seed
        self.window = window
        # A name or a config, as `score`; the layer builds its own copy.
        self.position_bias = position_biases.serialize(position_bias)
        self.supports_masking = True

    def _dense(self, equation, output_shape, bias_axes, name, use_bias=None, input_axes=1):
        use_bias = self.use_bias if use_bias is None else use_bias
        if name in self.kernel_formats:  # kept in GGUF's blocks
            return BlockDense(
                output_shape[1:],
                self.kernel_formats[name],
                input_axes=input_axes,
                use_bias=use_bias,
                name=name,
                dtype=self.dtype_policy,
            )
        return einsum_dense(self, equation, output_shape, bias_axes, name, use_bias)

    def build(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        self._check_inputs(query_shape, value_shape, key_shape)
        heads, key_dim, value_dim = self.num_heads, self.key_dim, self.value_dim
        groups = self.num_key_value_heads  # (grouped-query attention)
        # (batch, length, features) -> (batch, length, heads, head_dim)
        self.query_dense = self._dense("abc,cde->abde", (None, heads, key_dim), "de", "query")
        self.query_dense.build(query_shape)
        self.key_dense = self._dense("abc,cde->abde", (None, groups, key_dim), "de", "key")
        self.key_dense.build(key_shape)
        self.value_dense = self._dense("abc,cde->abde", (None, groups, value_dim), "de", "value")
        self.value_dense.build(value_shape)
        # (batch, length, heads, value_dim) -> (batch, length, *output_shape)
        output_shape = self.output_shape or (query_shape[-1],)
        out = string.ascii_lowercase[4 : 4 + len(output_shape)]
        self.output_dense = self._dense(
            f"abcd,cd{out}->ab{out}",
            (None, *output_shape),
            out,
            "attention_output",
            self.output_bias,
            input_axes=2,
        )
        self.output_dense.build((None, None, heads, value_dim))
        self.score_layer = scoring.instantiate(self.score, name="score", dtype=self.dtype_policy)
        self.score_layer.build((None, None, heads, key_dim), (None, None, heads, key_dim))
        self.dropout_layer = Dropout(self.dropout, seed=self.seed, dtype=self.dtype_policy)
        self.position_bias_layer = None
        if self.position_bias is not None:
            self.position_bias_layer = position_biases.instantiate(
                self.position_bias, heads, name="position_bias", dtype=self.dtype_policy
            )
            self.position_bias_layer.build()
        self.query_norm = self.key_norm = None  # without QK-norm
        if self.qk_norm_epsilon is not None:
            self.query_norm, self.key_norm = (
                keras.layers.RMSNormalization(
                    epsilon=self.qk_norm_epsilon, name=name, dtype=self.dtype_policy
                )
                for name in ("query_norm", "key_norm")
            )
            self.query_norm.build((None, None, heads, key_dim))
            self.key_norm.build((None, None, groups, key_dim))
        self.rotary = None  # without RoPE
        if self.rotary_max_wavelength is not None:
            self.rotary = RotaryEmbedding(
                self.rotary_max_wavelength,
                self.rotary_scaling_factor,
                name="rotary",
                dtype=self.dtype_policy,
            )
        self._input_dims = (query_shape[-1], value_shape[-1], key_shape[-1])
        self.built = True

    def call(
        self,
        query,
        value,
        key=None,
        query_mask=None,
        value_mask=None,
        key_mask=None,
        attention_mask=None,
        return_attention_scores=False,
        training=None,
        use_causal_mask=False,
        cache=None,
        cache_update_index=None,
        cache_write="slice",
    ):
        check_cache_write(cache_write)
        if key is None:
            key, key_mask = value, None
        self._check_inputs(query.shape, value.shape, key.shape)
        self._check_cache(cache, cache_update_index, value)
        incremental = cache is not None and cache_update_index is not None
        if incremental:
            # The keys are the cache's positions, not `value`'s rows.
            value_mask = key_mask = None
        path = self._attention_path(
            query, value, key, attention_mask, cache, return_attention_scores, training
        )
        if path == "blockwise":
            masks = (query_mask, value_mask, key_mask, attention_mask)
            return self._blockwise_attention(query, value, key, masks, use_causal_mask, training)
        keys = cache[:, 0] if incremental else value  # axis 1 runs over the keys
        offset = 0 if cache_update_index is None else cache_update_index  # query row 0's position
        attention_mask = masking.layer_attention_mask(
            query,
            keys,
            query_mask,
            value_mask,
            key_mask,
            attention_mask,
            use_causal_mask,
            offset,
            self.window,  # outside the blockwise path, the window is a band mask
        )
        query = self.project_queries(query, offset)  # (batch, q_len, heads, key_dim)
        key, value, cache = self._keys_values(key, value, cache, cache_update_index, cache_write)
        probabilities = None
        if path == "fused":
            key = repeat_heads(key, self.num_heads)  # (batch, k_len, heads, key_dim)
            value = repeat_heads(value, self.num_heads)
            output, has_key = head_products.fused_attention(
                query, key, value, attention_mask, self.key_dim
            )
        else:
            output, probabilities, has_key = head_products.scored_attention(
                self, query, key, value, attention_mask, offset, training
            )
        # A query with every key masked attends to nothing: its rows are zeroed on
        # (b, q, heads, v_dim), not on the larger probabilities (unless returned).
        output, probabilities = zero_keyless(
            output, probabilities if return_attention_scores else None, has_key
        )
        output = self._project(self.output_dense, output, input_axes=2)  # (b, q_len, *output_shape)
        outputs = (output,)
        if return_attention_scores:
            outputs += (probabilities,)
        if cache is not None:
            outputs += (cache,)
        return outputs[0] if len(outputs) == 1 else outputs

    def _attention_path(
        self, query, value, key, attention_mask, cache, return_attention_scores, training
    ):
        """How a call computes attention; the one place that chooses.

        | path          | when                                         | what runs              |
        |---------------|----------------------------------------------|------------------------|
        | `"blockwise"` | a `window`, no `position_bias`, self-        | `windowed_attention`:  |
        |               | attention, no cache, no scores returned, no  | blocks of `max(W, 64)` |
        |               | `attention_mask` but key padding             | (linear in the length) |
        | `"fused"`     | PyTorch, `"scaled_dot"`, no position bias,   | `ops.dot_product_`     |
        |               | no scores returned, no dropout while         | `attention` (torch's   |
        |               | training, float32                            | fused kernel)          |
        | `"scores"`    | otherwise (a `window` is then a band mask)   | the score layer, a     |
        |               |                                              | float32 masked softmax |

        The fused kernel made Keras's layer 1.4-2.4x faster than scores and softmax on
        PyTorch's CPU; mixed precision keeps the path with its float32 softmax."""
        if (
            self.window is not None
            and self.position_bias is None
            and windowed_attention.applies(
                query, value, key, attention_mask, cache, return_attention_scores
            )
        ):
            return "blockwise"
        if (
            keras.config.backend() == "torch"
            and self.score == "scaled_dot"
            and self.position_bias_layer is None
            and not return_attention_scores
            and (not training or self.dropout == 0)
            and self.compute_dtype == "float32"
        ):
            return "fused"
        return "scores"

    def _blockwise_attention(self, query, value, key, masks, causal, training):
        """The `"blockwise"` path (windowed self-attention): the projections,
        `windowed_attention.blockwise_attention`, the output projection. `masks`: query,
        value, key masks and a key-padding `attention_mask` `(batch, 1, length)` or None."""
        query_mask, value_mask, key_mask, attention_mask = masks
        if attention_mask is not None:
            masking.check_attention_mask(attention_mask, None, key.shape[1], "attention_mask")
            key_mask = masking.merge_masks(key_mask, attention_mask[:, 0, :])
        masking.check_padding_mask(query_mask, query, "query_mask", "query")
        masking.check_padding_mask(value_mask, value, "value_mask", "value")
        masking.check_padding_mask(key_mask, key, "key_mask", "key")
        key, value = self.project_keys_values(key, value)
        output = windowed_attention.blockwise_attention(
            self.score_layer,
            self.project_queries(query),
            repeat_heads(key, self.num_heads),
            repeat_heads(value, self.num_heads),
            masking.merge_masks(value_mask, key_mask),
            self.window,
            causal,
            self.dropout_layer,
            training,
            self.compute_plan.heads_first,
        )
        if query_mask is not None:  # a masked query attends to nothing
            output = output * ops.cast(query_mask, output.dtype)[:, :, None, None]
        return self._project(self.output_dense, output, input_axes=2)

    def _project(self, dense, x, input_axes=1):
        return project(dense, x, input_axes, self.compute_plan)

    def _keys_values(self, key, value, cache, cache_update_index, cache_write):
        """`(keys, values, cache)`, each `(batch, k_len, K, head_dim)`, and the cache
        to return; the one place a cache is read or written:

        - no cache: the projections of `key` and `value`;
        - a cache without `cache_update_index` (cross-attention: the encoder output
          projected once): its halves, `key` and `value` not projected;
        - with `cache_update_index` (incremental decoding): the projections written
          into the cache at that position (`"slice"`: in place under XLA; stacking the
          updated halves copied the whole cache every step, docs/speed.md;
          `"scatter"`: core TensorFlow, for TF Serving), attention over all of it."""
        if cache is not None and cache_update_index is None:
            return cache[:, 0], cache[:, 1], cache
        offset = 0 if cache_update_index is None else cache_update_index
        key, value = self.project_keys_values(key, value, offset)  # (b, k_len, K, dim)
        if cache is None:
            return key, value, None
        if cache_write == "slice":
            # Written into the cache itself (a dynamic-update-slice XLA does in place):
            # updating its key and value halves, then stacking them, copied the whole
            # cache every step (40% of a step at 72 positions, growing with the length).
            new = ops.cast(ops.stack([key, value], axis=1), cache.dtype)  # (b, 2, n, K, d)
            cache = ops.slice_update(cache, [0, 0, cache_update_index, 0, 0], new)
            return cache[:, 0], cache[:, 1], cache
        key = update_positions(cache[:, 0], key, cache_update_index, cache_write)
        value = update_positions(cache[:, 1], value, cache_update_index, cache_write)
        return key, value, ops.stack([key, value], axis=1)  # (batch, 2, cache_len, K, dim)

    def project_queries(self, query, offset=0):
        """`(batch, length, num_heads, key_dim)` queries of `query` (its Keras mask
        dropped: the masks are merged before), rotated (with RoPE) from `offset`."""
        return self._placed(
            self._project(self.query_dense, unmasked(query)), self.query_norm, offset
        )

    def project_keys_values(self, key, value, offset=0):
        """The `(batch, length, K, head_dim)` keys (rotated from `offset` with RoPE)
        and values of `key` and `value`, `K = num_key_value_heads`."""
        key = self._placed(self._project(self.key_dense, unmasked(key)), self.key_norm, offset)
        return key, self._project(self.value_dense, unmasked(value))

    def _placed(self, heads, norm, offset):
        """Projected queries or keys `(batch, length, heads, dim)` normalised (`qk_norm`)
        and rotated from `offset` (RoPE), as the positions they sit at."""
        heads = heads if norm is None else norm(heads)
        return heads if self.rotary is None else self.rotary(heads, start_index=offset)

    def rows_attend(self, rows, real_rows, attention_mask=None):
        """Self-attention of a padded batch given as its real tokens' rows, in graphs TF
        Serving runs (a block given real rows by its `compute_plan`, never training).

        The projections run on the `(n, dim)` rows alone, the attention itself on the
        padded `(batch, length)` layout (the rows scattered into it, zeros at padding
        positions, which `attention_mask` masks as keys). Equal to `call(x, x,
        attention_mask=attention_mask)` at the real tokens' rows, for the `"scores"` path
        (no `window`).

        Args:
            rows: `(n, dim)`, the real tokens of the block's input `x`.
            real_rows: what `compute_plan.real_rows` gave for `x`'s padding mask.
            attention_mask: the block's `(batch, length|1, length)` mask, or None.

        Returns:
            `(n, *output_shape)`: the attention's output at the real tokens.
        """
        query, key, value = (
            real_rows.scatter(self._project(dense, rows))
            for dense in (self.query_dense, self.key_dense, self.value_dense)
        )
        query, key = self._placed(query, self.query_norm, 0), self._placed(key, self.key_norm, 0)
        output, _, has_key = head_products.scored_attention(
            self, query, key, value, attention_mask, 0, False
        )
        output, _ = zero_keyless(output, None, has_key)
        return self._project(self.output_dense, real_rows.gather(output), input_axes=2)

    def compute_cache(self, value, key=None):
        """Projects `value` (and `key`, default `value`) once, for `call(cache=...)`.

        Returns `(batch, 2, length, num_key_value_heads, head_dim)`: keys then values. For a
        cross-attention cache pass the encoder output; for an empty self-attention
        cache pass zeros of the decoding length (the projections of padding are
        overwritten position by position).
        """
        key = value if key is None else key
        self._check_inputs(value.shape, value.shape, key.shape)
        if self.key_dim != self.value_dim:
            raise ValueError(
                "A cache stacks keys and values, so it needs `key_dim == value_dim`. "
                f"Received: key_dim={self.key_dim}, value_dim={self.value_dim}"
            )
        return ops.stack(self.project_keys_values(key, value), axis=1)

    def compute_output_shape(self, query_shape, value_shape, key_shape=None):
        key_shape = value_shape if key_shape is None else key_shape
        self._check_inputs(query_shape, value_shape, key_shape)
        return tuple(query_shape[:2]) + (self.output_shape or (query_shape[-1],))

    def compute_output_spec(
        self, query, value, key=None, return_attention_scores=False, cache=None, **call_arguments
    ):
        """The outputs' shapes for `call`'s arguments (the masks do not change them): the
        output, then (`return_attention_scores`) the `(batch, num_heads, query_len,
        key_len)` scores, then the updated `cache`."""
        key_shape = None if key is None else key.shape
        output_shape = self.compute_output_shape(query.shape, value.shape, key_shape)
        outputs = (keras.KerasTensor(output_shape, dtype=self.compute_dtype),)
        key_length = value.shape[1] if cache is None else cache.shape[2]
        if return_attention_scores:
            scores_shape = (query.shape[0], self.num_heads, query.shape[1], key_length)
            outputs += (keras.KerasTensor(scores_shape, dtype=self.compute_dtype),)
        if cache is not None:
            outputs += (keras.KerasTensor(cache.shape, dtype=cache.dtype),)
        return outputs[0] if len(outputs) == 1 else outputs

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "value_dim": self.value_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "output_bias": self.output_bias,
                "output_shape": self.output_shape,
                "score": self.score,
                **{  # the projections' initializers, regularizers and constraints
                    f"{part}_{kind}": module.serialize(getattr(self, f"{part}_{kind}"))
                    for part in ("kernel", "bias")
                    for kind, module in (
                        ("initializer", keras.initializers),
                        ("regularizer", keras.regularizers),
                        ("constraint", keras.constraints),
                    )
                },
                "seed": self.seed,
                "window": self.window,
                "position_bias": self.position_bias,
                "num_key_value_heads": self.num_key_value_heads,
                "rotary_max_wavelength": self.rotary_max_wavelength,
                "rotary_scaling_factor": self.rotary_scaling_factor,
                "qk_norm_epsilon": self.qk_norm_epsilon,
                "kernel_formats": self.kernel_formats or None,
            }
        )
        return config

    def _check_inputs(self, query_shape, value_shape, key_shape):
        """A ValueError unless `query`, `value`, `key` are (batch, length, features) with
        known features, one batch size, `key` and `value` of one length, and (once
        built) the features the layer was built for."""
        shapes = {"query": query_shape, "value": value_shape, "key": key_shape}
        check_sequence_shapes(**shapes)
        received = (
            f"Received: query.shape={tuple(query_shape)}, value.shape={tuple(value_shape)}, "
            f"key.shape={tuple(key_shape)}"
        )
        if None not in (value_shape[1], key_shape[1]) and value_shape[1] != key_shape[1]:
            raise ValueError(
                "Expected `key` and `value` with the same length (axis 1). "
                f"Received: key.shape={tuple(key_shape)}, value.shape={tuple(value_shape)}"
            )
        if len({shape[0] for shape in shapes.values()} - {None}) > 1:
            # Never broadcast: Keras's layer refuses a batch of 1 too.
            raise ValueError(
                f"Expected `query`, `value` and `key` with the same batch size (axis 0). {received}"
            )
        dims = (query_shape[-1], value_shape[-1], key_shape[-1])
        if self.built and dims != self._input_dims:
            raise ValueError(
                f"Layer '{self.name}' was built for last dimensions (query, value, "
                f"key) = {self._input_dims}. {received}"
            )

    def _check_cache(self, cache, cache_update_index, value):
        """A ValueError unless `cache` is `(batch, 2, length, K, key_dim)` (`length`:
        `value`'s for a cross-attention cache, any for an incremental one) and
        `cache_update_index` comes with a cache."""
        if cache is None:
            if cache_update_index is not None:
                raise ValueError("`cache_update_index` needs a `cache`. Received: cache=None")
            return
        length = None if cache_update_index is not None else value.shape[1]
        shape = tuple(cache.shape)
        expected = (2, length, self.num_key_value_heads, self.key_dim)
        if len(shape) != 5 or not all(
            e is None or s is None or s == e for s, e in zip(shape[1:], expected, strict=False)
        ):
            raise ValueError(
                "Expected `cache` of shape (batch, 2, length, num_heads, head_dim) = "
                f"(batch, {', '.join(str(e) for e in expected)}). Received: "
                f"cache.shape={shape}"
            )
