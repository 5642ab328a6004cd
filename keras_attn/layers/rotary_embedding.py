"""Rotary position embedding (RoPE)."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_number


@keras_attn_export("keras_attn.layers.RotaryEmbedding")
class RotaryEmbedding(keras.layers.Layer):
    """Rotary position embedding: rotates query/key features by position.

    Feature pairs `(x_i, x_{i + d/2})` are rotated by the angle
    `pos * max_wavelength^(-2i/d) / scaling_factor`, so the dot product of a
    rotated query at position m and a rotated key at position n depends on the
    positions only through `m - n` (Su et al., 2021). Pairs are split in halves
    (the GPT-NeoX / LLaMA convention used by keras-hub and Hugging Face), not
    interleaved as in RoFormer's paper; the two are a fixed permutation apart.

    Args:
        max_wavelength: base of the wavelengths (positive). Defaults to `10000`.
        scaling_factor: positions are divided by it (linear position
            interpolation, for contexts longer than trained). Defaults to `1.0`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(batch, length, dim)` or `(batch, length, num_heads, dim)`, with
            `dim` even.
        start_index: position of the first element. Defaults to `0`.

    Returns:
        The rotated inputs, same shape and dtype.

    Example:

    >>> import numpy as np
    >>> from keras_attn.layers import RotaryEmbedding
    >>> query = np.ones((2, 6, 4, 16), "float32")  # (batch, length, heads, dim)
    >>> tuple(RotaryEmbedding()(query).shape)
    (2, 6, 4, 16)

    References:
        - [Su et al., 2021](https://arxiv.org/abs/2104.09864)
    """

    def __init__(self, max_wavelength=10000, scaling_factor=1.0, **kwargs):
        super().__init__(**kwargs)
        check_positive_number("max_wavelength", max_wavelength)
        check_positive_number("scaling_factor", scaling_factor)
        self.max_wavelength = max_wavelength
        self.scaling_factor = scaling_factor
        self.supports_masking = True

    def build(self, inputs_shape):
        if len(inputs_shape) not in (3, 4) or inputs_shape[-1] is None or inputs_shape[-1] % 2:
            raise ValueError(
                "Expected `inputs` of shape (batch, length, dim) or (batch, length, "
                f"num_heads, dim) with an even dim. Received: inputs.shape={tuple(inputs_shape)}"
            )
        self.built = True

    def call(self, inputs, start_index=0):
        dim = inputs.shape[-1]
        positions = ops.cast(ops.arange(ops.shape(inputs)[1]) + start_index, "float32")
        inverse_frequencies = ops.power(
            ops.cast(self.max_wavelength, "float32"),
            -ops.cast(ops.arange(0, dim, 2), "float32") / dim,
        )
        angles = positions[:, None] * inverse_frequencies[None, :] / self.scaling_factor
        angles = ops.concatenate([angles, angles], axis=-1)  # (length, dim)
        if len(inputs.shape) == 4:
            angles = angles[:, None, :]  # (length, 1, dim), broadcast over heads
        cos = ops.cast(ops.cos(angles), inputs.dtype)
        sin = ops.cast(ops.sin(angles), inputs.dtype)
        first, second = ops.split(inputs, 2, axis=-1)
        rotated_half = ops.concatenate([-second, first], axis=-1)
        return inputs * cos + rotated_half * sin

    def compute_output_shape(self, inputs_shape):
        return inputs_shape

    def get_config(self):
        config = super().get_config()
        config.update(
            {"max_wavelength": self.max_wavelength, "scaling_factor": self.scaling_factor}
        )
        return config


def check_rotary_arguments(max_wavelength, scaling_factor, key_dim):
    """ValueErrors for an attention layer's RoPE arguments: positive numbers, and an even
    `key_dim` (RoPE rotates pairs of features)."""
    check_positive_number("rotary_max_wavelength", max_wavelength, allow_none=True)
    check_positive_number("rotary_scaling_factor", scaling_factor)
    if max_wavelength is not None and key_dim % 2:
        raise ValueError(
            "Expected an even `key_dim` with `rotary_max_wavelength` (RoPE rotates pairs "
            f"of features). Received: key_dim={key_dim}"
        )
