"""The main job (`python -m keras_attn`): pre-train, fine-tune, export, predict, end to end."""

import subprocess
import sys

import pytest

from tests.training.runs import ROOT, environment


@pytest.mark.slow
def test_main_job_smoke_runs_every_stage(tmp_path):
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "keras_attn",
            "--smoke",
            "--output",
            str(tmp_path / "runs"),
            "--saved-models",
            str(tmp_path / "saved_models"),
        ],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-3000:]
    out = completed.stdout
    for stage in ("1/4 Pre-training", "2/4 Fine-tuning", "3/4 Exporting", "4/4 Predicting"):
        assert stage in out
    assert (tmp_path / "saved_models" / "sentiment" / "1" / "saved_model.pb").exists()
    assert f"tensorboard --logdir {tmp_path / 'runs'}" in out
    for run in ("pretrain", "finetune"):
        assert list((tmp_path / "runs" / run / "logs" / "train").iterdir())
    assert out.count("(0.") >= 3  # a probability printed for each example text


def test_main_job_help_lists_its_options():
    completed = subprocess.run(
        [sys.executable, "-m", "keras_attn", "--help"],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0 and "--pretrain-steps" in completed.stdout
