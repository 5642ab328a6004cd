"""gelu_approximate: the tanh formula of Hendrycks & Gimpel, and serializable by name."""

import keras
import numpy as np
import pytest
import torch

from keras_attn import layers
from tests.helpers import ALL_BACKENDS, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)


def test_gelu_approximate_is_the_tanh_formula_and_torchs():
    x = np.linspace(-6, 6, 101).astype("float32")
    formula = 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))
    ours = to_numpy(layers.gelu_approximate(x))
    np.testing.assert_allclose(ours, formula, atol=1e-6)
    theirs = torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh").numpy()
    np.testing.assert_allclose(ours, theirs, atol=1e-6)
    exact = torch.nn.functional.gelu(torch.from_numpy(x)).numpy()
    assert np.abs(ours - exact).max() > 1e-5  # a different function from erf GELU


def test_gelu_approximate_round_trips_as_an_activation():
    name = keras.activations.serialize(layers.gelu_approximate)
    assert keras.activations.get(name) is layers.gelu_approximate
