"""Every example runs with `--smoke` from a fresh checkout."""

import pathlib
import subprocess
import sys

import pytest

EXAMPLES = sorted((pathlib.Path(__file__).parents[2] / "examples").glob("*.py"))


# One example runs its smoke test on a step budget (`--steps N`, what the README's
# reproductions use): exactly N steps, whatever the machine's speed.
STEP_BUDGET = {"gpt_generate.py": ["--steps", "2"]}


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: p.name)
@pytest.mark.slow
def test_example_runs_with_smoke(script):
    completed = subprocess.run(
        [sys.executable, str(script), "--smoke", *STEP_BUDGET.get(script.name, [])],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip(), "an example should print what it found"
    if script.name in STEP_BUDGET:
        assert f"({STEP_BUDGET[script.name][1]} steps)" in completed.stdout


@pytest.mark.slow
def test_pretraining_example_with_static_masking(tmp_path):
    script = EXAMPLES[0].parent / "pretrain_bert.py"
    completed = subprocess.run(
        [
            sys.executable,
            str(script),
            "--smoke",
            "--static-masking",
            "2",
            "--logdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "Static masking: 2 x" in completed.stdout
    assert len(list((tmp_path / "tfrecords").glob("pretraining-*-of-00004.tfrecord"))) == 4


@pytest.mark.slow
def test_bad_budget_flags_stop_at_once():
    script = EXAMPLES[0].parent / "gpt_generate.py"
    for flags in (["--steps", "0"], ["--minutes", "-1"]):
        completed = subprocess.run(
            [sys.executable, str(script), *flags], capture_output=True, text=True, timeout=600
        )
        assert (
            completed.returncode == 2
            and "--steps and --minutes must be positive" in completed.stderr
        )


@pytest.mark.slow
def test_translation_example_with_predictive_local_attention(tmp_path):
    script = EXAMPLES[0].parent / "bahdanau_rnn_translation.py"
    completed = subprocess.run(
        [
            sys.executable,
            str(script),
            "--smoke",
            "--attention",
            "local-p",
            "--logdir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert "local-p attention: trained" in completed.stdout
    assert (tmp_path / "alignment.png").stat().st_size > 0
