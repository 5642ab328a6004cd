"""The optimizer a `TrainingConfig` asks for: AdamW on a step-based schedule."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.training.schedules import TransformerSchedule, WarmupLinearDecay

# Variable names (not paths) that never get weight decay: LayerNorm's scale and
# offset, and every bias, as in BERT's `AdamWeightDecayOptimizer`.
NO_WEIGHT_DECAY = ["gamma", "beta", "bias"]


@keras_attn_export("keras_attn.training.GlobalClipAdamW")
class GlobalClipAdamW(keras.optimizers.AdamW):
    """AdamW that clips the gradient's global norm after the replicas' gradients are summed.

    Keras's `global_clipnorm` clips inside each replica, before the all-reduce
    (Keras 3.15, `BaseOptimizer.apply`), so under `MirroredStrategy` or multi-worker
    training each replica scales its partial gradient by its own norm and the
    update differs from one-device training. Here the clipping happens on the
    summed gradient, the one the update uses, so every strategy takes the same step.

    Args:
        clip_global_norm: the largest global gradient norm (`None`: no clipping).
        **kwargs: `keras.optimizers.AdamW` arguments (not `global_clipnorm`).

    Call arguments:
        None: an optimizer; `apply(grads, variables)` / `compile(optimizer=...)`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.training import GlobalClipAdamW
    >>> optimizer = GlobalClipAdamW(learning_rate=0.1, clip_global_norm=1.0)
    >>> variable = __import__("keras").Variable(np.zeros(2, "float32"))
    >>> optimizer.apply([np.array([30.0, 40.0], "float32")], [variable])
    >>> [round(float(v), 3) for v in variable.numpy()]  # Adam's first step is lr * sign
    [-0.1, -0.1]
    """

    def __init__(self, clip_global_norm=None, **kwargs):
        if kwargs.get("global_clipnorm") or kwargs.get("clipnorm"):
            raise ValueError(
                "Pass `clip_global_norm` (clipped after the all-reduce), not "
                "`global_clipnorm`/`clipnorm` (clipped per replica)."
            )
        if clip_global_norm is not None and not clip_global_norm > 0:
            raise ValueError(
                "Expected `clip_global_norm` > 0 or None. Received: "
                f"clip_global_norm={clip_global_norm!r}"
            )
        super().__init__(**kwargs)
        self.clip_global_norm = clip_global_norm

    def _all_reduce_sum_gradients(self, grads_and_vars):
        grads_and_vars = list(super()._all_reduce_sum_gradients(grads_and_vars))
        if not self.clip_global_norm:
            return grads_and_vars
        grads = [g for g, _ in grads_and_vars if g is not None]
        norm = ops.sqrt(sum(ops.sum(ops.square(ops.cast(g, "float32"))) for g in grads))
        scale = ops.minimum(1.0, self.clip_global_norm / ops.maximum(norm, 1e-12))
        return [(g if g is None else g * ops.cast(scale, g.dtype), v) for g, v in grads_and_vars]

    def get_config(self):
        config = super().get_config()
        config["clip_global_norm"] = self.clip_global_norm
        return config


@keras_attn_export("keras_attn.training.build_optimizer")
def build_optimizer(config, hidden_dim=None):
    """`GlobalClipAdamW` with the schedule, weight decay and clipping of `config`.

    `schedule="linear"`: BERT's warm-up then linear decay (β₂ 0.999, ε 1e-6);
    `"transformer"`: Vaswani et al.'s inverse-square-root schedule scaled so its
    peak is `learning_rate` (β₂ 0.98, ε 1e-9, the paper's); `"constant"`. Weight
    decay skips LayerNorm parameters and biases. The schedule depends on the step
    count only, so a resumed run follows the same rates.

    Args:
        config: a `TrainingConfig`.
        hidden_dim: the model width (the Transformer schedule's `d_model`).

    Returns:
        A `GlobalClipAdamW`.

    Example:

    >>> from keras_attn.training import TrainingConfig, build_optimizer
    >>> optimizer = build_optimizer(TrainingConfig(steps=100, learning_rate=1e-3, warmup=0.1))
    >>> round(float(optimizer.learning_rate), 6)  # step 1 of a 10-step warm-up
    0.0001
    """
    warmup_steps = int(round(config.warmup * config.steps))
    beta_2, epsilon = 0.999, 1e-6
    if config.schedule == "linear":
        learning_rate = WarmupLinearDecay(config.learning_rate, config.steps, warmup_steps)
    elif config.schedule == "transformer":
        warmup_steps = max(warmup_steps, 1)
        d_model = hidden_dim or 512
        scale = config.learning_rate * (d_model * warmup_steps) ** 0.5  # peak = learning_rate
        learning_rate = TransformerSchedule(d_model, warmup_steps, scale=scale)
        beta_2, epsilon = 0.98, 1e-9
    else:
        learning_rate = config.learning_rate
    optimizer = GlobalClipAdamW(
        learning_rate=learning_rate,
        weight_decay=config.weight_decay,
        beta_1=0.9,
        beta_2=beta_2,
        epsilon=epsilon,
        clip_global_norm=config.clipnorm,
    )
    optimizer.exclude_from_weight_decay(var_names=NO_WEIGHT_DECAY)
    return optimizer
