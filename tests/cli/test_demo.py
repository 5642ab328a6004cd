"""`keras-attn demo`: a Transformer from our layers learns to reverse sequences."""

import subprocess
import sys

import pytest

from keras_attn.cli import demo


@pytest.mark.slow
def test_demo_learns_to_reverse_sequences(capsys):
    result = demo.main(["--steps", "200", "--length", "6", "--num-layers", "1"])
    assert result["token_accuracy"] > 0.9
    out = capsys.readouterr().out
    assert "Greedy decoding of 256 held-out sequences" in out and "source [" in out


def test_demo_rejects_bad_options():
    with pytest.raises(SystemExit):
        demo.main(["--steps", "0"])
    with pytest.raises(SystemExit):
        demo.main(["--score", "luong"])


def test_demo_command_help():
    completed = subprocess.run(
        [sys.executable, "-m", "keras_attn.cli.main", "demo", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0
    assert "--score" in completed.stdout and "scaled_dot" in completed.stdout
