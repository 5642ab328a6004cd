"""`keras-attn distill`: a shallower student of a fine-tuned classifier run, taught by it."""

import json
import pathlib
import shutil

import keras

from keras_attn.data import WordPieceTokenizer
from keras_attn.models import Distiller, registry, student_from_teacher
from keras_attn.training.checkpoints import save_trained_model
from keras_attn.training.config import ConfigError, TrainingConfig, load_config
from keras_attn.training.task_configs import SECTIONS, DistillModelConfig
from keras_attn.training.tasks.text_classification import TextClassificationTask, read_split

# The teacher's configuration, kept in the student's run: its data and tokenizer settings
# are the student's (`keras-attn export` reads them there).
TEACHER_CONFIG = "teacher_config.yaml"


def teacher_run(folder):
    """`(folder, configuration)` of a `keras-attn finetune` classification run."""
    folder = pathlib.Path(folder)
    needed = ("config.yaml", "model.keras", "vocab.txt", "labels.json")
    missing = [name for name in needed if not (folder / name).is_file()]
    if missing:
        raise ConfigError(
            "model.teacher",
            f"a finished `keras-attn finetune` run ({', '.join(needed)}); "
            f"{str(folder)!r} lacks {', '.join(missing)}",
        )
    sections = {**SECTIONS["finetune"], "training": TrainingConfig}
    config = load_config(sections, str(folder / "config.yaml"))
    if config.data.task != "classification":
        raise ConfigError(
            "model.teacher", f"a classification run; {str(folder)!r} is a {config.data.task} run"
        )
    return folder, config


class DistillationTask(TextClassificationTask):
    """Distils a fine-tuned `BertClassifier` run into a student of `student_layers`
    layers (initialised from every k-th teacher layer) on the teacher's data and split;
    the run's `model.keras` is the student."""

    sections = {"model": DistillModelConfig}

    def prepare(self, run):
        self.teacher_dir, teacher = teacher_run(run.model.teacher)
        self.task = "classification"
        self.family = registry.family("bert")  # the teacher is a BertClassifier (build_model)
        self.train_data, self.validation_data = read_split(teacher.data)
        self.label_names = list(self.train_data.label_names)
        taught = json.loads((self.teacher_dir / "labels.json").read_text(encoding="utf-8"))
        if taught != self.label_names:
            raise ConfigError(
                "model.teacher",
                f"a run whose labels are its data's {self.label_names}; labels.json has {taught}",
            )
        self.tokenizer = WordPieceTokenizer(
            self.teacher_dir / "vocab.txt",
            lowercase=teacher.model.lowercase,
            sequence_length=teacher.model.sequence_length,
        )
        return self.training_data()

    def build_model(self, run):
        model = run.model
        teacher = keras.saving.load_model(self.teacher_dir / "model.keras", compile=False)
        try:
            Distiller.check_classifier_teacher(teacher)
        except TypeError:
            raise ConfigError(
                "model.teacher", f"a BertClassifier run; its model is a {type(teacher).__name__}"
            ) from None
        if teacher.num_classes != len(self.label_names):
            raise ConfigError(
                "model.teacher",
                f"a model of the data's {len(self.label_names)} labels; it has "
                f"{teacher.num_classes} classes",
            )
        if not 1 <= model.student_layers <= teacher.backbone.num_layers:
            raise ConfigError(
                "model.student_layers",
                f"1 to the teacher's {teacher.backbone.num_layers} layers; got "
                f"{model.student_layers}",
            )
        student = student_from_teacher(teacher, model.student_layers)
        self.backbone = student.backbone
        return Distiller(
            teacher,
            student,
            temperature=model.temperature,
            task_weight=model.task_weight,
            output_weight=model.output_weight,
            hidden_weight=model.hidden_weight,
            attention_weight=model.attention_weight,
        )

    def save(self, model, output_dir):
        output_dir = pathlib.Path(output_dir)
        save_trained_model(model.student, output_dir / "model.keras")
        for name in ("vocab.txt", "labels.json"):
            shutil.copyfile(self.teacher_dir / name, output_dir / name)
        shutil.copyfile(self.teacher_dir / "config.yaml", output_dir / TEACHER_CONFIG)
