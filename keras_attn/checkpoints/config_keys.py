"""Configuration values every family's `config.json` shares: positive sizes and the
feed-forward activation's Hugging Face names."""

from keras_attn.errors import UserInputError
from keras_attn.layers.activations import gelu_approximate

ACTIVATIONS = {
    "gelu": "gelu",
    "relu": "relu",
    "gelu_new": gelu_approximate,
    "gelu_pytorch_tanh": gelu_approximate,
}


def positive_ints(config, keys):
    """The values of `keys`, each a positive integer (else a ValueError names them)."""
    bad = [key for key in keys if not isinstance(config.get(key), int) or config[key] < 1]
    if bad:
        raise UserInputError(
            f"Expected positive integers for {bad} in the configuration. "
            f"Received: { {key: config.get(key) for key in bad} }"
        )
    return [config[key] for key in keys]


def finite_positive(value):
    """Whether `value` is a number (not a bool), finite and above zero."""
    import math

    return (
        isinstance(value, int | float)
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value > 0
    )


def positive_floats(values):
    """`values` (`{name: value}`), each a finite positive number (else a `UserInputError`
    names them: a norm's epsilon or a RoPE base of NaN would make every answer NaN)."""
    bad = {key: value for key, value in values.items() if not finite_positive(value)}
    if bad:
        raise UserInputError(f"Expected finite positive numbers. Received: {bad}")
    return [float(value) for value in values.values()]


def activation(config, key):
    """Our activation for the Hugging Face name under `key` (default `"gelu"`)."""
    name = config.get(key, "gelu")
    if name not in ACTIVATIONS:
        raise UserInputError(f"Expected {key} in {sorted(ACTIVATIONS)}. Received: {key}={name!r}")
    return ACTIVATIONS[name]


def hf_activation(model):
    """The Hugging Face name of the model's feed-forward activation."""
    import keras

    function = keras.activations.get(model.activation)
    for name, ours in ACTIVATIONS.items():
        if function is ours or function is keras.activations.get(ours):
            return name
    raise ValueError(
        f"Expected an activation Hugging Face has ({sorted(ACTIVATIONS)}). "
        f"Received: activation={model.activation!r}"
    )
