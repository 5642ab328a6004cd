"""The learning-rate schedule of "Attention Is All You Need"."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.layer_utils import check_positive_int, check_positive_number


@keras_attn_export("keras_attn.models.TransformerSchedule")
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

    >>> from keras_attn.models import TransformerSchedule
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
