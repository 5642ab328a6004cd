"""Training: configuration, strategies, optimizers, resumable checkpoints, TensorBoard, the loop.

Names load when first used: the configuration (`load_config`, `TrainingConfig`) and
`keras-attn COMMAND --help` need no TensorFlow; `train` and the callbacks bring it.
"""

import importlib

_WHERE = {
    "AttentionImages": "keras_attn.training.monitor",
    "BudgetFlags": "keras_attn.training.time_budget",
    "GlobalClipAdamW": "keras_attn.training.optimizer",
    "LabelSmoothedCrossEntropy": "keras_attn.models.losses",
    "RunCheckpoint": "keras_attn.training.checkpoints",
    "RunProgress": "keras_attn.training.progress",
    "TextSamples": "keras_attn.training.monitor",
    "TimeBudget": "keras_attn.training.time_budget",
    "TrainingConfig": "keras_attn.training.config",
    "TrainingData": "keras_attn.training.trainer",
    "TrainingMonitor": "keras_attn.training.monitor",
    "TransformerSchedule": "keras_attn.training.schedules",
    "WarmupLinearDecay": "keras_attn.training.schedules",
    "WeightHistograms": "keras_attn.training.monitor",
    "build_optimizer": "keras_attn.training.optimizer",
    "load_config": "keras_attn.training.config",
    "resolve_data_parallel": "keras_attn.training.strategy",
    "resolve_strategy": "keras_attn.training.strategy",
    "restore_latest": "keras_attn.training.checkpoints",
    "train": "keras_attn.training.trainer",
    "write_hparams": "keras_attn.training.monitor",
}

__all__ = sorted(_WHERE)


def __getattr__(name):
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module 'keras_attn.training' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_WHERE))
