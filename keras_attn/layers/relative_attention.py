"""Transformer-XL's relative multi-head attention, with memory and XLNet's segment term."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int, check_rate
from keras_attn.layers import masking
from keras_attn.layers.dropout import Dropout
from keras_attn.layers.layer_utils import (
    check_sequence_shapes,
    clone_initializer,
    einsum_dense,
    unmasked,
    zero_keyless,
)


@keras_attn_export("keras_attn.layers.relative_sinusoids")
def relative_sinusoids(distances, dim, max_wavelength=10000.0):
    """Transformer-XL's encodings `R` of relative distances: `[sin(d·f), cos(d·f)]`.

    The frequencies are `f_k = max_wavelength^(-2k/dim)`, `k = 0 .. dim/2 - 1`; the
    sines fill the first half of the features and the cosines the second (Dai et
    al.'s and XLNet's layout, not the interleaved one of Vaswani et al.).

    Args:
        distances: `(n,)` distances (ints or floats).
        dim: the (even) width of the encodings.
        max_wavelength: the longest wavelength.

    Returns:
        `(n, dim)` float32.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import relative_sinusoids
    >>> r = ops.convert_to_numpy(relative_sinusoids(np.array([0, 1]), 4)).astype("float64")
    >>> np.round(r, 3).tolist()  # sin(d), sin(d/100), cos(d), cos(d/100)
    [[0.0, 0.0, 1.0, 1.0], [0.841, 0.01, 0.54, 1.0]]
    """
    check_positive_int("dim", dim)
    if dim % 2:
        raise ValueError(f"Expected an even `dim`. Received: dim={dim}")
    exponents = ops.arange(0, dim, 2, dtype="float32") / dim
    inverse_frequencies = 1.0 / ops.power(float(max_wavelength), exponents)  # (dim/2,)
    angles = ops.cast(distances, "float32")[:, None] * inverse_frequencies[None, :]
    return ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)


@keras_attn_export("keras_attn.layers.RelativeMultiHeadAttention")
class RelativeMultiHeadAttention(keras.layers.Layer):
    """Multi-head attention with Transformer-XL's relative positions and memory.

    Dai et al. (2019), eq. in section 3.3: for query `i` and key `j` of head `h`,
    `A_ij = (q_i + u)ᵀ k_j + (q_i + v)ᵀ W_R R_{i-j}`, scaled by `1/sqrt(key_dim)`,
    where `R` are the sinusoidal encodings of the distance `i - j`
    (`relative_sinusoids`, as wide as the query's features), `W_R` their projection
    and `u`, `v` learned global content and position biases per head. The keys and
    values are those of `[memory; value]`: `memory` holds hidden states of earlier
    segments, enters with its gradient stopped and sits before `value`, so query row
    `i` is at position `memory_len + i`. With `segment_attention` (XLNet) a third term
    `(q_i + s)ᵀ e_{ij}` adds a learned encoding of whether `i` and `j` are in the same
    segment (`e_0`) or not (`e_1`).

    Feeding one position at a time with the earlier positions' inputs as `memory`
    is cached decoding: the same outputs as the full causal pass.

    Args:
        num_heads: number of heads (positive int).
        key_dim: size of each head (queries, keys, values; positive int).
        dropout: dropout rate on the attention probabilities, in [0, 1).
        use_bias: whether the query/key/value/output projections have biases
            (Transformer-XL and XLNet: no).
        output_shape: width of the output (`None`: the query's).
        segment_attention: add XLNet's relative segment term (its call argument
            `segment_matrix`).
        clamp_length: clamp `|i - j|` to at most this in the encodings (XLNet's
            `clamp_len`; `None`: no clamp).
        max_wavelength: the encodings' longest wavelength.
        kernel_initializer: initializer of the projection kernels.
        bias_initializer: initializer of the projection biases and of `u`, `v`, `s`
            and the segment encodings.
        seed: optional int seed of the dropout.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(batch, query_len, dim)`.
        value: `(batch, value_len, dim)` (default `query`); keys and values come from
            `[memory; value]`.
        memory: optional `(batch, memory_len, dim)`, earlier positions' inputs (no
            gradient flows into it).
        query_mask: optional `(batch, query_len)`, filled from the Keras mask.
        value_mask: optional `(batch, value_len)`, filled from the Keras mask.
        memory_mask: optional `(batch, memory_len)` (default: every position real).
        attention_mask: optional boolean, broadcastable to
            `(batch, query_len, memory_len + value_len)`; True where allowed.
        segment_matrix: with `segment_attention`, `(batch, query_len, memory_len +
            value_len)` boolean, True where query and key are in different segments.
        use_causal_mask: whether query `i` (position `memory_len + i`) may attend
            only to keys at positions `<= memory_len + i`.
        return_attention_scores: whether to also return the probabilities.
        training: whether dropout is active.

    Returns:
        `(batch, query_len, output_dim)`, and with `return_attention_scores` the
        probabilities `(batch, num_heads, query_len, memory_len + value_len)`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.layers import RelativeMultiHeadAttention
    >>> layer = RelativeMultiHeadAttention(num_heads=2, key_dim=8)
    >>> segment = np.random.rand(2, 5, 16).astype("float32")
    >>> memory = np.random.rand(2, 3, 16).astype("float32")  # the previous segment
    >>> output, scores = layer(segment, memory=memory, use_causal_mask=True,
    ...                        return_attention_scores=True)
    >>> tuple(output.shape), tuple(scores.shape)
    ((2, 5, 16), (2, 2, 5, 8))

    References:
        - [Dai et al., 2019](https://arxiv.org/abs/1901.02860), section 3.3
        - [Yang et al., 2019](https://arxiv.org/abs/1906.08237), section 2.5
    """

    # keras_attn.models.layout_maps: the per-head biases stay whole.
    layout_roles = dict.fromkeys(
        ("content_bias", "position_bias", "segment_bias", "segment_embeddings"), "replicated"
    )

    def __init__(
        self,
        num_heads,
        key_dim,
        dropout=0.0,
        use_bias=False,
        output_shape=None,
        segment_attention=False,
        clamp_length=None,
        max_wavelength=10000.0,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        seed=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("key_dim", key_dim)
        check_positive_int("output_shape", output_shape, allow_none=True)
        check_positive_int("clamp_length", clamp_length, allow_none=True)
        check_rate("dropout", dropout)
        if not max_wavelength or max_wavelength <= 1:
            raise ValueError(
                f"Expected `max_wavelength` > 1. Received: max_wavelength={max_wavelength}"
            )
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.dropout = float(dropout)
        self.use_bias = bool(use_bias)
        self.output_shape = output_shape
        self.segment_attention = bool(segment_attention)
        self.clamp_length = clamp_length
        self.max_wavelength = float(max_wavelength)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.seed = seed
        self.supports_masking = True

    def _dense(self, equation, output_shape, bias_axes, name, use_bias=None):
        use_bias = self.use_bias if use_bias is None else use_bias
        return einsum_dense(self, equation, output_shape, bias_axes, name, use_bias)

    def _head_weight(self, name, shape=None):
        return self.add_weight(
            name=name,
            shape=shape or (self.num_heads, self.key_dim),
            initializer=clone_initializer(self.bias_initializer),
        )

    def build(self, query_shape, value_shape=None):
        value_shape = query_shape if value_shape is None else value_shape
        check_sequence_shapes(query=query_shape, value=value_shape)
        dim = query_shape[-1]
        if dim % 2:
            raise ValueError(
                "The relative encodings are as wide as the query's features, which must "
                f"be even. Received: query.shape={tuple(query_shape)}"
            )
        heads, head_dim = self.num_heads, self.key_dim
        projection = ("abc,cde->abde", (None, heads, head_dim), "de")
        self.query_dense = self._dense(*projection, "query")
        self.query_dense.build(query_shape)
        self.key_dense = self._dense(*projection, "key")
        self.key_dense.build(value_shape)
        self.value_dense = self._dense(*projection, "value")
        self.value_dense.build(value_shape)
        # W_R: the encodings' projection, never with a bias (it would be part of v).
        self.position_dense = self._dense(
            "ac,cde->ade", (heads, head_dim), "de", "position", use_bias=False
        )
        self.position_dense.build((None, dim))
        self._encoding_dim = dim
        width = self.output_shape or dim
        self.output_dense = self._dense("abcd,cde->abe", (None, width), "e", "attention_output")
        self.output_dense.build((None, None, heads, head_dim))
        self.content_bias = self._head_weight("content_bias")  # u
        self.position_bias = self._head_weight("position_bias")  # v
        if self.segment_attention:
            self.segment_bias = self._head_weight("segment_bias")  # s
            self.segment_embeddings = self._head_weight(
                "segment_embeddings", (2, heads, head_dim)
            )  # e_0 (same segment), e_1 (different)
        self.dropout_layer = Dropout(self.dropout, seed=self.seed, dtype=self.dtype_policy)
        self.built = True

    def call(
        self,
        query,
        value=None,
        memory=None,
        query_mask=None,
        value_mask=None,
        memory_mask=None,
        attention_mask=None,
        segment_matrix=None,
        use_causal_mask=False,
        return_attention_scores=False,
        training=None,
    ):
        if value is None:
            value, value_mask = query, query_mask if value_mask is None else value_mask
        keys = unmasked(value)
        memory_length = 0
        if memory is not None:
            if len(memory.shape) != 3 or memory.shape[-1] != value.shape[-1]:
                raise ValueError(
                    f"Expected `memory` of shape (batch, memory_len, {value.shape[-1]}) "
                    f"like `value`. Received: memory.shape={tuple(memory.shape)}"
                )
            memory_length = ops.shape(memory)[1]
            memory = ops.stop_gradient(ops.cast(memory, keys.dtype))
            keys = ops.concatenate([memory, keys], axis=1)
            if value_mask is not None or memory_mask is not None:
                if value_mask is None:
                    value_mask = ops.ones(ops.shape(value)[:2], "bool")
                if memory_mask is None:
                    memory_mask = ops.ones(ops.shape(memory)[:2], "bool")
                masking.check_padding_mask(memory_mask, memory, "memory_mask", "memory")
                masking.check_padding_mask(value_mask, value, "value_mask", "value")
                value_mask = ops.concatenate(
                    [ops.cast(memory_mask, "bool"), ops.cast(value_mask, "bool")], axis=1
                )
        elif memory_mask is not None:
            raise ValueError("`memory_mask` needs a `memory`. Received: memory=None")
        if self.segment_attention != (segment_matrix is not None):
            raise ValueError(
                "`segment_matrix` is required with `segment_attention=True` and refused "
                f"without. Received: segment_attention={self.segment_attention}, "
                f"segment_matrix={'None' if segment_matrix is None else 'a tensor'}"
            )
        mask = masking.layer_attention_mask(
            query, keys, query_mask, value_mask, None, attention_mask, use_causal_mask,
            memory_length,
        )  # fmt: skip
        q = self.query_dense(unmasked(query))  # (batch, q_len, heads, dim)
        k = self.key_dense(keys)  # (batch, k_len, heads, dim)
        v = self.value_dense(keys)
        query_length, key_length = ops.shape(q)[1], ops.shape(k)[1]

        content = ops.einsum("bqhd,bkhd->bhqk", q + self._bias(self.content_bias, q), k)
        position = self._position_scores(q, query_length, key_length, memory_length)
        scores = content + position
        if self.segment_attention:
            scores = scores + self._segment_scores(q, segment_matrix, query_length, key_length)
        scores = scores * ops.cast(self.key_dim**-0.5, scores.dtype)
        probabilities, has_key = masking.masked_softmax(scores, mask)
        dropped = self.dropout_layer(probabilities, training=training)
        output = ops.einsum("bhqk,bkhd->bqhd", dropped, v)
        output, probabilities = zero_keyless(
            output, probabilities if return_attention_scores else None, has_key
        )
        output = self.output_dense(output)
        return (output, probabilities) if return_attention_scores else output

    @staticmethod
    def _bias(bias, like):
        return ops.cast(bias, like.dtype)[None, None]  # (1, 1, heads, dim)

    def _position_scores(self, q, query_length, key_length, memory_length):
        """`(q_i + v)ᵀ W_R R_{i-j}`, `(batch, heads, q_len, k_len)`.

        Query row `i` is at position `memory_len + i`, key `j` at `j`, so the
        distances run from `memory_len + q_len - 1` down to `memory_len - k_len + 1`.
        The scores are computed against each of those `q_len + k_len - 1` distances
        (in descending order), then each pair takes the column of its own distance,
        `j - i + q_len - 1`: Transformer-XL's relative shift, as a gather."""
        count = query_length + key_length - 1
        largest = ops.cast(memory_length, "int32") + query_length - 1
        distances = largest - ops.arange(count, dtype="int32")
        if self.clamp_length is not None:
            distances = ops.clip(distances, -self.clamp_length, self.clamp_length)
        encodings = relative_sinusoids(distances, self._encoding_dim, self.max_wavelength)
        r = self.position_dense(ops.cast(encodings, q.dtype))  # (count, heads, dim)
        full = ops.einsum("bqhd,rhd->bhqr", q + self._bias(self.position_bias, q), r)
        columns = ops.arange(key_length, dtype="int32")[None, :]
        rows = ops.arange(query_length, dtype="int32")[:, None]
        index = columns - rows + query_length - 1  # (q_len, k_len)
        # Broadcast here, not by `take_along_axis`: Keras's TensorFlow version takes
        # max(batch, 1) for an unknown batch size, which fails on an empty batch.
        shape = ops.shape(full)
        index = ops.broadcast_to(index[None, None], (shape[0], shape[1], query_length, key_length))
        return ops.take_along_axis(full, index, axis=-1)

    def _segment_scores(self, q, segment_matrix, query_length, key_length):
        """`(q_i + s)ᵀ e_{ij}`: `e_1` where `segment_matrix` (different segments), else
        `e_0`; `(batch, heads, q_len, k_len)`."""
        masking.check_attention_mask(segment_matrix, query_length, key_length, "segment_matrix")
        per_encoding = ops.einsum(
            "bqhd,shd->bhqs",
            q + self._bias(self.segment_bias, q),
            ops.cast(self.segment_embeddings, q.dtype),
        )  # (batch, heads, q_len, 2)
        same, different = per_encoding[..., 0:1], per_encoding[..., 1:2]
        segment_matrix = ops.cast(segment_matrix, q.dtype)
        if len(segment_matrix.shape) == 2:
            segment_matrix = segment_matrix[None]
        return same + (different - same) * segment_matrix[:, None]

    def compute_output_shape(self, query_shape, value_shape=None, **kwargs):
        return (*query_shape[:2], self.output_shape or query_shape[-1])

    def compute_output_spec(
        self, query, value=None, memory=None, return_attention_scores=False, **kwargs
    ):
        output = keras.KerasTensor(self.compute_output_shape(query.shape), self.compute_dtype)
        if not return_attention_scores:
            return output
        value = query if value is None else value
        key_length = value.shape[1]
        if memory is not None:
            key_length = (
                None if None in (key_length, memory.shape[1]) else key_length + memory.shape[1]
            )
        scores = (query.shape[0], self.num_heads, query.shape[1], key_length)
        return output, keras.KerasTensor(scores, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "key_dim": self.key_dim,
                "dropout": self.dropout,
                "use_bias": self.use_bias,
                "output_shape": self.output_shape,
                "segment_attention": self.segment_attention,
                "clamp_length": self.clamp_length,
                "max_wavelength": self.max_wavelength,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
                "seed": self.seed,
            }
        )
        return config
