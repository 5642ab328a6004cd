"""`keras-attn ... --backend`, and the command line without TensorFlow."""

import subprocess
import sys

import pytest

from keras_attn.cli.main import backend_flag, main
from tests.training.runs import ROOT, environment


def testbackend_flag_is_read_before_keras_starts():
    assert backend_flag(["--corpus", "c.txt", "--backend", "jax"]) == "jax"
    assert backend_flag(["--backend=tensorflow"]) == "tensorflow"
    assert backend_flag(["--steps", "3"]) is None


def test_a_backend_other_than_the_running_one_is_refused(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("KERAS_BACKEND", "tensorflow")  # restored after `main` sets it
    with pytest.raises(SystemExit) as stopped:
        main(["pretrain", "--backend", "jax", "--output", str(tmp_path / "run")])
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert "--backend jax: Keras already runs on 'tensorflow'" in err
    assert not (tmp_path / "run").exists()


def testbackend_flag_only_takes_a_keras_backend(capsys):
    with pytest.raises(SystemExit):
        main(["pretrain", "--backend", "theano"])
    assert "invalid choice: 'theano'" in capsys.readouterr().err


def test_without_tensorflow_the_command_names_the_extra_to_install():
    code = "import sys; sys.modules['tensorflow'] = None; from keras_attn.cli.main import main; "
    code += "main(['pretrain', '--steps', '1'])"
    completed = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 1
    assert "pip install 'keras-attn[tensorflow]'" in completed.stderr, completed.stderr[-2000:]
