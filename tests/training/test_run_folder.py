"""A run folder holds one run: a different run is refused, nothing is overwritten, and the
files hold what they need (checkpoints: weights + optimizer slots; model and best: weights)."""

import hashlib
import json
import zipfile

import keras
import numpy as np
import pytest

from keras_attn.training.run_folder import RESUMABLE_KEYS, check_output_dir, differences
from tests.training.runs import (
    backbone_folder,
    finetune_in_process,
    keras_attn_command,
    write_reviews,
)


def _fingerprints(folder):
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
@pytest.mark.eager  # a few steps each run; traced steps: tests/training/test_trainer.py
def test_a_different_run_is_refused_and_nothing_is_overwritten(tmp_path):
    backbone = backbone_folder(tmp_path / "backbone")
    a, b = (
        write_reviews(tmp_path / "a.csv"),
        write_reviews(tmp_path / "b.csv", labels=("good", "bad")),
    )
    run_a = tmp_path / "runs" / "A"
    finetune_in_process(backbone, a, run_a)
    before = _fingerprints(run_a)
    assert json.loads((run_a / "labels.json").read_text()) == ["neg", "pos"]

    # The command: another file, other labels, another learning rate, the same folder.
    process = keras_attn_command(
        [
            "finetune",
            "--backbone",
            str(backbone),
            "--train",
            str(b),
            "--output",
            str(run_a),
            "--steps",
            "4",
            "--learning-rate",
            "0.001",
            "--text-column",
            "review",
            "--label-column",
            "sentiment",
            "--sequence-length",
            "16",
            "--batch-size",
            "8",
            "--verbose",
            "0",
        ]
    )
    output, _ = process.communicate(timeout=300)
    assert process.returncode == 2 and "Traceback" not in output, output[-3000:]
    error = [line for line in output.splitlines() if line.startswith("error:")]
    assert len(error) == 1 and "data.train" in error[0] and "training.learning_rate" in error[0], (
        output[-3000:]
    )
    assert "--no-resume" in error[0]
    assert _fingerprints(run_a) == before  # nothing of run A was touched

    # Same configuration, but the file now holds other labels: refused by the label set.
    a.write_text(b.read_text())
    with pytest.raises(ValueError, match=r"labels: \['neg', 'pos'\] -> \['bad', 'good'\]"):
        finetune_in_process(backbone, a, run_a)
    assert _fingerprints(run_a) == before

    # Asked to start afresh, the new run takes the folder and the old one moves aside, whole.
    fresh = finetune_in_process(backbone, a, run_a, resume=False)
    assert fresh.resumed_from == 0 and json.loads((run_a / "labels.json").read_text()) == [
        "bad",
        "good",
    ]
    (moved,) = tmp_path.joinpath("runs").glob("A.replaced-*")
    assert _fingerprints(moved) == before


@pytest.mark.slow
@pytest.mark.eager  # a few steps each run; traced steps: tests/training/test_trainer.py
def test_the_step_budget_and_logging_may_change_on_resume(tmp_path):
    backbone = backbone_folder(tmp_path / "backbone")
    reviews, run = write_reviews(tmp_path / "a.csv"), tmp_path / "run"
    finetune_in_process(backbone, reviews, run)
    resumed = finetune_in_process(
        backbone,
        reviews,
        run,
        **{
            "training.steps": 4,
            "training.checkpoint_every": 1,
            "training.keep_checkpoints": 1,
            "training.validation_steps": 2,
        },
    )
    assert (resumed.resumed_from, resumed.steps) == (2, 4)
    assert {"training.steps", "training.checkpoint_every"} <= RESUMABLE_KEYS


def test_differences_name_every_key(tmp_path):
    (tmp_path / "config.yaml").write_text(
        "model:\n  dropout: 0.1\ntraining:\n  steps: 5\n  seed: 0\n"
    )
    (tmp_path / "identity.json").write_text('{"labels": ["a", "b"]}')
    config = {
        "model": {"dropout": 0.2},
        "training": {"steps": 9, "seed": 0},
        "data": {"train": "x.csv"},
    }
    assert differences(tmp_path, config, {"labels": ["a", "b"]}) == [
        "data.train: '(unset)' -> 'x.csv'",
        "model.dropout: 0.1 -> 0.2",
    ]
    assert differences(tmp_path, config, {"labels": ["b"]})[-1] == "labels: ['a', 'b'] -> ['b']"
    assert differences(tmp_path / "new", config) == []


def test_an_output_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is an existing file"):
        check_output_dir(tmp_path / "file")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        check_output_dir(tmp_path / "file" / "run")
    check_output_dir(tmp_path / "new" / "run")


@pytest.mark.slow
def test_checkpoints_hold_weights_and_slots_and_the_model_weights_only(tmp_path):
    backbone = backbone_folder(tmp_path / "backbone")
    result = finetune_in_process(
        backbone,
        write_reviews(tmp_path / "a.csv"),
        tmp_path / "run",
        **{"training.steps": 4, "training.steps_per_epoch": 2},
    )
    model = result.model
    weights = sum(np.asarray(v.value).nbytes for v in model.variables)
    slots = sum(np.asarray(v.value).nbytes for v in model.optimizer.variables)
    # AdamW: a momentum and a velocity per trainable weight, plus a few scalars.
    trainable = sum(np.asarray(v.value).nbytes for v in model.trainable_variables)
    assert 2 * trainable <= slots <= 2 * trainable + 1024
    checkpoints = tmp_path / "run" / "checkpoints"
    with np.load(checkpoints / "ckpt-00000004.npz") as stored:
        assert sum(stored[k].nbytes for k in stored.files if k != "__metadata__") == weights + slots
    with np.load(checkpoints / "best.npz") as stored:
        assert sum(stored[k].nbytes for k in stored.files if k != "__metadata__") == weights
        assert not [k for k in stored.files if "/optimizer/" in k]
    with zipfile.ZipFile(tmp_path / "run" / "model.keras") as archive:
        stored = archive.getinfo("model.weights.h5").file_size
    assert stored < 1.1 * weights + 200_000, (
        stored,
        weights,
    )  # no optimizer state in the model file
    restored = keras.saving.load_model(tmp_path / "run" / "model.keras")
    for mine, theirs in zip(restored.get_weights(), model.get_weights(), strict=True):
        np.testing.assert_array_equal(mine, theirs)
