"""`import keras_attn` keeps TensorFlow's native start-up lines (oneDNN, CUDA probing,
cuInit, CPU features) off the terminal unless the user set TF_CPP_MIN_LOG_LEVEL;
anything else written meanwhile still reaches stderr."""

import os
import subprocess
import sys

import pytest

from keras_attn import native_logs
from tests.training.runs import ROOT

NATIVE = (
    b"WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n"
    b"I0000 00:00:1795640790.940185   14954 port.cc:153] oneDNN custom operations are on.\n"
    b"E0000 00:00:1795640792.480987   14954 cuda_platform.cc:52] failed call to cuInit: x\n"
    b"W1125 21:03:08.123456    7 cpu_feature_guard.cc:210] This TensorFlow binary is ...\n"
    b"To enable the following instructions: AVX2 FMA, in other operations, rebuild ...\n"
    b"INFO: Created TensorFlow Lite XNNPACK delegate for CPU.\n"
)
OURS = b"error: a line of ours\nI0000 is not a log line without its file:line]\n"


def _python(code, **env):
    environment = {k: v for k, v in os.environ.items() if k != "TF_CPP_MIN_LOG_LEVEL"}
    environment.update(KERAS_BACKEND="tensorflow", PYTHONPATH=str(ROOT), **env)
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, timeout=300
    )


def test_native_lines_are_told_from_the_rest():
    assert native_logs.without_native_lines(NATIVE + OURS) == OURS


def test_held_stderr_passes_on_the_rest_and_everything_on_failure(capfd):
    with native_logs.native_stderr_held():
        os.write(2, NATIVE + OURS)
    assert capfd.readouterr().err.encode() == OURS
    with pytest.raises(RuntimeError), native_logs.native_stderr_held():
        os.write(2, NATIVE)
        raise RuntimeError("the import failed")
    assert capfd.readouterr().err.encode() == NATIVE  # a failed import shows all it said
    with native_logs.native_stderr_held(hold=False):
        os.write(2, NATIVE)
    assert capfd.readouterr().err.encode() == NATIVE


@pytest.mark.slow
def test_importing_the_package_prints_nothing_but_ours():
    code = (
        "import warnings, keras_attn.layers, keras, tensorflow as tf\n"
        "keras.ops.ones(2).numpy()\n"
        "print(type(tf.__loader__).__name__)\n"
        "warnings.warn('a warning of the user')\n"
    )
    quiet = _python(code)
    assert quiet.returncode == 0, quiet.stderr.decode()[-2000:]
    assert quiet.stdout.decode().strip() == "SourceFileLoader"  # TensorFlow's own loader
    lines = quiet.stderr.decode().splitlines()
    assert len(lines) == 1 and "UserWarning: a warning of the user" in lines[0], lines
    chosen = _python(
        "import os, sys, keras_attn\n"
        "print(os.environ['TF_CPP_MIN_LOG_LEVEL'], len(sys.meta_path))\n"
        "import keras_attn.native_logs as n\n"
        "print(any(isinstance(f, n._QuietTensorFlowImport) for f in sys.meta_path))\n",
        TF_CPP_MIN_LOG_LEVEL="0",
    )
    assert chosen.stdout.decode().split()[::2] == ["0", "False"]  # the user's choice stands


@pytest.mark.slow
def test_a_command_turns_tensorflows_error_lines_off_unless_the_user_chose_a_level():
    code = (
        "import os, keras_attn\n"
        "from keras_attn.cli.main import start_tensorflow\n"
        "start_tensorflow()\n"
        "print(os.environ['TF_CPP_MIN_LOG_LEVEL'])\n"
    )
    assert _python(code).stdout.decode().strip() == "3"  # runtime notices held too
    assert _python(code, TF_CPP_MIN_LOG_LEVEL="1").stdout.decode().strip() == "1"
