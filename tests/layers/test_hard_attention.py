"""HardAttention and Xu et al.'s estimator: on a problem small enough to enumerate, the
mean REINFORCE estimate is the exact gradient of the expected loss, and the baseline
lowers its variance; straight-through Gumbel-softmax trains the scores; masked keys
are never drawn; inference is deterministic; serialisation; bad arguments named."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import GeneralScore, HardAttention, ReinforceBaseline, reinforce_loss
from tests.helpers import ALL_BACKENDS, dtype_name, gradients, jacobian, to_numpy, xla_compiled

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

COSTS = np.array([1.0, 3.0, -2.0, 0.5], "float32") + 5.0  # an offset the baseline removes
SAMPLES = 4000


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(1, 1, 4)).astype("float32")
    keys = rng.normal(size=(1, 4, 4)).astype("float32")
    layer = HardAttention(score=GeneralScore(), seed=seed)
    layer(query, keys)  # build
    return layer, query, keys


def _estimates(layer, query, keys, baseline):
    """Per-sample REINFORCE gradients `(SAMPLES, 16)` w.r.t. the score's kernel, and the
    gradient of `reinforce_loss` over them all."""
    queries, all_keys = np.repeat(query, SAMPLES, 0), np.repeat(keys, SAMPLES, 0)

    def per_sample_and_mean():  # one set of draws for both
        out = layer(queries, all_keys, training=True, return_details=True)
        cost = ops.take(COSTS, out["choices"][:, 0, 0])  # the task loss of each sample
        advantage = -cost if baseline is None else baseline(-cost)
        per_sample = cost - ops.stop_gradient(advantage) * out["log_probs"][:, 0]
        loss = reinforce_loss(cost, out["log_probs"], advantage)
        return ops.concatenate([per_sample, loss[None]])

    rows = np.reshape(jacobian(per_sample_and_mean, layer.score.kernel), (SAMPLES + 1, -1))
    return rows[:SAMPLES], rows[SAMPLES]


@pytest.mark.slow  # over 10 s: left out of `make test-fast`
def test_reinforce_is_unbiased_and_the_baseline_lowers_its_variance():
    layer, query, keys = _problem()

    def expected_cost():  # exact: the expectation over the four keys
        probabilities = layer(query, keys, return_details=True)["probabilities"][0, 0]
        return ops.sum(ops.multiply(probabilities, COSTS))

    exact = np.reshape(to_numpy(gradients(expected_cost, [layer.score.kernel])[0]), -1)
    expected = to_numpy(expected_cost())

    plain, plain_mean = _estimates(layer, query, keys, baseline=None)
    baseline = ReinforceBaseline(decay=0.5)
    for _ in range(4):  # the moving average of the rewards settles near -E[cost]
        sampled = layer(
            np.repeat(query, 500, 0), np.repeat(keys, 500, 0), training=True, return_details=True
        )
        baseline(-ops.take(COSTS, sampled["choices"][:, 0, 0]), training=True)
    assert abs(float(baseline.value) + float(expected)) < 0.3
    with_baseline, baseline_mean = _estimates(layer, query, keys, baseline)

    for samples, mean in ((plain, plain_mean), (with_baseline, baseline_mean)):
        np.testing.assert_allclose(samples.mean(0), mean, rtol=1e-4, atol=1e-6)
        error = samples.std(0) / np.sqrt(SAMPLES)  # Monte-Carlo standard error
        assert np.all(np.abs(samples.mean(0) - exact) <= 4.5 * error + 1e-6), (
            samples.mean(0),
            exact,
        )
    print(
        "exact",
        exact,
        "variance without / with the baseline",
        plain.var(0).sum(),
        with_baseline.var(0).sum(),
    )
    assert with_baseline.var(0).sum() < 0.2 * plain.var(0).sum()


def test_gumbel_straight_through_and_determinism_and_masks():
    layer, query, keys = _problem(1)
    gumbel = HardAttention(score=GeneralScore(), estimator="gumbel", temperature=0.5, seed=3)
    gumbel(query, keys)
    gumbel.score.kernel.assign(layer.score.kernel)

    def loss():
        out = gumbel(
            np.repeat(query, 64, 0), np.repeat(keys, 64, 0), training=True, return_details=True
        )
        return ops.sum(out["context"] ** 2), out

    (gradient,), out = gradients(loss, [gumbel.score.kernel], has_aux=True)
    assert np.abs(to_numpy(gradient)).sum() > 0
    # The forward pass is a hard choice: each context is one of the keys.
    contexts, chosen = to_numpy(out["context"])[:, 0], to_numpy(out["choices"])[:, 0, 0]
    np.testing.assert_allclose(contexts, keys[0][chosen], atol=1e-6)

    first = layer(query, keys, return_details=True)
    again = layer(query, keys, return_details=True)
    best = int(np.argmax(to_numpy(first["probabilities"])[0, 0]))
    assert to_numpy(first["choices"]).ravel().tolist() == [best]
    np.testing.assert_array_equal(to_numpy(first["context"]), to_numpy(again["context"]))

    mask = np.array([[True, False, True, False]])
    drawn = layer(
        np.repeat(query, 500, 0),
        np.repeat(keys, 500, 0),
        value_mask=np.repeat(mask, 500, 0),
        training=True,
        return_details=True,
    )["choices"]
    assert set(to_numpy(drawn).ravel().tolist()) <= {0, 2}


def test_several_samples_and_keras_round_trip(tmp_path):
    query = keras.Input((None, 8))
    memory = keras.Input((None, 8))
    context = HardAttention(samples=3, seed=0)(query, memory)
    model = keras.Model([query, memory], keras.layers.Dense(2)(context))
    x = [np.random.default_rng(0).normal(size=(2, 3, 8)), np.ones((2, 5, 8))]
    path = tmp_path / "hard.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    np.testing.assert_allclose(
        restored.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6
    )
    (layer,) = [layer for layer in restored.layers if isinstance(layer, HardAttention)]
    assert (layer.samples, layer.estimator) == (3, "reinforce")


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="samples=0"):
        HardAttention(samples=0)
    with pytest.raises(ValueError, match="estimator='straight'"):
        HardAttention(estimator="straight")
    with pytest.raises(ValueError, match="temperature"):
        HardAttention(estimator="gumbel", temperature=0.0)
    with pytest.raises(ValueError, match="decay=1"):
        ReinforceBaseline(decay=1)


@pytest.mark.backends("tensorflow", "jax")  # XLA
@pytest.mark.parametrize("estimator", ["reinforce", "gumbel"])
def test_xla_and_mixed_precision_with_masks(estimator):
    rng = np.random.default_rng(0)
    query = rng.normal(size=(64, 3, 8)).astype("float32")
    keys = rng.normal(size=(64, 5, 8)).astype("float32")
    mask = np.arange(5)[None] < rng.integers(1, 6, (64, 1))  # 1 to 5 real keys
    keras.config.set_dtype_policy("mixed_float16")
    try:
        layer = HardAttention(estimator=estimator, seed=1)
        layer(query, keys)  # build

        def step(q, k, m):
            def loss():
                out = layer(q, k, value_mask=m, training=True, return_details=True)
                context = ops.cast(out["context"], "float32")
                return ops.sum(context**2) - ops.sum(out["log_probs"]), out

            grads, out = gradients(loss, layer.trainable_variables, has_aux=True)
            return out, grads

        out, grads = xla_compiled(step, [layer])(query, keys, mask)
        assert dtype_name(out["context"]) == "float16"
        assert dtype_name(out["log_probs"]) == "float32"
        assert all(np.isfinite(to_numpy(g, "float32")).all() for g in grads)
        chosen = to_numpy(out["choices"])[..., 0]  # (batch, queries)
        assert np.take_along_axis(mask, chosen, axis=1).all()  # never a padded key
        np.testing.assert_allclose(  # the context is the chosen key's value
            to_numpy(out["context"], "float32"),
            np.take_along_axis(keys, chosen[..., None], axis=1),
            atol=1e-2,
        )
    finally:
        keras.config.set_dtype_policy("float32")
