"""The base class every scoring function derives from."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export


def heads_first_dot(query, key):
    """`einsum("bhqd,bhkd->bhqk", query, key)`, the heads-first dot products.

    XLA's CPU backend lays a batched product's right operand out contracting dimension
    first, so this form copies the keys, `k * d` numbers per head, every call: in a
    decoding step, the whole key cache of every layer (Gemma 3 270M at batch 8: 2.6 ms
    of a 37 ms step, docs/speed.md). Where the queries and the scores are the smaller
    copy, `q * (d + k) < k * d` (a few queries against a long cache), the keys' product
    with the queries, `(b, h, k, q)`, is taken and transposed instead."""
    q_len, k_len, dim = query.shape[-2], key.shape[-2], key.shape[-1]
    if None not in (q_len, k_len, dim) and q_len * (dim + k_len) < k_len * dim:
        return ops.swapaxes(ops.einsum("bhkd,bhqd->bhkq", key, query), -1, -2)
    return ops.einsum("bhqd,bhkd->bhqk", query, key)


@keras_attn_export("keras_attn.layers.AttentionScore")
class AttentionScore(keras.layers.Layer):
    """Base class of attention scoring functions: `call(query, key) -> scores`.

    A scoring function turns queries and keys into unnormalised scores; the
    attention layer that owns it applies the mask and the softmax. Subclasses
    override `_calculate_scores` (and `build_weights` if they have parameters);
    the base class handles the optional heads axis and checks shapes.

    Inputs either carry a heads axis, `(batch, length, num_heads, dim)`, as inside
    `MultiHeadAttention`, or not, `(batch, length, dim)`, as in a Bahdanau-style RNN
    decoder. Parameters are per head; without a heads axis there is one head.

    Args:
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(batch, query_len, num_heads, dim)` or `(batch, query_len, dim)`.
        key: `(batch, key_len, num_heads, dim)` or `(batch, key_len, dim)`.

    Returns:
        Scores `(batch, num_heads, query_len, key_len)`, or
        `(batch, query_len, key_len)` for inputs without a heads axis.

    Example:

    >>> import numpy as np
    >>> from keras_attn.layers import ScaledDotScore
    >>> q = np.ones((2, 3, 4, 16), "float32")  # (batch, query_len, heads, dim)
    >>> k = np.ones((2, 5, 4, 16), "float32")  # (batch, key_len, heads, dim)
    >>> tuple(ScaledDotScore()(q, k).shape)
    (2, 4, 3, 5)
    """

    # Scoring functions that compare query and key in one space need equal dims.
    requires_equal_dims = True

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        # Masks are the owning attention layer's to apply: a masked query or key is
        # accepted without Keras's warning, and the scores carry no mask.
        self.supports_masking = True

    def compute_mask(self, query, key, mask=None):
        return None

    def build(self, query_shape, key_shape):
        num_heads, query_dim, key_dim = self._check_shapes(query_shape, key_shape)
        self.build_weights(num_heads, query_dim, key_dim)
        self._built_dims = (num_heads, query_dim, key_dim)
        self.built = True

    def build_weights(self, num_heads, query_dim, key_dim):
        """Creates per-head parameters; the default scoring has none."""

    def _check_shapes(self, query_shape, key_shape):
        query_shape, key_shape = tuple(query_shape), tuple(key_shape)
        if len(query_shape) not in (3, 4) or len(key_shape) != len(query_shape):
            raise ValueError(
                "Expected `query` and `key` of equal rank, either 3 "
                "(batch, length, dim) or 4 (batch, length, num_heads, dim). "
                f"Received: query.shape={query_shape}, key.shape={key_shape}"
            )
        if query_shape[-1] is None or key_shape[-1] is None:
            raise ValueError(
                "The last dimension of `query` and `key` must be known. "
                f"Received: query.shape={query_shape}, key.shape={key_shape}"
            )
        num_heads = query_shape[2] if len(query_shape) == 4 else 1
        if len(query_shape) == 4 and key_shape[2] != num_heads:
            raise ValueError(
                "`query` and `key` must have the same number of heads (axis 2). "
                f"Received: query.shape={query_shape}, key.shape={key_shape}"
            )
        if self.requires_equal_dims and query_shape[-1] != key_shape[-1]:
            raise ValueError(
                f"{type(self).__name__} needs `query` and `key` with the same last "
                f"dimension. Received: query.shape={query_shape}, "
                f"key.shape={key_shape}"
            )
        dims = (num_heads, query_shape[-1], key_shape[-1])
        if self.built and getattr(self, "_built_dims", dims) != dims:
            raise ValueError(
                f"{type(self).__name__} '{self.name}' was built for (num_heads, "
                f"query_dim, key_dim)={self._built_dims}. Received: "
                f"query.shape={query_shape}, key.shape={key_shape}"
            )
        return dims

    def call(self, query, key):
        self._check_shapes(query.shape, key.shape)
        if len(query.shape) == 3:
            # One head: (batch, length, dim) -> (batch, length, 1, dim).
            scores = self._calculate_scores(ops.expand_dims(query, 2), ops.expand_dims(key, 2))
            return scores[:, 0]  # (batch, query_len, key_len)
        return self._calculate_scores(query, key)  # (batch, heads, q_len, k_len)

    @property
    def supports_heads_first(self):
        """Whether `heads_first_scores` applies (the dot-product scores; not a
        subclass that overrides `_calculate_scores`, whose override is then used)."""
        fast = getattr(type(self), "_heads_first", None)
        return fast is not None and type(self)._calculate_scores is fast[0]

    def heads_first_scores(self, query, key):
        """Scores from `(batch, num_heads, length, dim)` inputs.

        `MultiHeadAttention` computes in this layout when its scoring function
        `supports_heads_first`: a batched matrix product over (batch, heads) with
        no transposes inside it; other scoring functions are called on
        `(batch, length, num_heads, dim)`.

        Args:
            query: `(batch, num_heads, query_len, dim)`.
            key: `(batch, num_heads, key_len, dim)`.

        Returns:
            Scores `(batch, num_heads, query_len, key_len)`, equal to
            `self(query, key)` on the `(batch, length, num_heads, dim)` inputs.
        """
        if not self.supports_heads_first:
            raise NotImplementedError(
                f"{type(self).__name__} has no heads-first form; call the layer on "
                "(batch, length, num_heads, dim) inputs."
            )
        return type(self)._heads_first[1](self, query, key)

    def _calculate_scores(self, query, key):
        """Scores `(batch, heads, q_len, k_len)` from 4D `query` and `key`."""
        raise NotImplementedError(f"{type(self).__name__} must implement `_calculate_scores`.")

    def compute_output_shape(self, query_shape, key_shape):
        if len(query_shape) == 3:
            return (query_shape[0], query_shape[1], key_shape[1])
        return (query_shape[0], query_shape[2], query_shape[1], key_shape[1])


class PerHead(keras.initializers.Initializer):
    """Initialises a `(heads, ...)` weight head by head, so fans ignore `heads`."""

    def __init__(self, initializer):
        self.initializer = initializer

    def __call__(self, shape, dtype=None):
        return ops.stack([self.initializer(shape[1:], dtype=dtype) for _ in range(shape[0])])
