"""What must hold for every scoring function inside MultiHeadAttention."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import MultiHeadAttention, scoring
from tests.helpers import ALL_BACKENDS, dtype_name, gradients, to_numpy, xla_compiled

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

SCORES = sorted(scoring.SCORES)
BATCH, LEN, DIM, HEADS = 2, 6, 16, 2
# The key bias adds the same q . (W b_k) to every key's score under these scorings,
# so the softmax cancels it: its gradient is exactly zero by the mathematics.
KEY_BIAS_CANCELS = {"dot", "scaled_dot", "general"}


def _x(seed, length=LEN):
    return np.random.default_rng(seed).normal(size=(BATCH, length, DIM)).astype("float32")


def _layer(score, **kwargs):
    return MultiHeadAttention(HEADS, 8, score=score, **kwargs)


@pytest.mark.parametrize("score", SCORES)
def test_causal_mask_makes_position_i_independent_of_later_positions(score):
    layer, x = _layer(score), _x(0)
    base = to_numpy(layer(x, x, use_causal_mask=True))
    for i in range(LEN - 1):
        changed = x.copy()
        changed[:, i + 1 :] = _x(1)[:, i + 1 :]
        out = to_numpy(layer(changed, changed, use_causal_mask=True))
        np.testing.assert_array_equal(out[:, : i + 1], base[:, : i + 1])
        assert not np.allclose(out[:, i + 1 :], base[:, i + 1 :])


@pytest.mark.parametrize("score", SCORES)
def test_masked_keys_do_not_influence_outputs(score):
    layer, query, value = _layer(score), _x(2, 4), _x(3)
    padding = np.array([[1, 1, 1, 1, 0, 0], [1, 1, 0, 0, 0, 0]], bool)
    base = to_numpy(layer(query, value, value_mask=padding))
    changed = np.where(padding[..., None], value, 100.0 * _x(4)).astype("float32")
    np.testing.assert_array_equal(to_numpy(layer(query, changed, value_mask=padding)), base)


@pytest.mark.parametrize("score", SCORES)
def test_scores_are_distributions_with_zeros_at_masked_keys(score):
    layer, query, value = _layer(score), _x(5, 4), _x(6)
    mask = np.random.default_rng(7).random((BATCH, 4, LEN)) > 0.5
    mask[..., 0] = True
    _, probabilities = layer(query, value, attention_mask=mask, return_attention_scores=True)
    probabilities = to_numpy(probabilities)
    assert probabilities.shape == (BATCH, HEADS, 4, LEN)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-6)
    assert np.all(probabilities >= 0)
    assert np.all(probabilities[np.broadcast_to(~mask[:, None], probabilities.shape)] == 0)


@pytest.mark.parametrize("score", SCORES)
def test_a_row_with_every_key_masked_is_finite_and_zero(score):
    layer, x = _layer(score), _x(8)
    mask = np.ones((BATCH, LEN, LEN), bool)
    mask[0, 2] = False
    output, probabilities = layer(x, x, attention_mask=mask, return_attention_scores=True)
    output, probabilities = to_numpy(output), to_numpy(probabilities)
    assert np.all(np.isfinite(output)) and np.all(np.isfinite(probabilities))
    np.testing.assert_array_equal(to_numpy(probabilities)[0, :, 2], 0.0)
    # No attention at all: the output is the output projection's bias.
    np.testing.assert_allclose(to_numpy(output)[0, 2], layer.output_dense.bias, atol=1e-6)


@pytest.mark.backends("tensorflow", "jax")  # XLA
@pytest.mark.parametrize("score", SCORES)
def test_same_result_under_jit_compile(score):
    layer, x = _layer(score), _x(9)
    padding = np.array([[1] * LEN, [1, 1, 1, 0, 0, 0]], bool)
    eager = layer(x, x, value_mask=padding, use_causal_mask=True, return_attention_scores=True)

    def call(x, padding):
        return layer(x, x, value_mask=padding, use_causal_mask=True, return_attention_scores=True)

    for ours, xla in zip(eager, xla_compiled(call, [layer])(x, padding), strict=True):
        np.testing.assert_allclose(to_numpy(xla), to_numpy(ours), atol=1e-5)


@pytest.mark.parametrize("policy", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.parametrize("score", SCORES)
def test_finite_under_mixed_precision(score, policy):
    layer, x = _layer(score, dtype=policy), 4.0 * _x(10)
    mask = np.tril(np.ones((LEN, LEN), bool))[None].repeat(BATCH, 0)
    mask[1, 3] = False  # a fully masked row too
    output, probabilities = layer(x, x, attention_mask=mask, return_attention_scores=True)
    assert dtype_name(output) == policy.split("_")[1]
    assert np.all(np.isfinite(to_numpy(output, "float32")))
    assert np.all(np.isfinite(to_numpy(probabilities, "float32")))
    full = _layer(score)
    full(x, x)
    full.set_weights(layer.get_weights())
    reference = to_numpy(full(x, x, attention_mask=mask))
    error = np.linalg.norm(to_numpy(output, "float32") - reference) / np.linalg.norm(reference)
    assert error < (0.01 if policy == "mixed_float16" else 0.1)  # bfloat16 keeps 8 bits


@pytest.mark.parametrize("score", SCORES)
def test_gradients_reach_every_weight(score):
    layer, query, value = _layer(score), _x(11, 4), _x(12)
    layer(query, value)
    weight = np.random.default_rng(13).normal(size=(BATCH, 4, DIM)).astype("float32")
    grads = gradients(
        lambda: ops.sum(ops.multiply(layer(query, value, use_causal_mask=False), weight)),
        layer.trainable_weights,
    )
    for variable, gradient in zip(layer.trainable_weights, grads, strict=True):
        if score in KEY_BIAS_CANCELS and variable.path.endswith("key/bias"):
            np.testing.assert_allclose(to_numpy(gradient), 0.0, atol=1e-5)
            continue
        assert gradient is not None, variable.path
        assert np.abs(to_numpy(gradient)).max() > 1e-6, variable.path


@pytest.mark.parametrize("score", SCORES)
def test_keras_save_load_and_config_round_trip_give_identical_outputs(score, tmp_path):
    query = keras.Input((None, DIM))
    value = keras.Input((None, DIM))
    output = _layer(score, dropout=0.1)(query, value, use_causal_mask=True)
    model = keras.Model([query, value], output)
    x = _x(14)
    expected = to_numpy(model([x, x]))

    path = str(tmp_path / f"{score}.keras")
    model.save(path)
    np.testing.assert_array_equal(to_numpy(keras.saving.load_model(path)([x, x])), expected)

    clone = keras.Model.from_config(model.get_config())
    clone.set_weights(model.get_weights())
    np.testing.assert_array_equal(to_numpy(clone([x, x])), expected)
