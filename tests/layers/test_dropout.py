"""keras_attn.layers.Dropout: Keras's layer with a 16-bit Philox mask (on TensorFlow;
Keras's own mask on the other backends)."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn import layers, models
from tests.helpers import ALL_BACKENDS, dtype_name, to_numpy, xla_compiled

pytestmark = pytest.mark.backends(*ALL_BACKENDS)


def _kept_scale(rate):
    """What a kept element is multiplied by: the exact inverse of the keep probability,
    which is `1 - round(rate * 65536) / 65536` for the 16-bit mask."""
    if keras.config.backend() != "tensorflow":
        return np.float32(1 / (1 - rate))
    return np.float32(65536 / (65536 - round(rate * 65536)))


@pytest.mark.parametrize("rate", [0.1, 0.5, 0.9])
def test_drop_fraction_and_expectation(rate):
    x = np.ones((400, 501), "float32")  # 200,400 elements
    y = to_numpy(layers.Dropout(rate, seed=3)(x, training=True))
    dropped = y == 0
    # Binomial standard deviation is < 0.0012 at this size; 5 sigma.
    assert abs(dropped.mean() - rate) < 0.006
    kept = y[~dropped]
    np.testing.assert_allclose(kept, _kept_scale(rate), rtol=1e-6)
    assert abs(kept[0] * (1 - rate) - 1) < 1e-4  # the 16-bit rate is within 2**-17
    assert abs(y.mean() - 1.0) < 0.02  # unbiased


@pytest.mark.parametrize(
    "compiled",
    [
        pytest.param("graph", marks=pytest.mark.backends("tensorflow")),
        pytest.param("xla", marks=pytest.mark.backends("tensorflow", "jax")),
    ],
)
def test_in_compiled_functions_and_odd_sizes(compiled):
    layer = layers.Dropout(0.25, seed=0)
    if compiled == "graph":  # a TensorFlow graph without XLA
        import tensorflow as tf

        f = tf.function(lambda x: layer(x, training=True))
    else:
        f = xla_compiled(lambda x: layer(x, training=True), [layer])
    for shape in [(1,), (3,), (7, 5, 3), (2048, 129)]:
        y = to_numpy(f(np.ones(shape, "float32")))
        assert y.shape == shape
        assert set(np.unique(y).tolist()) <= {0.0, _kept_scale(0.25)}
    y = to_numpy(f(np.ones((2048, 129), "float32")))
    assert abs((y == 0).mean() - 0.25) < 0.01


def test_seeded_reproducible_and_new_mask_each_call():
    x = np.ones((64, 64), "float32")
    a, b = layers.Dropout(0.5, seed=7), layers.Dropout(0.5, seed=7)
    first, again = to_numpy(a(x, training=True)), to_numpy(b(x, training=True))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, to_numpy(a(x, training=True)))


def test_noise_shape_broadcasts_like_keras():
    y = to_numpy(
        layers.Dropout(0.5, noise_shape=(None, 1, 8), seed=1)(
            np.ones((6, 5, 8), "float32"), training=True
        )
    )
    assert (y == y[:, :1]).all()  # one mask per (batch, feature), shared over axis 1
    assert 0 < (y == 0).mean() < 1


def test_identity_when_not_training_and_edge_rates():
    x = np.arange(6, dtype="float32").reshape(2, 3)
    np.testing.assert_array_equal(to_numpy(layers.Dropout(0.5)(x)), x)
    np.testing.assert_array_equal(to_numpy(layers.Dropout(0.0)(x, training=True)), x)
    np.testing.assert_array_equal(to_numpy(layers.Dropout(1.0)(x, training=True)), np.zeros_like(x))
    with pytest.raises(ValueError, match="rate"):
        layers.Dropout(1.5)


def test_keeps_the_compute_dtype():
    y = layers.Dropout(0.5, dtype="mixed_bfloat16")(np.ones((8, 8), "float32"), training=True)
    assert dtype_name(y) == "bfloat16"
    assert set(np.unique(to_numpy(ops.cast(y, "float32"))).tolist()) <= {0.0, 2.0}


def test_config_round_trip_and_keras_config():
    layer = layers.Dropout(0.3, noise_shape=(None, 1), seed=5, name="d")
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is layers.Dropout and restored.get_config() == layer.get_config()
    # Keras's layer's config builds ours: a drop-in.
    assert layers.Dropout.from_config(keras.layers.Dropout(0.2).get_config()).rate == 0.2


def test_every_dropout_in_the_models_is_ours():
    backbone = models.BertBackbone.from_size("tiny", vocabulary_size=100, max_sequence_length=16)
    classifier = models.BertClassifier(backbone, num_classes=2)
    gpt = models.GPTLanguageModel(
        vocabulary_size=50,
        num_layers=1,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=8,
    )
    found = 0
    for model in (classifier, gpt):
        for layer in model._flatten_layers():
            if isinstance(layer, keras.layers.Dropout):
                assert type(layer) is layers.Dropout, layer.name
                found += 1
    assert found > 5
