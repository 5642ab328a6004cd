"""LocalAttention (Luong's local-m and local-p) and LocationScore against loop-by-loop
NumPy transcriptions of Luong et al. (2015), eqs. 8-10; masks, serialisation, XLA and
mixed precision; bad arguments named."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import GeneralScore, LocalAttention, LocationScore, MultiHeadAttention
from tests.helpers import ALL_BACKENDS, dtype_name, gradients, to_numpy, xla_compiled

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

RNG = np.random.default_rng(0)
BATCH, TARGET, SOURCE, DIM = 3, 5, 9, 6
LENGTHS = [9, 6, 3]  # real source lengths; the rest is padding


def _data():
    query = RNG.normal(size=(BATCH, TARGET, DIM)).astype("float32")
    value = RNG.normal(size=(BATCH, SOURCE, DIM)).astype("float32")
    mask = np.arange(SOURCE)[None] < np.array(LENGTHS)[:, None]
    return query, value, mask


def _luong(query, value, mask, kernel, window, alignment, w_p=None, v_p=None, start=0):
    """Eqs. 9-10 for one example at a time, one target position at a time."""
    weights = np.zeros((BATCH, TARGET, SOURCE))
    context = np.zeros((BATCH, TARGET, value.shape[-1]))
    for b in range(BATCH):
        length = int(mask[b].sum())
        for t in range(TARGET):
            h_t = query[b, t].astype("float64")
            if alignment == "monotonic":
                p_t = start + t
            else:
                gate = v_p[:, 0] @ np.tanh(w_p.T @ h_t)
                p_t = length / (1.0 + np.exp(-gate))  # S · sigmoid(v_p^T tanh(W_p h_t))
            window_positions = [s for s in range(length) if abs(s - p_t) <= window]
            if not window_positions:
                continue
            scores = np.array([h_t @ kernel @ value[b, s] for s in window_positions])
            align = np.exp(scores - scores.max())
            align /= align.sum()
            for a, s in zip(align, window_positions, strict=True):
                if alignment == "predictive":
                    sigma = window / 2.0
                    a = a * np.exp(-((s - p_t) ** 2) / (2 * sigma**2))
                weights[b, t, s] = a
                context[b, t] += a * value[b, s]
    return context, weights


@pytest.mark.parametrize("alignment", ["monotonic", "predictive"])
def test_local_attention_is_luongs_equations(alignment):
    query, value, mask = _data()
    layer = LocalAttention(window=2, alignment=alignment, score=GeneralScore())
    layer.build(query.shape, value.shape)
    if alignment == "predictive":  # a spread of positions, not all near S/2
        layer.position_vector.assign(RNG.normal(0, 2.0, (DIM, 1)).astype("float32"))
    context, weights = layer(query, value, value_mask=mask, return_attention_scores=True)
    kernel = to_numpy(layer.score.kernel)[0]
    expected_context, expected_weights = _luong(
        query,
        value,
        mask,
        kernel,
        2,
        alignment,
        w_p=to_numpy(layer.position_kernel) if alignment == "predictive" else None,
        v_p=to_numpy(layer.position_vector) if alignment == "predictive" else None,
    )
    np.testing.assert_allclose(to_numpy(weights), expected_weights, atol=1e-5)
    np.testing.assert_allclose(to_numpy(context), expected_context, atol=1e-5)
    outside = expected_weights == 0
    assert np.all(to_numpy(weights)[outside] == 0.0)  # exactly zero outside the window
    assert outside.any() and (~outside).any()


def test_monotonic_decoding_one_step_at_a_time_with_query_start():
    query, value, mask = _data()
    layer = LocalAttention(window=1, score="dot")
    _, full = layer(query, value, value_mask=mask, return_attention_scores=True)
    for t in range(TARGET):
        _, step = layer(
            query[:, t : t + 1], value, value_mask=mask, query_start=t, return_attention_scores=True
        )
        np.testing.assert_allclose(to_numpy(step)[:, 0], to_numpy(full)[:, t], atol=1e-6)


def test_predictive_position_learns_through_the_gaussian():
    query, value, mask = _data()
    layer = LocalAttention(window=3, alignment="predictive", units=4)
    layer(query, value, value_mask=mask)  # build
    grads = gradients(
        lambda: ops.sum(layer(query, value, value_mask=mask) ** 2),
        [layer.position_kernel, layer.position_vector],
    )
    assert all(g is not None and np.abs(to_numpy(g)).sum() > 0 for g in grads)


def test_location_score_is_its_formula_and_masks_apply_in_multi_head_attention():
    query = RNG.normal(size=(2, 4, 3, 5)).astype("float32")  # (batch, q, heads, dim)
    key = RNG.normal(size=(2, 6, 3, 7)).astype("float32")
    score = LocationScore(max_length=8)
    scores = to_numpy(score(query, key))
    kernel = to_numpy(score.kernel)  # (heads, dim, max_length)
    expected = np.einsum("bqhd,hds->bhqs", query, kernel)[..., :6]
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    # The keys' contents do not matter.
    np.testing.assert_allclose(to_numpy(score(query, key * 0 + 1)), scores, atol=1e-6)

    attention = MultiHeadAttention(num_heads=2, key_dim=4, score=LocationScore(max_length=8))
    x, memory = RNG.normal(size=(2, 3, 8)), RNG.normal(size=(2, 6, 8))
    mask = np.array([[1] * 6, [1] * 4 + [0] * 2], bool)
    _, probabilities = attention(
        x, memory, attention_mask=mask[:, None, :], return_attention_scores=True
    )
    probabilities = to_numpy(probabilities)
    assert np.all(probabilities[1, :, :, 4:] == 0.0)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)


@pytest.mark.slow
def test_serialisation_xla_and_mixed_precision_with_masks(tmp_path):
    tokens = keras.Input((None,), dtype="int32")
    source = keras.Input((None,), dtype="int32")
    embed = keras.layers.Embedding(50, 16, mask_zero=True)
    states = keras.layers.GRU(16, return_sequences=True)(embed(tokens))
    memory = keras.layers.GRU(16, return_sequences=True)(embed(source))
    local = LocalAttention(window=2, alignment="predictive", score="general")
    context, weights = local(states, memory, return_attention_scores=True)
    logits = keras.layers.Dense(50, dtype="float32")(keras.layers.Concatenate()([context, states]))
    model = keras.Model([tokens, source], logits)
    x = [RNG.integers(1, 50, (4, 5)), np.pad(RNG.integers(1, 50, (4, 6)), ((0, 0), (0, 3)))]
    y = RNG.integers(0, 50, (4, 5))
    xla = keras.config.backend() != "torch"  # PyTorch has no XLA: eager there
    model.compile(
        "adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), jit_compile=xla
    )
    history = model.fit(x, y, epochs=2, verbose=0).history  # the source mask propagated
    assert np.isfinite(history["loss"]).all()
    path = tmp_path / "local.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(
        restored.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-5
    )
    (local_again,) = [layer for layer in restored.layers if isinstance(layer, LocalAttention)]
    assert (local_again.window, local_again.alignment) == (2, "predictive")
    # The padded source keys get no weight: the mask of `memory` reached the layer.
    probe = keras.Model([tokens, source], weights)
    assert np.all(to_numpy(probe.predict(x, verbose=0))[:, :, 6:] == 0.0)

    keras.config.set_dtype_policy("mixed_float16")
    try:
        layer = LocalAttention(window=2, alignment="predictive", score=LocationScore(max_length=9))
        query, value, mask = _data()

        def step(q, v, m):
            return layer(q, v, value_mask=m, return_attention_scores=True)

        layer(query, value, value_mask=mask)  # build
        context, weights = (xla_compiled(step, [layer]) if xla else step)(query, value, mask)
        assert dtype_name(context) == "float16" and np.isfinite(to_numpy(context)).all()
        assert np.all(to_numpy(weights)[2, :, 3:] == 0)  # the padding of the 3-key example
    finally:
        keras.config.set_dtype_policy("float32")


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="window=0"):
        LocalAttention(window=0)
    with pytest.raises(ValueError, match="alignment='gaussian'"):
        LocalAttention(window=2, alignment="gaussian")
    with pytest.raises(ValueError, match="max_length=None"):
        LocationScore()
    with pytest.raises(ValueError, match="max_length`=4 key positions.*12 keys"):
        LocationScore(max_length=4)(np.ones((1, 2, 3), "float32"), np.ones((1, 12, 3), "float32"))
    with pytest.raises(ValueError, match="`value` of shape"):
        LocalAttention(window=2)(np.ones((1, 2, 3), "float32"), np.ones((1, 2, 3, 4), "float32"))
