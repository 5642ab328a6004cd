"""DeBERTa's disentangled attention: content and relative position scored apart."""

import functools
import math

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int, check_rate
from keras_attn.layers import masking
from keras_attn.layers.dropout import Dropout
from keras_attn.layers.layer_utils import einsum_dense, zero_keyless

ATTENTION_TYPES = ("c2p", "p2c")


@functools.lru_cache(maxsize=16)
def _bucket_table(middle, max_position):
    """The bucket of each distance up to `max_position - 1` and `middle`, in float64:
    where the exact value is a whole number (`max_position - 1`: log(r) / log(r) is 1)
    it stays one."""
    return tuple(
        d
        if d <= middle  # else max_position - 1 > middle: the scale is positive
        else math.ceil(math.log(d / middle) / math.log((max_position - 1) / middle) * (middle - 1))
        + middle
        for d in range(max(max_position, middle + 1))
    )


def log_bucket_positions(relative_positions, position_buckets, max_position):
    """DeBERTa-v3's log buckets of relative positions (He et al., 2021, the code's
    `make_log_bucket_position`): distances below `position_buckets // 2` stay exact,
    longer ones share buckets that widen logarithmically up to `max_position`; the sign
    is kept. `relative_positions`: an int tensor; returns int32 of the same shape.

    Distances below `max_position` (and `position_buckets // 2`) are looked up in a
    table made in Python: at `max_position - 1` the formula's value is exactly a whole
    number, and a graph optimiser that reorders its float32 division (Grappler, as TF
    Serving runs it, and the ONNX and OpenVINO graphs converted after it) rounded it
    over, so `ceil` gave the next bucket: a full-length input's longest distance scored
    with another row than the model's. Longer distances use the formula, as the
    reference does."""
    relative = ops.cast(relative_positions, "int32")
    middle = position_buckets // 2
    table = _bucket_table(middle, max_position)
    sign = ops.sign(relative)
    distance = ops.abs(relative)
    looked_up = ops.take(
        ops.convert_to_tensor(table, "int32"), ops.minimum(distance, len(table) - 1)
    )
    far = ops.maximum(distance, len(table))  # the formula's input, > middle
    scale = math.log((max_position - 1) / middle)
    formula = ops.cast(
        ops.ceil(ops.log(ops.cast(far, "float32") / middle) / scale * (middle - 1)) + middle,
        "int32",
    )
    return ops.where(distance < len(table), looked_up, formula) * sign


@keras_attn_export("keras_attn.layers.DisentangledAttention")
class DisentangledAttention(keras.layers.Layer):
    """DeBERTa's disentangled self-attention (He et al., 2020; v3's settings by default).

    Each token is its content and, apart, its position relative to the others. With
    `Q, K, V` the content projections and `Kr = Wk r`, `Qr = Wq r` the projections of
    the shared relative-position embeddings `r` (`(2 * span, features)`, given to
    `call`), the score of query `i` and key `j` is

        (q_i . k_j  +  q_i . Kr[d(i, j)]  +  k_j . Qr[d(i, j)]) / sqrt(s * key_dim)

    content-to-content, content-to-position (`"c2p"`) and position-to-content
    (`"p2c"`), with `s` the number of terms (3: the paper's 1/sqrt(3d)) and
    `d(i, j) = clip(bucket(i - j) + span, 0, 2 span - 1)`: the relative distance,
    log-bucketed past `position_buckets // 2` (`log_bucket_positions`).
    `share_position_projections=True` (DeBERTa-v3) projects `r` with the content
    projections themselves; `False` gives them their own (`position_key`,
    `position_query`). Then a softmax over the keys (padding masked), dropout, the
    values, and an output projection (`attention_output`).

    Args:
        num_heads: attention heads.
        key_dim: size of each head.
        position_buckets: buckets of relative positions (v3: 256); `span` is this
            number. `None` or 0: exact distances up to `max_relative_positions`
            (DeBERTa v1), `span = max_relative_positions`.
        max_relative_positions: the largest distance told apart (DeBERTa: the 512
            positions of its embeddings).
        attention_types: which position terms to add, of `"c2p"` and `"p2c"`.
        share_position_projections: project positions with the content projections.
        dropout: dropout rate on the attention probabilities.
        use_bias: whether the projections have biases.
        kernel_initializer, bias_initializer: initializers of the projections.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(batch, query_len, features)`.
        relative_embeddings: `(2 * span, features)`, the relative-position
            embeddings (a DeBERTa backbone's, after their LayerNorm).
        value: optional `(batch, key_len, features)` the keys and values come from
            (default: `query`; DeBERTa's enhanced mask decoder gives other queries).
        padding_mask: optional `(batch, key_len)`, 1 (True) at real keys; defaults
            to the Keras mask of `value`.
        attention_mask: optional boolean, broadcastable to
            `(batch, query_len, key_len)`.
        training: dropout on or off.
        return_attention_scores: also return the probabilities.

    Returns:
        `(batch, query_len, features)`, and with `return_attention_scores` the
        `(batch, num_heads, query_len, key_len)` probabilities.

    Example:

    >>> import numpy as np
    >>> from keras_attn.layers import DisentangledAttention
    >>> layer = DisentangledAttention(num_heads=2, key_dim=8, position_buckets=8,
    ...                               max_relative_positions=32)
    >>> x = np.random.rand(2, 5, 16).astype("float32")
    >>> positions = np.random.rand(16, 16).astype("float32")  # (2 * span, features)
    >>> output, scores = layer(x, positions, return_attention_scores=True)
    >>> tuple(output.shape), tuple(scores.shape)
    ((2, 5, 16), (2, 2, 5, 5))

    References:
        - [He et al., 2020, DeBERTa](https://arxiv.org/abs/2006.03654)
        - [He et al., 2021, DeBERTaV3](https://arxiv.org/abs/2111.09543)
    """

    def __init__(
        self,
        num_heads,
        key_dim,
        position_buckets=256,
        max_relative_positions=512,
        attention_types=ATTENTION_TYPES,
        share_position_projections=True,
        dropout=0.0,
        use_bias=True,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        check_positive_int("max_relative_positions", max_relative_positions)
        check_rate("dropout", dropout)
        if position_buckets:
            check_positive_int("position_buckets", position_buckets)
            if position_buckets < 2 or max_relative_positions <= position_buckets // 2 + 1:
                raise ValueError(
                    "Expected `position_buckets` >= 2 and `max_relative_positions` above "
                    "position_buckets // 2 + 1 (the buckets past half widen up to it). "
                    f"Received: position_buckets={position_buckets}, "
                    f"max_relative_positions={max_relative_positions}"
                )
        attention_types = tuple(attention_types)
        unknown = [t for t in attention_types if t not in ATTENTION_TYPES]
        if unknown or len(set(attention_types)) != len(attention_types):
            raise ValueError(
                f"Expected `attention_types` distinct names of {list(ATTENTION_TYPES)}. "
                f"Received: attention_types={attention_types!r}"
            )
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.position_buckets = int(position_buckets or 0)
        self.max_relative_positions = max_relative_positions
        self.attention_types = attention_types
        self.share_position_projections = bool(share_position_projections)
        self.dropout = float(dropout)
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.span = self.position_buckets or max_relative_positions
        self.supports_masking = True

    def _dense(self, name, heads_out=True):
        if heads_out:  # (batch, length, features) -> (batch, length, heads, key_dim)
            equation, shape, bias = "abc,cde->abde", (None, self.num_heads, self.key_dim), "de"
        else:  # (batch, length, heads, key_dim) -> (batch, length, features)
            equation, shape, bias = "abcd,cde->abe", (None, self.features), "e"
        return einsum_dense(self, equation, shape, bias, name, self.use_bias)

    def build(self, query_shape, relative_embeddings_shape=None, value_shape=None):
        if query_shape[-1] is None:
            raise ValueError(
                f"Expected `query` (batch, length, features) with known features. "
                f"Received: query.shape={tuple(query_shape)}"
            )
        self.features = query_shape[-1]
        value_shape = query_shape if value_shape is None else value_shape
        self.query_dense = self._dense("query")
        self.query_dense.build(query_shape)
        self.key_dense = self._dense("key")
        self.key_dense.build(value_shape)
        self.value_dense = self._dense("value")
        self.value_dense.build(value_shape)
        self.position_key_dense = self.position_query_dense = None
        if not self.share_position_projections:
            position_shape = (None, None, self.features)
            if "c2p" in self.attention_types:
                self.position_key_dense = self._dense("position_key")
                self.position_key_dense.build(position_shape)
            if "p2c" in self.attention_types:
                self.position_query_dense = self._dense("position_query")
                self.position_query_dense.build(position_shape)
        self.output_dense = self._dense("attention_output", heads_out=False)
        self.output_dense.build((None, None, self.num_heads, self.key_dim))
        self.probabilities_dropout = Dropout(self.dropout, dtype=self.dtype_policy)
        self.built = True

    def relative_positions(self, query_length, key_length):
        """`d(i, j)`: `(query_len, key_len)` int32 rows of the position table."""
        relative = ops.arange(query_length)[:, None] - ops.arange(key_length)[None, :]
        if self.position_buckets:
            relative = log_bucket_positions(
                relative, self.position_buckets, self.max_relative_positions
            )
        return ops.clip(relative + self.span, 0, 2 * self.span - 1)

    def call(
        self,
        query,
        relative_embeddings,
        value=None,
        padding_mask=None,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        value = query if value is None else value
        mask = masking.attention_mask(
            value,
            padding_mask,
            attention_mask,
            query.shape[1],
            ("padding_mask", "attention_mask", "value"),
        )
        q, k = self.query_dense(query), self.key_dense(value)  # (batch, length, heads, dim)
        v = self.value_dense(value)
        scale = 1.0 / math.sqrt(self.key_dim * (1 + len(self.attention_types)))
        q = ops.multiply(q, ops.cast(scale, q.dtype))  # every term shares the scale
        scores = ops.einsum("bihd,bjhd->bhij", q, k)
        if self.attention_types:
            scores = scores + self._position_scores(q, k, relative_embeddings, scale)
        probabilities, has_key = masking.masked_softmax(scores, mask)
        probabilities = self.probabilities_dropout(probabilities, training=training)
        context = ops.einsum("bhij,bjhd->bihd", probabilities, v)
        context, probabilities = zero_keyless(context, probabilities, has_key)
        output = self.output_dense(context)
        if return_attention_scores:
            return output, probabilities
        return output

    def _position_scores(self, q, k, relative_embeddings, scale):
        """`q_i . Kr[d] + k_j . Qr[d]`, both scaled (`q` comes scaled already)."""
        r = ops.cast(relative_embeddings, self.compute_dtype)[None, : 2 * self.span]
        rows = self.relative_positions(ops.shape(q)[1], ops.shape(k)[1])  # (q, k)
        batch_heads = (ops.shape(q)[0], self.num_heads)
        scores = 0.0
        if "c2p" in self.attention_types:
            dense = self.position_key_dense or self.key_dense
            position_keys = dense(r)[0]  # (2 span, heads, dim)
            c2p = ops.einsum("bihd,rhd->bhir", q, position_keys)
            index = ops.broadcast_to(rows[None, None], (*batch_heads, *ops.shape(rows)))
            scores = scores + ops.take_along_axis(c2p, index, axis=-1)
        if "p2c" in self.attention_types:
            dense = self.position_query_dense or self.query_dense
            position_queries = dense(r)[0]
            p2c = ops.einsum("bjhd,rhd->bhjr", k, position_queries)  # (b, h, key, row)
            rows_t = ops.transpose(rows)  # (k, q): key j's row for query i
            index = ops.broadcast_to(rows_t[None, None], (*batch_heads, *ops.shape(rows_t)))
            p2c = ops.take_along_axis(p2c, index, axis=-1)  # (b, h, key, query)
            scores = scores + ops.cast(scale, p2c.dtype) * ops.transpose(p2c, (0, 1, 3, 2))
        return scores

    def compute_output_shape(self, query_shape, relative_embeddings_shape=None, value_shape=None):
        return tuple(query_shape)

    def compute_mask(self, query, relative_embeddings=None, value=None, **kwargs):
        return masking.keras_mask(query)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "position_buckets": self.position_buckets,
                "max_relative_positions": self.max_relative_positions,
                "attention_types": list(self.attention_types),
                "share_position_projections": self.share_position_projections,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config
