"""Schedules and the optimizer against their formulas and against Keras's own clipping."""

import keras
import numpy as np
import pytest

from keras_attn.training import GlobalClipAdamW, TrainingConfig, WarmupLinearDecay, build_optimizer


def test_warmup_linear_decay_is_the_bert_formula():
    schedule = WarmupLinearDecay(2e-3, total_steps=1000, warmup_steps=100)
    for iteration in (0, 49, 99, 100, 500, 998, 999, 1500):
        step = iteration + 1
        expected = 2e-3 * (step / 100 if step <= 100 else max(0.0, (1000 - step) / 900))
        assert float(schedule(iteration)) == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize("kwargs", [dict(total_steps=10, warmup_steps=10), dict(total_steps=0)])
def test_warmup_linear_decay_rejects_bad_steps(kwargs):
    with pytest.raises(ValueError, match="steps"):
        WarmupLinearDecay(1e-3, **kwargs)


def test_global_clip_adamw_equals_keras_global_clipnorm_on_one_device():
    rng = np.random.default_rng(0)
    init = [rng.normal(size=(3, 4)).astype("float32"), rng.normal(size=(4,)).astype("float32")]
    grads = [
        rng.normal(size=(3, 4)).astype("float32") * 10,
        rng.normal(size=(4,)).astype("float32") * 10,
    ]
    results = []
    for optimizer in (
        GlobalClipAdamW(learning_rate=0.01, weight_decay=0.01, clip_global_norm=1.0),
        keras.optimizers.AdamW(learning_rate=0.01, weight_decay=0.01, global_clipnorm=1.0),
    ):
        variables = [keras.Variable(v) for v in init]
        for _ in range(3):
            optimizer.apply(grads, variables)
        results.append([v.numpy() for v in variables])
    for ours, theirs in zip(*results, strict=True):
        np.testing.assert_allclose(ours, theirs, atol=1e-6)


def test_global_clip_adamw_refuses_keras_per_replica_clipping():
    with pytest.raises(ValueError, match="clip_global_norm"):
        GlobalClipAdamW(global_clipnorm=1.0)


def test_build_optimizer_schedules():
    linear = build_optimizer(TrainingConfig(steps=100, learning_rate=1e-3, warmup=0.1))
    assert isinstance(
        linear.learning_rate_schedule
        if hasattr(linear, "learning_rate_schedule")
        else linear._learning_rate,
        WarmupLinearDecay,
    )
    transformer = build_optimizer(
        TrainingConfig(steps=100, learning_rate=1e-3, warmup=0.1, schedule="transformer"),
        hidden_dim=256,
    )
    peak = float(transformer._learning_rate(9))  # step 10 = the end of the warm-up
    assert peak == pytest.approx(1e-3, rel=1e-5) and transformer.beta_2 == 0.98
    constant = build_optimizer(
        TrainingConfig(schedule="constant", learning_rate=5e-4, clipnorm=None)
    )
    assert (
        float(constant.learning_rate) == pytest.approx(5e-4) and constant.clip_global_norm is None
    )
