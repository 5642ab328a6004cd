"""A learning-rate schedule over a time budget (and optionally a step budget)."""

import time

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int, check_positive_number, check_rate


@keras_attn_export("keras_attn.training.TimeBudget", serializable=False)
class TimeBudget(keras.callbacks.Callback):
    """Linear warm-up, then linear decay to zero when the budget is spent; then stop.

    BERT's schedule (warm-up, then linear decay) measured in progress through a
    budget rather than in steps: progress is the larger of the fraction of
    `seconds` spent since the first batch and, if given, the fraction of
    `total_steps` done. When it reaches 1 training stops, with the learning rate at
    zero, whichever budget ran out first. Budget-based schedules (Geiping &
    Goldstein, 2022, "Cramming") fit a fixed time on any machine, however fast it
    runs the steps. The rate is set on the optimizer before every batch, so the
    optimizer must be built with a float learning rate, not a schedule.

    Args:
        seconds: the time budget, from the first training batch; `None` for a
            step budget alone (then `total_steps` is required), which gives the
            same schedule and the same number of steps on any machine.
        peak_learning_rate: the rate at the end of the warm-up.
        warmup: fraction of the budget spent warming up linearly from zero.
        total_steps: optional step budget.

    Call arguments:
        None: a Keras callback; pass it to `fit(callbacks=[...])`.

    Example:

    >>> import keras, numpy as np
    >>> from keras_attn.training import TimeBudget
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile(keras.optimizers.AdamW(1e-3), "mse")
    >>> budget = TimeBudget(seconds=600, peak_learning_rate=1e-3, total_steps=10)
    >>> history = model.fit(np.zeros((64, 2)), np.zeros(64), batch_size=4, epochs=5,
    ...                     callbacks=[budget], verbose=0)
    >>> budget.steps, len(history.epoch)
    (10, 1)
    """

    def __init__(self, seconds, peak_learning_rate, warmup=0.1, total_steps=None):
        super().__init__()
        if seconds is None:
            if total_steps is None:
                raise ValueError(
                    "Expected `seconds` or `total_steps` (or both): a budget. "
                    "Received: seconds=None, total_steps=None"
                )
        else:
            check_positive_number("seconds", seconds)
        check_positive_number("peak_learning_rate", peak_learning_rate)
        check_rate("warmup", warmup)
        check_positive_int("total_steps", total_steps, allow_none=True)
        self.seconds, self.peak, self.warmup, self.total_steps = (
            seconds,
            peak_learning_rate,
            warmup,
            total_steps,
        )
        self.start = None
        self.steps = 0

    def progress(self):
        """Fraction of the budget spent, in [0, 1]."""
        spent = (
            0.0
            if self.start is None or self.seconds is None
            else (time.time() - self.start) / self.seconds
        )
        if self.total_steps:
            spent = max(spent, self.steps / self.total_steps)
        return min(spent, 1.0)

    def learning_rate(self, progress):
        if progress < self.warmup:
            return self.peak * progress / self.warmup
        return self.peak * (1.0 - progress) / (1.0 - self.warmup)

    def on_train_batch_begin(self, batch, logs=None):
        if self.start is None:
            self.start = time.time()
        progress = self.progress()
        if progress >= 1.0:
            self.model.stop_training = True
        # A tiny floor keeps the first step (progress 0) from being a no-op update.
        self.model.optimizer.learning_rate = max(self.learning_rate(progress), self.peak * 1e-3)

    def on_train_batch_end(self, batch, logs=None):
        self.steps += 1
        if self.progress() >= 1.0:
            self.model.stop_training = True


@keras_attn_export("keras_attn.training.BudgetFlags", serializable=False)
class BudgetFlags:
    """`--minutes` and `--steps` on a script's argument parser, read back as `TimeBudget`'s seconds.

    `--minutes` alone (or neither: `default_minutes`) is a wall-clock budget;
    `--steps N` alone a step budget, the same run on any machine; both, whichever
    ends first. Non-positive values stop the script at once through
    `parser.error`, naming the flags.

    Args:
        parser: an `argparse.ArgumentParser` to add the two flags to.
        default_minutes: the time budget when neither flag is given.

    Call arguments:
        None: not callable; after `parser.parse_args()`, `seconds(args)` gives
            the `seconds` argument of `TimeBudget` (`total_steps` is `args.steps`).

    Example:

    >>> import argparse
    >>> from keras_attn.training import BudgetFlags
    >>> parser = argparse.ArgumentParser()
    >>> flags = BudgetFlags(parser, default_minutes=10)
    >>> argvs = ([], ["--minutes", "2"], ["--steps", "500"])
    >>> [flags.seconds(parser.parse_args(argv)) for argv in argvs]
    [600, 120.0, None]
    """

    def __init__(self, parser, default_minutes):
        check_positive_number("default_minutes", default_minutes)
        self.parser, self.default_minutes = parser, default_minutes
        parser.add_argument(
            "--minutes",
            type=float,
            default=None,
            help=f"training time budget (default {default_minutes}; none when --steps is given "
            f"alone)",
        )
        parser.add_argument(
            "--steps",
            type=int,
            default=None,
            help="step budget: warm-up, decay and stop by steps, the same run on any machine "
            "(with --minutes too, whichever ends first)",
        )

    def seconds(self, args):
        """The time budget in seconds for `TimeBudget`, or `None` for `--steps` alone."""
        if (args.steps is not None and args.steps < 1) or (
            args.minutes is not None and args.minutes <= 0
        ):
            self.parser.error(
                f"--steps and --minutes must be positive. Received: --steps {args.steps}, "
                f"--minutes {args.minutes}"
            )
        if args.minutes is None:
            return None if args.steps else self.default_minutes * 60
        return args.minutes * 60
