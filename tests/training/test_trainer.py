"""The training loop end to end: fine-tuning from a user's CSV, mixed precision, callbacks."""

import json

import keras
import numpy as np
import pytest

from keras_attn.models import BertBackbone
from keras_attn.training import (
    AttentionImages,
    TrainingConfig,
    TrainingData,
    TrainingMonitor,
    load_config,
    train,
    write_hparams,
)
from keras_attn.training.tasks import (
    TASKS,
    BertPretrainingTask,
    TextClassificationTask,
    TrainingTask,
)
from tests.training.runs import (
    backbone_folder,
    pretrain_args,
    run_keras_attn,
    write_corpus,
    write_reviews,
)


@pytest.mark.slow
def test_finetune_cli_learns_labels_from_a_users_csv(tmp_path):
    backbone = backbone_folder(tmp_path / "backbone")
    output = run_keras_attn(
        [
            "finetune",
            "--backbone",
            str(backbone),
            "--train",
            str(write_reviews(tmp_path / "train.csv")),
            "--validation",
            str(write_reviews(tmp_path / "dev.csv", count=60, seed=1)),
            "--text-column",
            "review",
            "--label-column",
            "sentiment",
            "--sequence-length",
            "16",
            "--batch-size",
            "16",
            "--steps",
            "90",
            "--steps-per-epoch",
            "30",
            "--learning-rate",
            "0.002",
            "--attention-every",
            "0",
            "--histogram-every",
            "0",
            "--output",
            str(tmp_path / "run"),
            "--verbose",
            "0",
        ]
    )
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["val_accuracy"] > 0.9, output[-2000:]
    assert json.loads((tmp_path / "run" / "labels.json").read_text()) == ["neg", "pos"]
    assert "left out 1 (empty text: 1)" in output
    model = keras.saving.load_model(tmp_path / "run" / "model.keras")
    assert model.num_classes == 2
    # Then to TF Serving's layout and back, on raw text, through the CLI (in this process).
    from keras_attn.cli.main import main as keras_attn

    exported = keras_attn(
        ["export", str(tmp_path / "run"), "--name", "reviews", "--base", str(tmp_path / "sm")]
    )
    assert exported == tmp_path / "sm" / "reviews" / "1"
    assert (exported / "saved_model.pb").exists()
    outputs = keras_attn(
        [
            "predict",
            str(tmp_path / "sm" / "reviews"),
            "--json",
            "--text",
            "the film was great .",
            "--text",
            "awful plot .",
        ]
    )
    assert [label.decode() for label in outputs["labels"]] == ["pos", "neg"]
    assert len(outputs["probabilities"]) == 2


@pytest.mark.parametrize("precision", ["mixed_float16", "mixed_bfloat16"])
@pytest.mark.slow
def test_mixed_precision_trains_and_checkpoints(tmp_path, precision):
    corpus = write_corpus(tmp_path / "corpus.txt", documents=12)
    overrides = {
        "data.corpus": str(corpus),
        "data.vocabulary_size": 100,
        "data.held_out_documents": 2,
        "model.sequence_length": 32,
        "training.batch_size": 8,
        "training.steps": 4,
        "training.steps_per_epoch": 2,
        "training.checkpoint_every": 2,
        "training.attention_every": 0,
        "training.histogram_every": 0,
        "training.precision": precision,
        "training.validation_steps": 1,
    }
    task = BertPretrainingTask()
    run = load_config({**task.sections, "training": TrainingConfig}, overrides=overrides)
    result = train(task, run, tmp_path / "run", verbose=0)
    keras.config.set_dtype_policy("float32")
    assert result.steps == 4 and np.isfinite(result.metrics["val_loss"])
    assert result.model.backbone.dtype_policy.name == precision
    assert result.model(result.model.input)["mlm_logits"].dtype == "float32"  # logits stay float32
    if precision == "mixed_float16":  # the loss scale is part of the saved state
        assert "loss_scale" in str([v.path for v in result.model.optimizer.variables])
    assert (tmp_path / "run" / "checkpoints" / "ckpt-00000004.npz").exists()


@pytest.mark.slow
def test_sentence_order_is_learned_where_the_order_can_be_seen(tmp_path):
    """ALBERT's sentence-order objective through `keras-attn pretrain`, on documents whose
    sentences each open with their place in the document: a sampler, head or label that
    lost the order would leave held-out SOP at chance (it is on the KJV at 6,000 steps of
    a tiny model: docs/results.md)."""
    import random

    rng = random.Random(0)
    places = ["ash", "bay", "cod", "dew", "elm", "fig", "gum", "hop", "ivy", "jam"]
    lines = []
    for _ in range(60):
        lines += [
            f"{place} {rng.choice(['kit', 'log'])} {rng.choice(['kit', 'log'])} ."
            for place in places
        ]
        lines.append("")
    (tmp_path / "corpus.txt").write_text("\n".join(lines), encoding="utf-8")
    run_keras_attn(
        pretrain_args(
            tmp_path / "corpus.txt", tmp_path / "run", objective="sop", preset="tiny",
            held_out_documents=8, batch_size=32, steps=300, steps_per_epoch=100,
            checkpoint_every=100, validation_steps=3, dropout=0, learning_rate=1e-3,
            jit_compile="false",
        )
    )  # fmt: skip
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["val_sop_logits_accuracy"] >= 0.85, metrics


@pytest.mark.slow
def test_a_finished_run_is_not_silently_retrained(tmp_path, capsys):
    corpus = write_corpus(tmp_path / "corpus.txt", documents=12)
    args = [
        "--corpus",
        str(corpus),
        "--vocabulary-size",
        "100",
        "--held-out-documents",
        "2",
        "--sequence-length",
        "32",
        "--batch-size",
        "8",
        "--steps",
        "2",
        "--steps-per-epoch",
        "2",
        "--attention-every",
        "0",
        "--histogram-every",
        "0",
        "--validation-steps",
        "1",
        "--output",
        str(tmp_path / "run"),
        "--verbose",
        "0",
    ]
    run_keras_attn(["pretrain", *args])
    from keras_attn.cli.main import main as keras_attn

    with pytest.raises(SystemExit) as stopped:
        keras_attn(["pretrain", *args])
    output = capsys.readouterr().err
    assert stopped.value.code == 2 and "training.steps" in output and "already done" in output


def test_monitor_callbacks_write_directly(tmp_path):
    backbone = BertBackbone.from_size("tiny", vocabulary_size=10)
    probe = {
        "token_ids": np.array([[2, 5, 6, 3, 0]]),
        "segment_ids": np.zeros((1, 5), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 0]]),
    }
    images = AttentionImages(tmp_path, backbone, probe, ["[CLS]", "a", "b", "[SEP]"], every=1)
    assert images.write(step=3) == 2
    with pytest.raises(ValueError, match="one token string per real probe token"):
        AttentionImages(tmp_path, backbone, probe, ["[CLS]", "a"])
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("adam", "mse")
    monitor = TrainingMonitor(tmp_path, tokens_per_step=2, every=1)
    model.fit(np.ones((8, 2)), np.ones(8), batch_size=2, verbose=0, callbacks=[monitor])
    assert write_hparams(tmp_path, {"model": {"preset": "tiny"}}) == {"model.preset": "tiny"}
    assert list((tmp_path / "train").iterdir()) and list((tmp_path / "attention").iterdir())


def test_text_classification_task_refuses_a_missing_file(tmp_path):
    task = TextClassificationTask()
    run = load_config(
        {**task.sections, "training": TrainingConfig},
        overrides={"data.train": str(tmp_path / "missing.csv")},
    )
    with pytest.raises(ValueError, match="data.train"):
        task.prepare(run)


class _MeanTask:
    """A user's own task: learn y = mean(x) with a dense layer."""

    sections, monitor = {}, ("val_loss", "min")

    def prepare(self, run):
        import tensorflow as tf

        x = tf.random.stateless_uniform((64, 4), seed=[0, 0])
        example = lambda i, seed: (x[i], tf.reduce_mean(x[i]))  # noqa: E731
        return TrainingData(64, example, validation_examples=16, validation_fn=example)

    def build_model(self, run):
        return keras.Sequential(
            [keras.Input((4,)), keras.layers.Dropout(0.2), keras.layers.Dense(1)]
        )

    def compile(self, model, optimizer, run):
        model.compile(optimizer, "mse")

    def probe(self):
        return None

    def save(self, model, output_dir):
        model.save(output_dir / "model.keras")


def test_train_a_custom_task_and_extend_it_later(tmp_path):
    overrides = {
        "training.steps": 12,
        "training.batch_size": 8,
        "training.steps_per_epoch": 5,
        "training.checkpoint_every": 5,
        "training.learning_rate": 0.01,
        "training.attention_every": 0,
    }
    run = load_config({"training": TrainingConfig}, overrides=overrides)
    whole = train(_MeanTask(), run, tmp_path / "whole", verbose=0)
    # The same run in two goes: 7 steps, then the command again with steps=12 resumes at step 7.
    train(
        _MeanTask(),
        load_config({"training": TrainingConfig}, overrides={**overrides, "training.steps": 7}),
        tmp_path / "parts",
        verbose=0,
    )
    parts = train(_MeanTask(), run, tmp_path / "parts", verbose=0)
    assert (whole.steps, parts.steps, parts.resumed_from) == (12, 12, 7)
    assert (
        sorted(whole.history) == ["loss", "val_loss"]
        and (tmp_path / "whole" / "checkpoints" / "best.npz").exists()
    )


def test_task_base_supplies_the_shared_defaults_and_names_what_is_missing(tmp_path):
    class Half(TrainingTask):  # a recipe that writes only what is its own
        def build_model(self, run):
            return keras.Sequential([keras.Input((4,)), keras.layers.Dense(1)])

    run = load_config({"training": TrainingConfig}, overrides={"training.jit_compile": False})
    task = Half()
    model = task.build_model(run)
    task.compile(model, keras.optimizers.SGD(), run)
    assert (model.jit_compile, task.identity(), task.probe(), task.monitor) == (
        False,
        {},
        None,
        ("val_loss", "min"),
    )
    for method, args in (("prepare", (run,)), ("save", (model, tmp_path))):
        with pytest.raises(NotImplementedError, match=f"Half.{method}"):
            getattr(task, method)(*args)
    # The packaged recipes are Tasks.
    assert all(issubclass(recipe, TrainingTask) for recipe in TASKS.values())
