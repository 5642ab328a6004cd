"""MeanPooling: the masked mean (and its normalised form) against NumPy; masks; round trip."""

import keras
import numpy as np
import pytest

from keras_attn.layers import MeanPooling
from tests.helpers import ALL_BACKENDS, run_layer_test, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)


def _reference(x, mask, normalize):
    mask = mask[..., None].astype("float64")
    pooled = (x.astype("float64") * mask).sum(1) / np.maximum(mask.sum(1), 1.0)
    if normalize:
        pooled /= np.maximum(np.linalg.norm(pooled, axis=-1, keepdims=True), 1e-12)
    return pooled


@pytest.mark.parametrize("normalize", [False, True])
def test_matches_the_formula_with_padding(normalize):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 5, 4)).astype("float32")
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [0, 0, 0, 0, 0]])
    out = to_numpy(MeanPooling(normalize=normalize)(x, padding_mask=mask))
    np.testing.assert_allclose(out, _reference(x, mask, normalize), atol=1e-6)
    assert np.all(out[2] == 0.0)  # no real token: zeros, not NaN
    # Padding values have no influence.
    x[0, 3:] = 1e3
    np.testing.assert_allclose(
        to_numpy(MeanPooling(normalize=normalize)(x, padding_mask=mask))[0], out[0], atol=1e-6
    )


def test_reads_the_keras_mask_and_consumes_it():
    inputs = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(10, 3, mask_zero=True)(inputs)
    pooled = MeanPooling()(embedded)
    model = keras.Model(inputs, pooled)
    ids = np.array([[4, 5, 0, 0]])
    table = to_numpy(model.layers[1].embeddings)
    np.testing.assert_allclose(
        to_numpy(model(ids)), table[[4, 5]].mean(0, keepdims=True), atol=1e-6
    )
    assert getattr(pooled, "_keras_mask", None) is None


def test_layer_contract(tmp_path):
    rng = np.random.default_rng(1)
    data = {
        "inputs": rng.normal(size=(2, 4, 6)).astype("float32"),
        "padding_mask": np.array([[1, 1, 0, 0], [1, 1, 1, 1]], "int32"),
    }
    run_layer_test(
        MeanPooling,
        {"normalize": True},
        data,
        expected_output_shape=(2, 6),
        expected_num_trainable_weights=0,
        tmp_path=tmp_path,
    )


def test_bad_arguments():
    with pytest.raises(TypeError, match="normalize='yes'"):
        MeanPooling(normalize="yes")
    with pytest.raises(ValueError, match=r"Expected `inputs` of shape \(batch, length, dim\)"):
        MeanPooling()(np.zeros((2, 3)))
