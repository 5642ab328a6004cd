"""The recipes behind `keras-attn pretrain` / `finetune`: data, model and artefacts of each task."""

from keras_attn.training.tasks.distillation import DistillationTask
from keras_attn.training.tasks.language_model import LanguageModelTask
from keras_attn.training.tasks.pretraining import BertPretrainingTask
from keras_attn.training.tasks.text_classification import TextClassificationTask
from keras_attn.training.tasks.training_task import TrainingTask
from keras_attn.training.tasks.translation import Seq2SeqTask

TASKS = {
    "pretrain": BertPretrainingTask,
    "finetune": TextClassificationTask,
    "distill": DistillationTask,
    "lm": LanguageModelTask,
    "seq2seq": Seq2SeqTask,
}

__all__ = [
    "BertPretrainingTask",
    "DistillationTask",
    "LanguageModelTask",
    "Seq2SeqTask",
    "TASKS",
    "TrainingTask",
    "TextClassificationTask",
]
