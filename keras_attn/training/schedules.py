"""Learning-rate schedules: BERT's warm-up and linear decay; the Transformer's inverse root."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int, check_positive_number


@keras_attn_export("keras_attn.training.WarmupLinearDecay")
class WarmupLinearDecay(keras.optimizers.schedules.LearningRateSchedule):
    """`peak * step / warmup_steps` while warming up, then linear decay to 0 at `total_steps`.

    "We use Adam with learning rate of 1e-4, ... learning rate warmup over the first
    10,000 steps, and linear decay of the learning rate" (Devlin et al., 2018,
    appendix A.2). A function of the optimizer's step count alone, so a run resumed
    from a checkpoint continues on exactly the same curve. Steps count from 1 (Keras's
    iterations from 0), so the first update is not at rate 0.

    Args:
        peak_learning_rate: the rate reached at the end of the warm-up.
        total_steps: the step at which the rate reaches 0.
        warmup_steps: steps of linear warm-up (0: start at the peak).

    Call arguments:
        step: the optimizer's iteration count (from 0).

    Example:

    >>> from keras_attn.training import WarmupLinearDecay
    >>> schedule = WarmupLinearDecay(1e-4, total_steps=100, warmup_steps=10)
    >>> [round(float(schedule(s)), 8) for s in (0, 9, 54, 99)]
    [1e-05, 0.0001, 5e-05, 0.0]
    """

    def __init__(self, peak_learning_rate, total_steps, warmup_steps=0):
        check_positive_number("peak_learning_rate", peak_learning_rate)
        check_positive_int("total_steps", total_steps)
        if (
            isinstance(warmup_steps, bool)
            or not isinstance(warmup_steps, int)
            or not 0 <= warmup_steps < total_steps
        ):
            raise ValueError(
                f"Expected `warmup_steps` in [0, total_steps={total_steps}). "
                f"Received: warmup_steps={warmup_steps!r}"
            )
        self.peak_learning_rate = peak_learning_rate
        self.total_steps = total_steps
        self.warmup_steps = warmup_steps

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        warmup = step / max(self.warmup_steps, 1)
        decay = (self.total_steps - step) / (self.total_steps - self.warmup_steps)
        rate = ops.where(step <= self.warmup_steps, warmup, decay)
        return self.peak_learning_rate * ops.clip(rate, 0.0, 1.0)

    def get_config(self):
        return {
            "peak_learning_rate": self.peak_learning_rate,
            "total_steps": self.total_steps,
            "warmup_steps": self.warmup_steps,
        }


@keras_attn_export("keras_attn.training.TransformerSchedule")
class TransformerSchedule(keras.optimizers.schedules.LearningRateSchedule):
    """`lrate = scale * d_model^-0.5 * min(step^-0.5, step * warmup_steps^-1.5)`.

    "This corresponds to increasing the learning rate linearly for the first
    warmup_steps training steps, and decreasing it thereafter proportionally to the
    inverse square root of the step number. We used warmup_steps = 4000"
    (Vaswani et al., 2017, section 5.3). Steps count from 1 (Keras's optimizer
    iterations from 0), so the first update is not at rate 0. The peak,
    `scale * (d_model * warmup_steps)^-0.5`, is reached at `warmup_steps`.

    Args:
        d_model: model width.
        warmup_steps: steps of linear warm-up (paper: 4000).
        scale: a constant factor (paper: 1).

    Call arguments:
        step: the optimizer's iteration count (from 0).

    Example:

    >>> from keras_attn.training import TransformerSchedule
    >>> schedule = TransformerSchedule(d_model=512, warmup_steps=4000)
    >>> round(float(schedule(3999)), 7)  # the peak: (512 * 4000) ** -0.5
    0.0006988
    """

    def __init__(self, d_model, warmup_steps=4000, scale=1.0):
        check_positive_int("d_model", d_model)
        check_positive_int("warmup_steps", warmup_steps)
        check_positive_number("scale", scale)
        self.d_model = d_model
        self.warmup_steps = warmup_steps
        self.scale = scale

    def __call__(self, step):
        step = ops.cast(step, "float32") + 1.0
        warmup = ops.cast(self.warmup_steps, "float32")
        return self.scale * self.d_model**-0.5 * ops.minimum(step**-0.5, step * warmup**-1.5)

    def get_config(self):
        return {"d_model": self.d_model, "warmup_steps": self.warmup_steps, "scale": self.scale}
