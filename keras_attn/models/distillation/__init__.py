"""Knowledge distillation: a smaller student trained on a teacher's soft targets."""

from keras_attn.models.distillation.distiller import Distiller
from keras_attn.models.distillation.student import student_from_teacher

__all__ = ["Distiller", "student_from_teacher"]
