"""Activations the models need beyond Keras's names."""

import keras

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.layers.gelu_approximate", serializable=True)
def gelu_approximate(x):
    """GELU with the tanh approximation, `0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))`.

    The original BERT code and Hugging Face use the exact erf form (`"gelu"`);
    keras-hub's BERT uses this one. Registered, so models using it serialize.

    Args:
        x: a tensor.

    Returns:
        The activation of `x`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.layers import gelu_approximate
    >>> round(float(gelu_approximate(np.float32(1.0))), 4)
    0.8412
    """
    return keras.activations.gelu(x, approximate=True)
