"""TimeBudget: warm-up then linear decay over the budget, stops when spent; BudgetFlags."""

import argparse

import keras
import numpy as np
import pytest

from keras_attn.training import BudgetFlags, TimeBudget


def _fit(budget, epochs=3):
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile(keras.optimizers.SGD(0.1), "mse")
    rates = []
    record = keras.callbacks.LambdaCallback(
        on_train_batch_begin=lambda batch, logs: rates.append(float(model.optimizer.learning_rate))
    )
    model.fit(
        np.ones((40, 2)),
        np.ones(40),
        batch_size=1,
        epochs=epochs,
        callbacks=[budget, record],
        verbose=0,
    )
    return rates


def test_step_budget_shapes_the_rate_and_stops():
    budget = TimeBudget(seconds=3600, peak_learning_rate=1.0, warmup=0.25, total_steps=20)
    rates = _fit(budget)
    assert budget.steps == 20 and len(rates) == 20
    np.testing.assert_allclose(
        rates[1:6], [0.2, 0.4, 0.6, 0.8, 1.0], atol=0.01
    )  # warm-up over 5 steps
    np.testing.assert_allclose(rates[10], 1.0 - 5 / 15, atol=0.01)  # then linear decay to zero
    assert rates[0] == pytest.approx(1e-3) and rates[-1] == pytest.approx(1 / 15, abs=0.01)
    # No time budget at all: the schedule is a function of the step alone.
    steps_only = TimeBudget(seconds=None, peak_learning_rate=1.0, warmup=0.25, total_steps=20)
    assert _fit(steps_only) == rates and steps_only.steps == 20


def test_time_budget_stops_training():
    budget = TimeBudget(seconds=0.05, peak_learning_rate=1.0, warmup=0.0)
    _fit(budget, epochs=1000)
    assert budget.progress() == 1.0 and budget.steps < 1000 * 40


def test_bad_arguments():
    with pytest.raises(ValueError, match="seconds=0"):
        TimeBudget(seconds=0, peak_learning_rate=1.0)
    with pytest.raises(ValueError, match="warmup=1.0"):
        TimeBudget(seconds=1, peak_learning_rate=1.0, warmup=1.0)
    with pytest.raises(ValueError, match="seconds=None, total_steps=None"):
        TimeBudget(seconds=None, peak_learning_rate=1.0)
    with pytest.raises(ValueError, match="total_steps=-3"):
        TimeBudget(seconds=1, peak_learning_rate=1.0, total_steps=-3)


def test_budget_flags(capsys):
    parser = argparse.ArgumentParser()
    flags = BudgetFlags(parser, default_minutes=5)
    assert flags.seconds(parser.parse_args([])) == 300
    assert flags.seconds(parser.parse_args(["--minutes", "0.5", "--steps", "9"])) == 30.0
    assert flags.seconds(parser.parse_args(["--steps", "9"])) is None
    for argv in (["--steps", "0"], ["--minutes", "-1"]):
        with pytest.raises(SystemExit) as exit:
            flags.seconds(parser.parse_args(argv))
        assert (
            exit.value.code == 2
            and "--steps and --minutes must be positive" in capsys.readouterr().err
        )
    with pytest.raises(ValueError, match="default_minutes=0"):
        BudgetFlags(argparse.ArgumentParser(), default_minutes=0)
