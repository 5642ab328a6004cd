"""Scoring functions: hand-computed values, the paper formulas, `get`, bad input."""

import keras
import numpy as np
import pytest

from keras_attn.layers import (
    AdditiveScore,
    AttentionScore,
    CosineScore,
    DotScore,
    GeneralScore,
    ScaledDotScore,
    scoring,
)
from tests import references
from tests.helpers import ALL_BACKENDS, run_layer_test, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

Q = np.array([[[1.0, 2.0]]], "float32")  # (batch 1, query_len 1, dim 2)
K = np.array([[[3.0, 4.0], [1.0, 0.0], [-2.0, 1.0]]], "float32")  # key_len 3


def test_dot_by_hand():
    # 1*3 + 2*4 = 11; 1*1 + 2*0 = 1; 1*-2 + 2*1 = 0
    np.testing.assert_allclose(DotScore()(Q, K), [[[11.0, 1.0, 0.0]]])


def test_scaled_dot_by_hand():
    # d_k = 2: divide the dot products by sqrt(2)
    expected = np.array([[[11.0, 1.0, 0.0]]]) / np.sqrt(2.0)
    np.testing.assert_allclose(ScaledDotScore()(Q, K), expected, rtol=1e-6)


def test_scaled_dot_uses_sqrt_64_for_transformer_base():
    q = np.ones((1, 1, 64), "float32")
    np.testing.assert_allclose(ScaledDotScore()(q, q), [[[8.0]]])  # 64 / sqrt(64)


def test_cosine_by_hand():
    # |q| = sqrt(5); |k| = 5, 1, sqrt(5): cosines 11/(5 sqrt5), 1/sqrt5, 0; times t = 3
    expected = 3.0 * np.array([[[11 / (5 * np.sqrt(5)), 1 / np.sqrt(5), 0.0]]])
    np.testing.assert_allclose(
        to_numpy(CosineScore(initial_temperature=3.0)(Q, K)), expected, rtol=1e-5, atol=1e-6
    )


def test_cosine_temperature_is_learned_per_head_or_frozen():
    layer = CosineScore()
    layer(np.ones((1, 2, 4, 8), "float32"), np.ones((1, 3, 4, 8), "float32"))
    assert [tuple(w.shape) for w in layer.trainable_weights] == [(4,)]
    np.testing.assert_allclose(layer.temperature, np.full(4, 10.0))
    frozen = CosineScore(learn_temperature=False)
    frozen(Q, K)
    assert not frozen.trainable_weights and len(frozen.non_trainable_weights) == 1


def test_general_by_hand():
    layer = GeneralScore()
    layer.build(Q.shape, K.shape)
    w = np.array([[1.0, 2.0], [0.0, 1.0]], "float32")
    layer.kernel.assign(w[None])
    # q^T W = [1, 4]; scores [1*3 + 4*4, 1*1 + 0, -2 + 4] = [19, 1, 2]
    np.testing.assert_allclose(to_numpy(layer(Q, K)), [[[19.0, 1.0, 2.0]]])


def test_additive_by_hand():
    layer = AdditiveScore(units=2)
    layer.build(Q.shape, K.shape)
    w_q = np.array([[0.5, 0.0], [0.0, -0.5]], "float32")
    w_k = np.array([[0.1, 0.2], [0.3, -0.1]], "float32")
    v = np.array([1.0, 2.0], "float32")
    layer.query_kernel.assign(w_q[None])
    layer.key_kernel.assign(w_k[None])
    layer.score_vector.assign(v[None, :, None])
    # W_q q = [0.5, -1.0]; W_k k = [1.5, 0.2], [0.1, 0.2], [0.1, -0.5]; then v . tanh(sum)
    expected_0 = np.tanh(2.0) + 2 * np.tanh(-0.8)
    expected = [expected_0, np.tanh(0.6) + 2 * np.tanh(-0.8), np.tanh(0.6) + 2 * np.tanh(-1.5)]
    np.testing.assert_allclose(to_numpy(layer(Q, K)), [[expected]], rtol=1e-5)


@pytest.mark.parametrize("name", sorted(scoring.SCORES))
def test_every_score_matches_the_paper_formula_per_head(name):
    rng = np.random.default_rng(0)
    q = rng.normal(size=(2, 3, 4, 8)).astype("float32")  # (batch, q_len, heads, dim)
    k = rng.normal(size=(2, 5, 4, 8)).astype("float32")
    layer = scoring.get(name)
    scores = to_numpy(layer(q, k))
    assert scores.shape == (2, 4, 3, 5)
    for b in range(2):
        for h in range(4):
            qh, kh = q[b, :, h], k[b, :, h]
            if name == "dot":
                expected = references.dot(qh, kh)
            elif name == "scaled_dot":
                expected = references.scaled_dot(qh, kh)
            elif name == "cosine":
                expected = references.cosine(qh, kh, float(layer.temperature[h]))
            elif name == "general":
                expected = references.general(qh, kh, to_numpy(layer.kernel[h]))
            else:
                expected = references.additive(
                    qh,
                    kh,
                    to_numpy(layer.query_kernel[h]),
                    to_numpy(layer.key_kernel[h]),
                    to_numpy(layer.score_vector[h, :, 0]),
                )
            np.testing.assert_allclose(scores[b, h], expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("cls", [AdditiveScore, GeneralScore])
def test_bahdanau_style_use_with_different_query_and_key_widths(cls, tmp_path):
    rng = np.random.default_rng(1)
    data = {
        "query": rng.normal(size=(4, 1, 6)).astype("float32"),  # decoder state
        "key": rng.normal(size=(4, 7, 10)).astype("float32"),  # encoder states
    }
    run_layer_test(cls, {}, data, expected_output_shape=(4, 1, 7), tmp_path=tmp_path)


def test_scores_layer_test_for_parameter_free_scores(tmp_path):
    rng = np.random.default_rng(2)
    data = {
        "query": rng.normal(size=(4, 3, 2, 8)).astype("float32"),
        "key": rng.normal(size=(4, 5, 2, 8)).astype("float32"),
    }
    for cls in (DotScore, ScaledDotScore):
        layer = cls()
        assert tuple(layer(**data).shape) == (4, 2, 3, 5)
        assert cls.from_config(layer.get_config()).get_config() == layer.get_config()
    run_layer_test(
        CosineScore,
        {"initial_temperature": 5.0},
        data,
        expected_output_shape=(4, 2, 3, 5),
        expected_num_trainable_weights=1,
        tmp_path=tmp_path,
    )


def test_get_and_serialize():
    for name, cls in scoring.SCORES.items():
        layer = scoring.get(name)
        assert type(layer) is cls and isinstance(layer, AttentionScore)
        assert scoring.serialize(name) == name
        config = scoring.serialize(layer)
        assert type(scoring.get(config)) is cls
    instance = AdditiveScore(units=3)
    assert scoring.get(instance) is instance
    assert scoring.get(scoring.serialize(instance)).units == 3


def test_get_rejects_unknown_names_and_types():
    with pytest.raises(ValueError, match=r"Expected one of .*Received: score='luong'"):
        scoring.get("luong")
    with pytest.raises(TypeError, match="Received: score=3"):
        scoring.get(3)
    with pytest.raises(ValueError, match="Received: score="):
        scoring.get(keras.saving.serialize_keras_object(keras.layers.Dense(2)))


def test_bad_shapes_and_arguments_raise_value_errors():
    with pytest.raises(ValueError, match="same last dimension"):
        DotScore()(np.ones((1, 2, 3), "float32"), np.ones((1, 2, 4), "float32"))
    with pytest.raises(ValueError, match="equal rank"):
        DotScore()(np.ones((1, 2, 3), "float32"), np.ones((1, 2, 1, 3), "float32"))
    with pytest.raises(ValueError, match="number of heads"):
        GeneralScore()(np.ones((1, 2, 2, 3), "float32"), np.ones((1, 2, 3, 3), "float32"))
    layer = AdditiveScore()
    layer(np.ones((1, 2, 3), "float32"), np.ones((1, 2, 3), "float32"))
    with pytest.raises(ValueError, match="was built for"):
        layer(np.ones((1, 2, 5), "float32"), np.ones((1, 2, 3), "float32"))
    with pytest.raises(ValueError, match="units=0"):
        AdditiveScore(units=0)
    with pytest.raises(ValueError, match="initial_temperature=-1"):
        CosineScore(initial_temperature=-1)
    with pytest.raises(NotImplementedError):
        AttentionScore()(np.ones((1, 2, 3), "float32"), np.ones((1, 2, 3), "float32"))


@pytest.mark.parametrize("cls", [DotScore, ScaledDotScore])
def test_heads_first_scores_equal_the_layer(cls):
    rng = np.random.default_rng(0)
    q = rng.normal(size=(2, 5, 3, 8)).astype("float32")  # (batch, length, heads, dim)
    k = rng.normal(size=(2, 7, 3, 8)).astype("float32")
    layer = cls()
    assert layer.supports_heads_first
    heads_first = layer.heads_first_scores(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3))
    np.testing.assert_allclose(heads_first, layer(q, k), atol=1e-6)


@pytest.mark.parametrize("q_len, k_len, key_major", [(1, 48, True), (3, 48, True), (48, 48, False)])
def test_heads_first_dot_takes_the_smaller_copy_and_equals_the_einsum(
    q_len, k_len, key_major, monkeypatch
):
    from keras import ops

    from keras_attn.layers.scoring import attention_score

    rng = np.random.default_rng(1)
    q = rng.normal(size=(2, 3, q_len, 16)).astype("float32")  # (batch, heads, q, dim)
    k = rng.normal(size=(2, 3, k_len, 16)).astype("float32")
    einsums = []
    real = ops.einsum
    monkeypatch.setattr(ops, "einsum", lambda spec, *a: einsums.append(spec) or real(spec, *a))
    scores = attention_score.heads_first_dot(q, k)
    # A few queries against many keys: the keys' product, transposed (a decoding step's
    # cache is not copied); as many queries as keys: the queries' product.
    assert einsums == ["bhkd,bhqd->bhkq" if key_major else "bhqd,bhkd->bhqk"]
    np.testing.assert_allclose(to_numpy(scores), np.einsum("bhqd,bhkd->bhqk", q, k), atol=1e-5)


def test_heads_first_only_for_the_classes_own_scores():
    @keras.saving.register_keras_serializable(package="tests")
    class Halved(ScaledDotScore):
        def _calculate_scores(self, query, key):
            return super()._calculate_scores(query, key) / 2

    for layer in (Halved(), AdditiveScore(), CosineScore(), GeneralScore()):
        assert not layer.supports_heads_first
        with pytest.raises(NotImplementedError, match="no heads-first form"):
            layer.heads_first_scores(
                np.ones((1, 1, 2, 4), "float32"), np.ones((1, 1, 2, 4), "float32")
            )
    # MultiHeadAttention then uses the override: its scores are halved.
    from keras_attn.layers import MultiHeadAttention

    x = np.random.default_rng(1).normal(size=(2, 4, 8)).astype("float32")
    plain = MultiHeadAttention(2, 4, score=ScaledDotScore())
    halved = MultiHeadAttention(2, 4, score=Halved())
    plain(x, x)
    halved(x, x)
    halved.set_weights(plain.get_weights())
    _, scores = plain(x, x, return_attention_scores=True)
    _, halved_scores = halved(x, x, return_attention_scores=True)
    logits = np.log(to_numpy(scores))
    halved_logits = np.log(to_numpy(halved_scores))
    # softmax(s / 2): log-probabilities differ from half the originals by a per-row constant.
    diff = halved_logits - logits / 2
    np.testing.assert_allclose(diff, diff[..., :1].repeat(4, -1), atol=1e-5)
