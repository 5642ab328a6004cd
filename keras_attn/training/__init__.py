"""Training: configuration, strategies, optimizers, resumable checkpoints, TensorBoard, the loop."""

from keras_attn.training.checkpoints import RunCheckpoint, restore_latest
from keras_attn.training.config import TrainingConfig, load_config
from keras_attn.training.losses import LabelSmoothedCrossEntropy
from keras_attn.training.monitor import AttentionImages, TextSamples, TrainingMonitor, write_hparams
from keras_attn.training.optimizer import GlobalClipAdamW, build_optimizer
from keras_attn.training.schedules import TransformerSchedule, WarmupLinearDecay
from keras_attn.training.strategy import resolve_strategy
from keras_attn.training.time_budget import BudgetFlags, TimeBudget
from keras_attn.training.trainer import TrainingData, train

__all__ = [
    "AttentionImages",
    "BudgetFlags",
    "GlobalClipAdamW",
    "LabelSmoothedCrossEntropy",
    "RunCheckpoint",
    "TextSamples",
    "TimeBudget",
    "TrainingConfig",
    "TrainingData",
    "TrainingMonitor",
    "TransformerSchedule",
    "WarmupLinearDecay",
    "build_optimizer",
    "load_config",
    "resolve_strategy",
    "restore_latest",
    "train",
    "write_hparams",
]
