"""Sinusoidal, learned and rotary position embeddings."""

import keras
import numpy as np
import pytest

from keras_attn.layers import LearnedPositionEmbedding, RotaryEmbedding, SinusoidalPositionEmbedding
from tests import references
from tests.helpers import ALL_BACKENDS, run_layer_test, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)


@pytest.mark.parametrize("d_model", [512, 33])
def test_sinusoidal_equals_the_paper_formula(d_model):
    inputs = np.zeros((2, 50, d_model), "float32")
    ours = to_numpy(SinusoidalPositionEmbedding()(inputs))
    assert ours.shape == inputs.shape
    expected = references.sinusoidal_position_embedding(50, d_model)
    np.testing.assert_allclose(ours[0], expected, atol=2e-5)
    np.testing.assert_array_equal(ours[0], ours[1])


def test_sinusoidal_start_index_and_wavelength():
    layer = SinusoidalPositionEmbedding(max_wavelength=100)
    full = to_numpy(layer(np.zeros((1, 10, 8), "float32")))
    np.testing.assert_allclose(
        layer(np.zeros((1, 3, 8), "float32"), start_index=7), full[:, 7:], atol=1e-6
    )
    np.testing.assert_allclose(
        full[0], references.sinusoidal_position_embedding(10, 8, 100), atol=1e-6
    )


def test_sinusoidal_symbolic_and_config():
    layer = SinusoidalPositionEmbedding(max_wavelength=500)
    assert SinusoidalPositionEmbedding.from_config(layer.get_config()).max_wavelength == 500
    x = keras.Input((None, 16))
    assert tuple(layer(x).shape) == (None, None, 16)
    with pytest.raises(ValueError, match="max_wavelength=0"):
        SinusoidalPositionEmbedding(max_wavelength=0)


def test_learned_layer_test_and_shape(tmp_path):
    data = {"inputs": np.random.default_rng(0).normal(size=(2, 9, 8)).astype("float32")}
    out = run_layer_test(
        LearnedPositionEmbedding,
        {"sequence_length": 12},
        data,
        expected_output_shape=(2, 9, 8),
        expected_num_trainable_weights=1,
        tmp_path=tmp_path,
    )
    np.testing.assert_array_equal(to_numpy(out[0]), to_numpy(out[1]))


def test_learned_rows_are_the_table_rows():
    layer = LearnedPositionEmbedding(sequence_length=6)
    out = to_numpy(layer(np.zeros((1, 4, 3), "float32"), start_index=2))
    np.testing.assert_array_equal(out[0], to_numpy(layer.position_embeddings)[2:6])


def test_learned_rejects_too_long_sequences():
    layer = LearnedPositionEmbedding(sequence_length=8)
    with pytest.raises(ValueError, match=r"Sequence too long.*`sequence_length` is 8.*length 9"):
        layer(np.zeros((1, 9, 4), "float32"))
    layer(np.zeros((1, 8, 4), "float32"))
    with pytest.raises(ValueError, match="start_index=5"):
        layer(np.zeros((1, 4, 4), "float32"), start_index=5)
    with pytest.raises(ValueError, match="Sequence too long"):
        LearnedPositionEmbedding(sequence_length=8)(keras.Input((9, 4)))
    with pytest.raises(ValueError, match="sequence_length=0"):
        LearnedPositionEmbedding(sequence_length=0)


@pytest.mark.backends("tensorflow")  # a length unknown until run time: a TensorFlow graph
def test_learned_rejects_too_long_sequences_known_only_at_run_time():
    import tensorflow as tf

    layer = LearnedPositionEmbedding(sequence_length=8)
    layer(np.zeros((1, 8, 4), "float32"))
    graph_call = tf.function(lambda x: layer(x), input_signature=[tf.TensorSpec((None, None, 4))])
    with pytest.raises(tf.errors.InvalidArgumentError):  # at run time, not silently
        graph_call(tf.zeros((1, 9, 4)))


def test_rotary_dot_products_depend_only_on_relative_position():
    rng = np.random.default_rng(1)
    q = rng.normal(size=(1, 1, 1, 16)).astype("float32")
    k = rng.normal(size=(1, 1, 1, 16)).astype("float32")
    layer = RotaryEmbedding()

    def rotated_dot(m, n):
        return float(np.sum(to_numpy(layer(q, start_index=m)) * to_numpy(layer(k, start_index=n))))

    np.testing.assert_allclose(rotated_dot(5, 2), rotated_dot(13, 10), rtol=1e-4)
    np.testing.assert_allclose(rotated_dot(0, 0), float(np.sum(q * k)), rtol=1e-5)
    assert abs(rotated_dot(5, 2) - rotated_dot(5, 3)) > 1e-3


def test_rotary_matches_the_rotation_formula_and_keeps_norms():
    x = np.random.default_rng(2).normal(size=(2, 5, 3, 8)).astype("float32")
    out = to_numpy(RotaryEmbedding(max_wavelength=100)(x))
    for pos in range(5):
        for i in range(4):  # pair (i, i + 4) turns by pos * 100^(-2i/8)
            angle = pos * 100 ** (-2 * i / 8)
            a, b = x[:, pos, :, i], x[:, pos, :, i + 4]
            np.testing.assert_allclose(
                out[:, pos, :, i], a * np.cos(angle) - b * np.sin(angle), atol=1e-5
            )
            np.testing.assert_allclose(
                out[:, pos, :, i + 4], b * np.cos(angle) + a * np.sin(angle), atol=1e-5
            )
    np.testing.assert_allclose(np.linalg.norm(out, axis=-1), np.linalg.norm(x, axis=-1), rtol=1e-5)


def test_rotary_config_and_errors():
    layer = RotaryEmbedding(max_wavelength=500, scaling_factor=2.0)
    assert RotaryEmbedding.from_config(layer.get_config()).get_config() == layer.get_config()
    x = np.random.default_rng(3).normal(size=(1, 1, 6)).astype("float32")
    # Linear position interpolation: position 6 scaled by 2 turns like position 3.
    np.testing.assert_allclose(
        layer(x, start_index=6), RotaryEmbedding(max_wavelength=500)(x, start_index=3), atol=1e-6
    )
    with pytest.raises(ValueError, match="even dim"):
        RotaryEmbedding()(np.zeros((1, 4, 5), "float32"))
    with pytest.raises(ValueError, match="scaling_factor=0"):
        RotaryEmbedding(scaling_factor=0)
