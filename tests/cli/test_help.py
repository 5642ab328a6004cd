"""The installed `keras-attn` answers `--help` at once, with nothing but the help."""

import os
import pathlib
import re
import subprocess
import sys
import time

import pytest

from keras_attn.cli.main import COMMANDS

SCRIPT = pathlib.Path(sys.executable).parent / "keras-attn"  # the console script pip installed
# TensorFlow's native log lines: absl's notice, and glog-style `I1124 12:00:00.1 ...` records.
TENSORFLOW_LOG_LINE = re.compile(
    r"^(WARNING: All log messages before absl|[IWEF]\d{4} \d\d:\d\d:\d\d)"
)
# Environment of a user's shell: no TF_CPP_MIN_LOG_LEVEL set by the test harness.
ENVIRONMENT = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}


def _timed(*args):
    start = time.perf_counter()
    completed = subprocess.run(
        [str(SCRIPT), *args], capture_output=True, text=True, timeout=120, env=ENVIRONMENT
    )
    return completed, time.perf_counter() - start


@pytest.mark.parametrize("command", [None, *COMMANDS])
def test_help_is_fast_and_quiet(command):
    assert SCRIPT.is_file(), f"the console script is not installed at {SCRIPT}"
    completed, seconds = _timed(*([] if command is None else [command]), "--help")
    assert completed.returncode == 0, completed.stderr[-2000:]
    # The target is 2 s; 5 s leaves room for a busy CI machine.
    assert seconds < 5.0, f"`keras-attn {command or ''} --help` took {seconds:.1f} s"
    assert completed.stderr == "", completed.stderr
    assert completed.stdout.startswith("usage:") or command == "saved-model-cli"  # its own text
    noise = [line for line in completed.stdout.splitlines() if TENSORFLOW_LOG_LINE.match(line)]
    assert not noise, noise


# Each command's `--help`, in a process of its own: the Keras and TensorFlow modules it
# imported (`saved-model-cli` is TensorFlow's own tool, with TensorFlow's help).
HELP_IMPORTS = """
import contextlib, io, sys
from keras_attn.cli.main import main
with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
    main(sys.argv[1:] + ["--help"])
print(sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras")))
"""


def test_help_imports_neither_keras_nor_tensorflow():
    """What `--help` costs, counted rather than timed: `keras-attn main --help` once
    imported the job's modules (Keras, TensorFlow: 5 s) before reading its flags."""
    for command in [c for c in COMMANDS if c != "saved-model-cli"]:
        completed = subprocess.run(
            [sys.executable, "-c", HELP_IMPORTS, command],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert completed.returncode == 0, completed.stderr[-2000:]
        assert completed.stdout.strip().splitlines()[-1] == "[]", (command, completed.stdout)


def test_importing_the_package_and_the_cli_leaves_tensorflow_alone():
    code = (
        "import sys, keras_attn, keras_attn.cli.main, keras_attn.training.task_configs; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras')))"
    )
    completed = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
    )
    assert completed.returncode == 0 and completed.stdout.strip() == "[]", (
        completed.stdout + completed.stderr
    )


@pytest.mark.slow
def test_a_command_holds_back_tensorflows_start_up_lines(tmp_path):
    completed, _ = _timed("predict", str(tmp_path / "nowhere"), "--text", "hi")
    assert completed.returncode == 2
    assert completed.stderr.strip().splitlines() == [
        f"error: {tmp_path / 'nowhere'} is neither a SavedModel nor a folder of numbered versions"
    ]
