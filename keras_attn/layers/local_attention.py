"""Luong's local attention: a window around an aligned source position."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int
from keras_attn.layers import scoring
from keras_attn.layers.layer_utils import build_sequence_score
from keras_attn.layers.masking import keras_mask, masked_softmax

ALIGNMENTS = ("monotonic", "predictive")


@keras_attn_export("keras_attn.layers.LocalAttention")
class LocalAttention(keras.layers.Layer):
    """Local attention (Luong et al., 2015, section 3.2): each query attends to the
    keys within `window` positions of an aligned position `p_t`.

    "Local-m": `p_t = t` (monotonic alignment: source and target roughly in step).
    "Local-p": `p_t = S · sigmoid(v_p^T tanh(W_p h_t))` (predictive; `S` the real
    source length of the example), and the weights inside the window are multiplied
    by `exp(-(s - p_t)^2 / (2 σ^2))`, `σ = window / 2`, which favours keys near `p_t`
    and lets `p_t` learn. Keys `s` with `|s - p_t| > window` get exactly zero weight;
    within the window the scores (any scoring function) are softmax-normalised.
    Positions count from 0 (`p_t ∈ [0, S]`). Inputs are `(batch, length, dim)`: the
    decoder states of an RNN or a Transformer's sequence. The output keeps the
    query's mask.

    Args:
        window: `D`, the half-width of the window (> 0; the paper: 10).
        alignment: `"monotonic"` (local-m) or `"predictive"` (local-p).
        score: the scoring function: a name (`"general"`, Luong's, by default;
            `"dot"`, `"scaled_dot"`, `"additive"`, `"cosine"`) or an `AttentionScore`
            (e.g. `LocationScore(max_length)`).
        units: width of `W_p` (local-p; default: the query's width).
        kernel_initializer: initializer of `W_p` and `v_p`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(batch, query_len, query_dim)`, the target states `h_t`.
        value: `(batch, key_len, value_dim)`, what is averaged.
        key: `(batch, key_len, key_dim)`, what is scored (default: `value`).
        value_mask: `(batch, key_len)`, True at real keys (default: `value`'s Keras
            mask).
        query_start: position of the first query (local-m; an int or a scalar
            tensor), for decoding one step at a time.
        return_attention_scores: also return the weights.

    Returns:
        The context `(batch, query_len, value_dim)`, and with
        `return_attention_scores` the weights `(batch, query_len, key_len)`.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import LocalAttention
    >>> layer = LocalAttention(window=1, score="dot")
    >>> query, value = np.ones((1, 3, 4), "float32"), np.ones((1, 6, 4), "float32")
    >>> context, weights = layer(query, value, return_attention_scores=True)
    >>> (ops.convert_to_numpy(weights)[0] > 0).astype(int).tolist()  # query t: keys t-1 .. t+1
    [[1, 1, 0, 0, 0, 0], [1, 1, 1, 0, 0, 0], [0, 1, 1, 1, 0, 0]]
    >>> tuple(context.shape)
    (1, 3, 4)

    References:
        - [Luong et al., 2015](https://arxiv.org/abs/1508.04025)
    """

    layout_roles = {"position_kernel": "column"}  # keras_attn.models.layout_maps

    def __init__(
        self,
        window,
        alignment="monotonic",
        score="general",
        units=None,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        check_positive_int("window", window)
        if alignment not in ALIGNMENTS:
            raise ValueError(
                f"Expected `alignment` in {ALIGNMENTS}. Received: alignment={alignment!r}"
            )
        check_positive_int("units", units, allow_none=True)
        super().__init__(**kwargs)
        self.window = window
        self.alignment = alignment
        self.score = scoring.get(score)
        self.units = units
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.supports_masking = True

    def build(self, query_shape, value_shape, key_shape=None):
        build_sequence_score(self.score, query_shape, value_shape, key_shape)
        if self.alignment == "predictive":
            units = self.units or query_shape[-1]
            self.position_kernel = self.add_weight(
                name="position_kernel",
                shape=(query_shape[-1], units),
                initializer=self.kernel_initializer,
            )
            self.position_vector = self.add_weight(
                name="position_vector", shape=(units, 1), initializer=self.kernel_initializer
            )
        self.built = True

    def aligned_positions(self, query, source_lengths, query_start=0):
        """`p_t`, `(batch | 1, query_len, 1)` float32: `query_start + t` (local-m) or
        `S · sigmoid(v_p^T tanh(W_p h_t))` (local-p, `S` each example's length)."""
        if self.alignment == "monotonic":
            start = ops.cast(query_start, "float32")
            return (start + ops.arange(ops.shape(query)[1], dtype="float32"))[None, :, None]
        hidden = ops.tanh(ops.matmul(query, self.position_kernel))
        gate = ops.sigmoid(ops.cast(ops.matmul(hidden, self.position_vector), "float32"))
        return ops.cast(source_lengths, "float32")[:, None, None] * gate

    def call(
        self,
        query,
        value,
        key=None,
        value_mask=None,
        query_start=0,
        return_attention_scores=False,
    ):
        key = value if key is None else key
        if value_mask is None:
            value_mask = keras_mask(value)
        key_length = ops.shape(key)[1]
        if value_mask is None:
            real = ops.ones((ops.shape(key)[0], key_length), "bool")
        else:
            real = ops.cast(value_mask, "bool")
        lengths = ops.sum(ops.cast(real, "int32"), axis=1)
        positions = self.aligned_positions(query, lengths, query_start)  # (b|1, q, 1)
        sources = ops.arange(key_length, dtype="float32")[None, None, :]  # (1, 1, k)
        distance = sources - positions  # (b|1, q, k)
        in_window = ops.logical_and(ops.abs(distance) <= self.window, real[:, None, :])
        scores = self.score(query, key)  # (batch, q, k)
        weights, _ = masked_softmax(scores[:, None], in_window)
        weights = ops.cast(weights[:, 0], "float32")
        if self.alignment == "predictive":
            sigma = self.window / 2.0
            weights = weights * ops.exp(-ops.square(distance) / (2.0 * sigma**2))
        weights = ops.where(in_window, weights, 0.0)  # nothing outside; no key: all zero
        weights = ops.cast(weights, self.compute_dtype)
        context = ops.matmul(weights, ops.cast(value, self.compute_dtype))
        if return_attention_scores:
            return context, weights
        return context

    def compute_mask(self, query, value, key=None, mask=None, **kwargs):
        return keras_mask(query)

    def compute_output_spec(self, query, value, key=None, return_attention_scores=False, **kwargs):
        key = value if key is None else key
        context = keras.KerasTensor((*query.shape[:-1], value.shape[-1]), self.compute_dtype)
        if not return_attention_scores:
            return context
        weights = keras.KerasTensor((*query.shape[:-1], key.shape[1]), self.compute_dtype)
        return context, weights

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "window": self.window,
                "alignment": self.alignment,
                "score": scoring.serialize(self.score),
                "units": self.units,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            }
        )
        return config
