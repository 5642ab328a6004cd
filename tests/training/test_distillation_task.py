"""`keras-attn distill`: a fine-tuned classifier run teaches a shallower student on its
own data and split; the student run resumes, is a BertClassifier in `model.keras`, and
exports and serves like any fine-tuned run; bad teachers and depths are named."""

import json

import keras
import numpy as np
import pytest

from keras_attn.cli.main import main as keras_attn
from keras_attn.cli.user_errors import CommandError
from keras_attn.models import BertClassifier
from tests.training.runs import backbone_folder, write_reviews

# One worker runs this module: its module fixtures are made once (`--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("test_distillation_task")

COMMON = [
    "--batch-size",
    "8",
    "--steps-per-epoch",
    "6",
    "--checkpoint-every",
    "6",
    "--attention-every",
    "0",
    "--histogram-every",
    "0",
    "--validation-steps",
    "2",
    "--verbose",
    "0",
]


@pytest.fixture(scope="module")
def teacher(tmp_path_factory):
    folder = tmp_path_factory.mktemp("teacher")
    reviews = write_reviews(folder / "reviews.csv", count=120)
    flags = ["--backbone", str(backbone_folder(folder / "backbone")), "--train", str(reviews)]
    flags += ["--text-column", "review", "--label-column", "sentiment", "--sequence-length", "16"]
    flags += ["--steps", "12", "--learning-rate", "0.003", "--output", str(folder / "run")]
    keras_attn(["finetune", *flags, *COMMON])
    return folder / "run"


def _distill(teacher, output, *flags):
    args = ["distill", "--teacher", str(teacher), "--output", str(output), "--student-layers", "1"]
    return keras_attn([*args, *flags, *COMMON])


@pytest.mark.slow
def test_distilled_student_resumes_and_exports(teacher, tmp_path):
    run = tmp_path / "student"
    weights = ["--hidden-weight", "1.0", "--attention-weight", "1.0"]
    first = _distill(teacher, run, "--steps", "6", *weights)
    assert first.steps == 6
    result = _distill(teacher, run, "--steps", "12", *weights)
    assert (result.steps, result.resumed_from) == (12, 6)
    assert {"accuracy", "output_loss", "hidden_loss", "attention_loss"} <= set(result.history)
    assert "val_accuracy" in result.metrics
    student = keras.saving.load_model(run / "model.keras")
    assert isinstance(student, BertClassifier) and student.backbone.num_layers == 1
    taught = keras.saving.load_model(teacher / "model.keras")
    # The student's one layer started as the teacher's last; embeddings were copied and
    # trained on, the teacher's weights were not touched.
    assert taught.backbone.num_layers == 2
    assert json.loads((run / "labels.json").read_text()) == json.loads(
        (teacher / "labels.json").read_text()
    )
    assert (run / "teacher_config.yaml").read_text() == (teacher / "config.yaml").read_text()

    from keras_attn.cli.export import export_run
    from keras_attn.export import load_saved_model

    folder = export_run(run, "student", str(tmp_path / "saved_models"), None, None, "greedy", 4)
    served = load_saved_model(folder).signatures["serving_default"]
    import tensorflow as tf

    outputs = served(text=tf.constant(["the film was great .", "awful plot ."]))
    probabilities = outputs["probabilities"].numpy()
    assert probabilities.shape == (2, 2)
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, atol=1e-5)


@pytest.mark.slow  # the module's teacher fixture trains a run
def test_bad_teacher_and_depth_are_named(teacher, tmp_path, capsys):
    with pytest.raises(CommandError, match="model.teacher.*lacks config.yaml, model.keras"):
        _distill(tmp_path, tmp_path / "a", "--steps", "2")
    with pytest.raises(CommandError, match="model.student_layers.*teacher's 2 layers; got 3"):
        _distill(teacher, tmp_path / "b", "--steps", "2", "--student-layers", "3")
    with pytest.raises(SystemExit):  # refused with the options, before any data is read
        _distill(teacher, tmp_path / "c", "--hidden-weight", "-1")
    assert "model.hidden_weight" in capsys.readouterr().err
