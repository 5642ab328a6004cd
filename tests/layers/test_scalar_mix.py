"""ScalarMix: ELMo's eq. 1 transcribed loop by loop, layer normalisation, masks, contract."""

import keras
import numpy as np
import pytest

from keras_attn.layers import ScalarMix
from tests.helpers import ALL_BACKENDS, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)


def _reference(states, scalars, gamma, mask=None, layer_norm=False, epsilon=1e-12):
    """ELMo_k = gamma * sum_j s_j h_kj, s = softmax(w); each layer first normalised over
    its real values when `layer_norm` (AllenNLP's ScalarMix, do_layer_norm=True)."""
    exp = [np.exp(w) for w in scalars]
    weights = [e / sum(exp) for e in exp]
    out = np.zeros(states[0].shape)
    for weight, state in zip(weights, states, strict=True):
        state = state.astype("float64")
        if layer_norm:
            values = state[mask.astype(bool)] if mask is not None else state.reshape(-1)
            state = (state - values.mean()) / np.sqrt(values.var() + epsilon)
        out += weight * state
    return gamma * out


@pytest.mark.parametrize("layer_norm", [False, True])
def test_equals_the_formula_with_learned_weights(layer_norm):
    rng = np.random.default_rng(0)
    states = [rng.normal(i, 1 + i, size=(2, 5, 4)).astype("float32") for i in range(4)]
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]])
    mix = ScalarMix(layer_norm=layer_norm)
    mix(states, padding_mask=mask)
    scalars, gamma = rng.normal(size=4).astype("float32"), np.float32(1.7)
    mix.scalars.assign(scalars)
    mix.gamma.assign(gamma)
    out = to_numpy(mix(states, padding_mask=mask))
    expected = _reference(states, scalars, gamma, mask, layer_norm)
    np.testing.assert_allclose(out, expected, atol=1e-5)
    if layer_norm:  # padding does not move the statistics
        states[0][0, 3:] = 1e4
        out = to_numpy(mix(states, padding_mask=mask))
        np.testing.assert_allclose(out[mask.astype(bool)], expected[mask.astype(bool)], atol=1e-5)


def test_starts_as_the_mean_and_reads_the_keras_mask():
    tokens = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 3, mask_zero=True)(tokens)
    states = [embedded, keras.layers.Dense(3)(embedded), keras.layers.Dense(3)(embedded)]
    mixed = ScalarMix(layer_norm=True)(states)
    assert mixed._keras_mask is not None  # the first state's mask goes on
    model = keras.Model(tokens, [mixed, *states])
    ids = np.array([[4, 5, 0, 0]])
    out, *values = (to_numpy(x) for x in model(ids))
    mask = (ids != 0).astype("float32")
    np.testing.assert_allclose(out, _reference(values, [0.0] * 3, 1.0, mask, True), atol=1e-5)
    plain = ScalarMix()([np.ones((1, 2, 3)), 3 * np.ones((1, 2, 3))])
    np.testing.assert_allclose(to_numpy(plain), 2 * np.ones((1, 2, 3)))


def test_bad_inputs_are_named():
    with pytest.raises(TypeError, match="layer_norm"):
        ScalarMix(layer_norm="yes")
    with pytest.raises(ValueError, match="epsilon"):
        ScalarMix(epsilon=0)
    with pytest.raises(ValueError, match="list of two or more hidden states"):
        ScalarMix()(np.zeros((1, 2, 3)))
    with pytest.raises(ValueError, match="one width"):
        ScalarMix()([np.zeros((1, 2, 3)), np.zeros((1, 2, 4))])
    mix = ScalarMix()
    mix([np.zeros((1, 2, 3))] * 3)
    with pytest.raises(ValueError, match="Expected 3 hidden states, as at build. Received: 2"):
        mix([np.zeros((1, 2, 3))] * 2)


def test_layer_contract(tmp_path):
    """Config round trip, a functional model over three inputs that fits (both weights
    move) and comes back from a `.keras` file with the same outputs."""
    layer = ScalarMix(layer_norm=True, epsilon=1e-6)
    assert ScalarMix.from_config(layer.get_config()).get_config() == layer.get_config()
    inputs = [keras.Input((4, 6)) for _ in range(3)]
    model = keras.Model(inputs, ScalarMix(layer_norm=True)(inputs))
    rng = np.random.default_rng(1)
    data = [rng.normal(i, 1, size=(8, 4, 6)).astype("float32") for i in range(3)]
    before = [to_numpy(w).copy() for w in model.trainable_weights]
    assert [tuple(w.shape) for w in model.trainable_weights] == [(3,), ()]
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    model.fit(data, 2 * data[2], batch_size=8, epochs=1, verbose=0)
    for w, old in zip(model.trainable_weights, before, strict=True):
        assert not np.allclose(to_numpy(w), old), w.path
    path = str(tmp_path / "mix.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    np.testing.assert_allclose(to_numpy(reloaded(data)), to_numpy(model(data)), atol=1e-6)
