"""Cosine-similarity scoring with a learnable temperature."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_number
from keras_attn.layers.scoring.attention_score import AttentionScore


@keras_attn_export("keras_attn.layers.CosineScore")
class CosineScore(AttentionScore):
    """Cosine scoring, `score(q, k) = t_h * q^T k / (||q|| ||k||)`.

    Cosines lie in [-1, 1], where a softmax is close to uniform, so each head
    multiplies them by a temperature `t_h` (learned by default, as in Swin
    Transformer V2's scaled cosine attention). Norms are computed in float32 so
    half-precision inputs cannot overflow.

    Args:
        initial_temperature: positive float, the starting value of every head's
            temperature. Defaults to `10.0`.
        learn_temperature: whether the temperatures are trained. Defaults to `True`.
        epsilon: small positive float added under the norms. Defaults to `1e-6`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(batch, query_len, num_heads, dim)` or `(batch, query_len, dim)`.
        key: `(batch, key_len, num_heads, dim)` or `(batch, key_len, dim)`.

    Returns:
        Scores `(batch, num_heads, query_len, key_len)` (or without the heads axis).

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import CosineScore
    >>> q = np.array([[[1.0, 0.0]]], "float32")
    >>> k = np.array([[[2.0, 0.0], [0.0, 5.0]]], "float32")
    >>> np.round(ops.convert_to_numpy(CosineScore(initial_temperature=2.0)(q, k)), 5).tolist()
    [[[2.0, 0.0]]]

    References:
        - [Liu et al., 2021, Swin Transformer V2](https://arxiv.org/abs/2111.09883)
    """

    def __init__(self, initial_temperature=10.0, learn_temperature=True, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        check_positive_number("initial_temperature", initial_temperature)
        check_positive_number("epsilon", epsilon)
        self.initial_temperature = float(initial_temperature)
        self.learn_temperature = bool(learn_temperature)
        self.epsilon = float(epsilon)

    def build_weights(self, num_heads, query_dim, key_dim):
        self.temperature = self.add_weight(
            name="temperature",
            shape=(num_heads,),
            initializer=keras.initializers.Constant(self.initial_temperature),
            trainable=self.learn_temperature,
        )

    def _normalize(self, x):
        x = ops.cast(x, "float32")
        return x * ops.rsqrt(ops.sum(ops.square(x), axis=-1, keepdims=True) + self.epsilon)

    def _calculate_scores(self, query, key):
        cosine = ops.einsum(
            "bqhd,bkhd->bhqk", self._normalize(query), self._normalize(key)
        )  # (batch, heads, q, k), float32
        temperature = ops.cast(self.temperature, "float32")[None, :, None, None]
        return ops.cast(cosine * temperature, query.dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "initial_temperature": self.initial_temperature,
                "learn_temperature": self.learn_temperature,
                "epsilon": self.epsilon,
            }
        )
        return config
