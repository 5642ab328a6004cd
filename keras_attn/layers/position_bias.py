"""Relative-position biases added to attention scores: T5's buckets and ALiBi."""

import math

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int


@keras_attn_export("keras_attn.layers.PositionBias")
class PositionBias(keras.layers.Layer):
    """Base of the biases `MultiHeadAttention(position_bias=...)` adds to its scores.

    A subclass maps integer positions to a float32 bias `(num_heads, query_len,
    key_len)`, added to the scores before the softmax (after the scoring function's
    own scaling), so it works with every scoring function and mask. Subclasses
    implement `call(query_positions, key_positions)` and are registered for
    serialization (the attention layer keeps their config and builds its own copy).

    Args:
        num_heads: number of attention heads (positive int).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query_positions: `(query_len,)` integer positions of the queries.
        key_positions: `(key_len,)` integer positions of the keys.

    Returns:
        `(num_heads, query_len, key_len)` float32.

    Example:

    >>> import keras
    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import MultiHeadAttention, PositionBias
    >>> @keras.saving.register_keras_serializable("my_package")  # saved by name
    ... class Recency(PositionBias):  # penalise keys after the query
    ...     def call(self, query_positions, key_positions):
    ...         later = ops.maximum(self._relative(query_positions, key_positions), 0)
    ...         return -ops.cast(later, "float32")[None] * ops.ones((self.num_heads, 1, 1))
    >>> layer = MultiHeadAttention(2, 4, position_bias=Recency(num_heads=2))
    >>> tuple(layer(np.ones((1, 3, 8)), np.ones((1, 3, 8))).shape)
    (1, 3, 8)
    """

    layout_roles = {"embeddings": "replicated"}  # (buckets, heads): small

    def __init__(self, num_heads, **kwargs):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        self.num_heads = num_heads

    def build(self, query_positions_shape=None, key_positions_shape=None):
        self.built = True

    def compute_output_shape(self, query_positions_shape, key_positions_shape):
        return (self.num_heads, query_positions_shape[0], key_positions_shape[0])

    def compute_output_spec(self, query_positions, key_positions):
        shape = self.compute_output_shape(query_positions.shape, key_positions.shape)
        return keras.KerasTensor(shape, dtype="float32")

    @staticmethod
    def _relative(query_positions, key_positions):
        """`j - i` for every query position `i` and key position `j`: `(q, k)` int32."""
        query_positions = ops.cast(query_positions, "int32")
        key_positions = ops.cast(key_positions, "int32")
        return key_positions[None, :] - query_positions[:, None]

    def get_config(self):
        config = super().get_config()
        config["num_heads"] = self.num_heads
        return config


@keras_attn_export("keras_attn.layers.RelativePositionBias")
class RelativePositionBias(PositionBias):
    """T5's relative position bias (Raffel et al., 2020): one learned scalar per
    relative-position bucket and head.

    The distance `d = j - i` from query position `i` to key position `j` falls in a
    bucket: with `bidirectional`, half the buckets are for keys after the query;
    within a direction the first half of the buckets hold the exact distances
    `0 .. n/2 - 1` and the rest log-spaced ranges up to `max_distance` (farther keys
    share the last bucket). The bias of head `h` is `table[bucket(d), h]`.

    Args:
        num_heads: number of attention heads (positive int).
        num_buckets: number of buckets (T5: 32); with `bidirectional`, even and >= 4.
        max_distance: the distance where the last bucket starts (T5: 128); greater
            than the exact half of the buckets.
        bidirectional: buckets for keys on both sides (an encoder) or only for keys
            at or before the query (causal: later keys share bucket 0, the mask hides
            them anyway).
        embeddings_initializer: initializer of the `(num_buckets, num_heads)` table.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query_positions: `(query_len,)` integer positions of the queries.
        key_positions: `(key_len,)` integer positions of the keys.

    Returns:
        `(num_heads, query_len, key_len)` float32.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import RelativePositionBias
    >>> layer = RelativePositionBias(num_heads=2, num_buckets=8, max_distance=16)
    >>> # a query at position 4, keys at 0..11: before it buckets 0-3, after it 4-7
    >>> ops.convert_to_numpy(layer.buckets(np.array([4]), np.arange(12))).tolist()
    [[2, 2, 2, 1, 0, 5, 6, 6, 6, 6, 7, 7]]
    >>> tuple(layer(np.arange(3), np.arange(5)).shape)
    (2, 3, 5)

    References:
        - [Raffel et al., 2020](https://arxiv.org/abs/1910.10683), section 2.1
    """

    def __init__(
        self,
        num_heads,
        num_buckets=32,
        max_distance=128,
        bidirectional=True,
        embeddings_initializer=None,
        **kwargs,
    ):
        super().__init__(num_heads, **kwargs)
        check_positive_int("num_buckets", num_buckets)
        check_positive_int("max_distance", max_distance)
        per_direction = num_buckets // 2 if bidirectional else num_buckets
        if per_direction < 2 or (bidirectional and num_buckets % 2):
            raise ValueError(
                "Expected `num_buckets` >= 2 (with `bidirectional`: even and >= 4). "
                f"Received: num_buckets={num_buckets}, bidirectional={bidirectional}"
            )
        if max_distance <= per_direction // 2:
            raise ValueError(
                f"Expected `max_distance` > {per_direction // 2} (the exact buckets of a "
                f"direction). Received: max_distance={max_distance}, "
                f"num_buckets={num_buckets}, bidirectional={bidirectional}"
            )
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        self.bidirectional = bool(bidirectional)
        # Default: a normal of std 0.02, as BERT's tables (T5's own is `d_model**-0.5`).
        self.embeddings_initializer = keras.initializers.get(
            embeddings_initializer or keras.initializers.RandomNormal(stddev=0.02)
        )

    def build(self, query_positions_shape=None, key_positions_shape=None):
        self.embeddings = self.add_weight(
            shape=(self.num_buckets, self.num_heads),
            initializer=self.embeddings_initializer,
            name="embeddings",
        )
        self.built = True

    def buckets(self, query_positions, key_positions):
        """The bucket of every (query, key) pair: `(query_len, key_len)` int32."""
        distance = self._relative(query_positions, key_positions)  # j - i
        n = self.num_buckets
        offset = ops.zeros_like(distance)
        if self.bidirectional:
            n //= 2
            offset = ops.where(distance > 0, n, 0)  # keys after the query: upper half
            distance = ops.abs(distance)
        else:
            distance = ops.maximum(-distance, 0)  # keys before the query; later ones: 0
        exact = n // 2
        # Beyond `exact`, bucket `exact + floor(log(d / exact) / log(max_distance / exact)
        # · (n - exact))`, at most `n - 1`: log-spaced, distance `max_distance` would
        # start bucket `n`. Counted as the integer distances where each bucket starts,
        # so the boundaries are exact on every backend (T5's float32 logarithms put a
        # distance that starts a bucket exactly, such as 40 for 64 causal buckets up to
        # 50, on either side depending on the library).
        far = exact + ops.reshape(
            ops.searchsorted(self._bucket_starts(n, exact), ops.reshape(distance, (-1,)), "right"),
            ops.shape(distance),
        )
        return offset + ops.where(distance < exact, distance, far)

    def _bucket_starts(self, n, exact):
        """The smallest distance of each log-spaced bucket after the first (int32)."""
        ratio = self.max_distance / exact
        starts = [math.ceil(exact * ratio ** (k / (n - exact)) - 1e-9) for k in range(1, n - exact)]
        return ops.convert_to_tensor(starts, "int32")

    def call(self, query_positions, key_positions):
        buckets = self.buckets(query_positions, key_positions)  # (q, k)
        bias = ops.take(ops.cast(self.embeddings, "float32"), buckets, axis=0)  # (q, k, heads)
        return ops.transpose(bias, (2, 0, 1))

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_buckets": self.num_buckets,
                "max_distance": self.max_distance,
                "bidirectional": self.bidirectional,
                "embeddings_initializer": keras.initializers.serialize(self.embeddings_initializer),
            }
        )
        return config


@keras_attn_export("keras_attn.layers.AlibiBias")
class AlibiBias(PositionBias):
    """ALiBi (Press et al., 2022): a fixed linear penalty on distance, `-m_h · |i - j|`,
    with one slope `m_h` per head and no weights.

    For `H` heads a power of two the slopes are the geometric sequence
    `m_h = 2^(-8h/H)`, `h = 1..H`; otherwise those of the largest power of two
    below `H`, then every other slope of the next power of two (the paper's rule).
    With a causal mask `|i - j| = i - j` on every visible key, as in the paper; an
    encoder gets the symmetric penalty.

    Args:
        num_heads: number of attention heads (positive int).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query_positions: `(query_len,)` integer positions of the queries.
        key_positions: `(key_len,)` integer positions of the keys.

    Returns:
        `(num_heads, query_len, key_len)` float32.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import AlibiBias
    >>> AlibiBias(num_heads=4).slopes()
    [0.25, 0.0625, 0.015625, 0.00390625]
    >>> ops.convert_to_numpy(AlibiBias(num_heads=4)(np.arange(1), np.arange(3)))[0].tolist()
    [[-0.0, -0.25, -0.5]]

    References:
        - [Press et al., 2022](https://arxiv.org/abs/2108.12409), section 3
    """

    def slopes(self):
        """The heads' slopes `m_h`, a list of floats."""

        def geometric(n):
            return [2.0 ** (-8.0 * h / n) for h in range(1, n + 1)]

        power = 2 ** int(math.floor(math.log2(self.num_heads)))
        slopes = geometric(power)
        if power < self.num_heads:
            slopes += geometric(2 * power)[0::2][: self.num_heads - power]
        return slopes

    def call(self, query_positions, key_positions):
        distance = ops.cast(ops.abs(self._relative(query_positions, key_positions)), "float32")
        slopes = ops.convert_to_tensor(self.slopes(), "float32")
        return -slopes[:, None, None] * distance[None]


POSITION_BIASES = {
    "t5": lambda heads: RelativePositionBias(heads),
    "t5_causal": lambda heads: RelativePositionBias(heads, bidirectional=False),
    "alibi": AlibiBias,
}


def serialize(position_bias):
    """A name, None or a serialized `PositionBias` config (an instance is a template)."""
    if position_bias is None:
        return None
    if isinstance(position_bias, str):
        if position_bias not in POSITION_BIASES:
            raise ValueError(
                f"Unknown position bias. Expected None, one of {sorted(POSITION_BIASES)} "
                f"or a PositionBias instance. Received: position_bias={position_bias!r}"
            )
        return position_bias
    if isinstance(position_bias, PositionBias):
        return keras.saving.serialize_keras_object(position_bias)
    if isinstance(position_bias, dict):
        return position_bias
    raise TypeError(
        f"Expected `position_bias` to be None, one of {sorted(POSITION_BIASES)} or a "
        f"PositionBias instance. Received: position_bias={position_bias!r} of type "
        f"{type(position_bias).__name__}"
    )


def instantiate(position_bias, num_heads, **overrides):
    """A new `PositionBias` layer for `num_heads` heads from `serialize`'s output,
    with `overrides` (e.g. `name`)."""
    if isinstance(position_bias, str):
        layer = POSITION_BIASES[position_bias](num_heads)
        config = {**layer.get_config(), **overrides}
        return type(layer).from_config(config)
    config = dict(position_bias, config={**position_bias["config"], **overrides})
    layer = keras.saving.deserialize_keras_object(config)
    if not isinstance(layer, PositionBias):
        raise ValueError(
            f"Expected a serialized PositionBias. Received: position_bias={position_bias!r}"
        )
    if layer.num_heads != num_heads:
        raise ValueError(
            f"Expected a position bias for the attention's {num_heads} heads. Received: "
            f"a {type(layer).__name__} with num_heads={layer.num_heads}"
        )
    return layer
