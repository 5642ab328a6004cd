"""ELMo's scalar mix: a learned, softmax-normalised weighting of a network's layers."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.layers.ScalarMix")
class ScalarMix(keras.layers.Layer):
    """`gamma * sum_j softmax(w)_j * h_j` over the hidden states of every layer.

    ELMo's task-specific combination of a biLM's layers (Peters et al., 2018, eq. 1):
    one scalar weight per layer, normalised by a softmax, and a scale `gamma`, all
    learned with the task while the network that made the states stays frozen. The
    weights start equal (`w = 0`) and `gamma` at 1, so the mix starts as the mean of
    the layers. With `layer_norm=True` each layer is first normalised as the paper
    suggests ("it can also help to apply layer normalization to each biLM layer
    before weighting"): by the mean and variance of all its real (unpadded) values
    together, with no learned scale.

    Args:
        layer_norm: normalise each layer before weighting it.
        epsilon: added to the variance when normalising.
        **kwargs: `keras.layers.Layer` arguments (`name`, `dtype`).

    Call arguments:
        inputs: a list of the `L + 1` hidden states (embeddings first, as
            `hidden_states()` of our backbones returns them), each `(batch, length,
            dim)`, or any same shape.
        padding_mask: optional `(batch, length)`, 1 for real tokens: the positions
            `layer_norm` counts (default: the first input's Keras mask, if any).

    Returns:
        The mix, the shape of one input; it carries the first input's mask.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import ScalarMix
    >>> states = [np.full((1, 2, 3), value, "float32") for value in (1.0, 2.0, 6.0)]
    >>> mix = ScalarMix()
    >>> ops.convert_to_numpy(mix(states))[0, 0].tolist()  # equal weights at the start
    [3.0, 3.0, 3.0]
    >>> [tuple(w.shape) for w in mix.weights]  # one scalar per layer, and gamma
    [(3,), ()]

    References:
        - [Peters et al., 2018, ELMo](https://arxiv.org/abs/1802.05365)
    """

    def __init__(self, layer_norm=False, epsilon=1e-12, **kwargs):
        super().__init__(**kwargs)
        if not isinstance(layer_norm, bool):
            raise TypeError(
                f"Expected `layer_norm` to be a bool. Received: layer_norm={layer_norm!r}"
            )
        if not epsilon > 0:
            raise ValueError(f"Expected `epsilon` > 0. Received: epsilon={epsilon!r}")
        self.layer_norm = layer_norm
        self.epsilon = epsilon
        self.supports_masking = True

    def build(self, inputs_shape, padding_mask_shape=None):
        shapes = [tuple(shape) for shape in inputs_shape] if _is_list(inputs_shape) else []
        if len(shapes) < 2 or any(len(shape) != len(shapes[0]) for shape in shapes):
            raise ValueError(
                "Expected `inputs` to be a list of two or more hidden states of one rank. "
                f"Received: shapes {shapes or tuple(inputs_shape)}"
            )
        widths = {shape[-1] for shape in shapes}
        if len(widths) != 1:
            raise ValueError(f"Expected hidden states of one width. Received: shapes {shapes}")
        self.num_layers = len(shapes)
        self.scalars = self.add_weight(
            name="scalars", shape=(self.num_layers,), initializer="zeros"
        )
        self.gamma = self.add_weight(name="gamma", shape=(), initializer="ones")
        self.built = True

    def call(self, inputs, padding_mask=None, mask=None):
        if len(inputs) != self.num_layers:
            raise ValueError(
                f"Expected {self.num_layers} hidden states, as at build. Received: {len(inputs)}"
            )
        if padding_mask is None and mask is not None:
            padding_mask = mask[0] if isinstance(mask, (list, tuple)) else mask
        weights = ops.softmax(ops.cast(self.scalars, self.compute_dtype))
        mixed = 0.0
        for j, state in enumerate(inputs):
            if self.layer_norm:
                state = self._normalize(state, padding_mask)
            mixed = mixed + weights[j] * state
        return ops.cast(self.gamma, self.compute_dtype) * mixed

    def _normalize(self, state, padding_mask):
        """`(h - mean) / sqrt(var + epsilon)` over all of `h`'s real values."""
        if padding_mask is None:
            mask = ops.ones_like(state)
        else:
            mask = ops.cast(padding_mask, state.dtype)
            mask = ops.broadcast_to(
                ops.reshape(mask, (*ops.shape(mask), *[1] * (len(state.shape) - 2))),
                ops.shape(state),
            )
        count = ops.maximum(ops.sum(mask), ops.cast(1.0, state.dtype))
        mean = ops.sum(state * mask) / count
        variance = ops.sum(ops.square((state - mean) * mask)) / count
        return (state - mean) / ops.sqrt(variance + ops.cast(self.epsilon, state.dtype))

    def compute_mask(self, inputs, mask=None, padding_mask=None):
        if isinstance(mask, (list, tuple)):
            return mask[0]
        return mask

    def compute_output_shape(self, inputs_shape, padding_mask_shape=None):
        return tuple(inputs_shape[0])

    def get_config(self):
        config = super().get_config()
        config.update({"layer_norm": self.layer_norm, "epsilon": self.epsilon})
        return config


def _is_list(shape):
    return isinstance(shape, (list, tuple)) and bool(shape) and isinstance(shape[0], (list, tuple))
