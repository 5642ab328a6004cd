"""Training utilities: schedules and callbacks shared by the examples and the CLI."""

from keras_attn.training.time_budget import TimeBudget

__all__ = ["TimeBudget"]
