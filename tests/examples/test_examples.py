"""Every example runs with `--smoke` from a fresh checkout."""

import pathlib
import subprocess
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parents[2] / "examples").glob("*.py"))


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
def test_example_runs_with_smoke(script):
    completed = subprocess.run(
        [sys.executable, str(script), "--smoke"], capture_output=True, text=True, timeout=600
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip(), "an example should print what it found"


def test_pretraining_example_with_static_masking(tmp_path):
    script = EXAMPLES[0].parent / "pretrain_bert.py"
    completed = subprocess.run(
        [sys.executable, str(script), "--smoke", "--static-masking", "2", "--logdir", str(tmp_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "Static masking: 2 x" in completed.stdout
    assert len(list((tmp_path / "tfrecords").glob("pretraining-*-of-00004.tfrecord"))) == 4


def test_step_budget_flag():
    """`--steps N` is the budget the README's reproductions can rely on: exactly N steps."""
    script = EXAMPLES[0].parent / "gpt_generate.py"
    completed = subprocess.run([sys.executable, str(script), "--smoke", "--steps", "2"],
                               capture_output=True, text=True, timeout=600)
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "(2 steps)" in completed.stdout
    completed = subprocess.run([sys.executable, str(script), "--steps", "0"], capture_output=True, text=True,
                               timeout=600)
    assert completed.returncode == 2 and "--steps and --minutes must be positive" in completed.stderr
