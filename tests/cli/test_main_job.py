"""The main job (`python -m keras_attn`): pre-train, fine-tune, export, predict, end to end,
its output sent to a file as a user's log would be: plain progress lines, at least one a
minute, nothing from TensorFlow's native logging."""

import re
import subprocess
import sys
import time

import pytest

from keras_attn.native_logs import without_native_lines
from tests.training.runs import ROOT, environment


@pytest.mark.slow
def test_main_job_smoke_runs_every_stage_and_says_so_plainly(tmp_path):
    env = environment()
    del env["TF_CPP_MIN_LOG_LEVEL"]  # as a user runs it: the package quiets TensorFlow
    command = [sys.executable, "-m", "keras_attn", "--smoke", "--output", str(tmp_path / "runs")]
    command += ["--saved-models", str(tmp_path / "saved_models")]
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    arrivals, raw = [], b""  # (seconds since the start, line) as a log file would get them
    began = time.monotonic()
    for line in process.stdout:
        arrivals.append((time.monotonic() - began, line))
        raw += line
    assert process.wait(timeout=900) == 0, raw[-4000:].decode(errors="replace")
    assert b"\x1b" not in raw and b"\r" not in raw  # no colours, no carriage-return bars
    assert without_native_lines(raw) == raw, raw.decode(errors="replace")
    gaps = [
        later - earlier for (earlier, _), (later, _) in zip(arrivals, arrivals[1:], strict=False)
    ]
    assert arrivals[0][0] < 60 and max(gaps) < 60, (arrivals[0][0], max(gaps))
    out = raw.decode()
    # Progress counted over each run's steps (4 in the smoke), not an epoch's, each line
    # saying which of the job's stages it is in; each stage's header the job's time so far.
    for stage in ("1/4", "2/4"):
        assert re.search(rf"^\[{stage}\] step 1/4 \(25%, .* left\)", out, re.M), out
        assert re.search(rf"^\[{stage}\] step 4/4 \(100%, .* in all\)", out, re.M), out
    headers = re.findall(r"^== (\d)/4 (\w+)\W.*\(job (\d+):(\d\d) so far\) ==$", out, re.M)
    assert [(i, word) for i, word, _, _ in headers] == [
        ("1", "Pre"), ("2", "Fine"), ("3", "Exporting"), ("4", "Predicting")
    ], out  # fmt: skip
    so_far = [int(m) * 60 + int(s) for _, _, m, s in headers]
    assert so_far == sorted(so_far) and so_far[-1] > 0
    assert (tmp_path / "saved_models" / "sentiment" / "1" / "saved_model.pb").exists()
    assert f"tensorboard --logdir {tmp_path / 'runs'}" in out
    for run in ("pretrain", "finetune"):
        assert list((tmp_path / "runs" / run / "logs" / "train").iterdir())
    assert out.count("  p=") >= 3  # as `predict` prints: each example text's label and p


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
