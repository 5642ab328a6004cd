"""Every Keras 3 backend: one `.keras` file per model, saved here on TensorFlow, gives
the same outputs (<= 1e-5) and the same greedy and beam tokens on JAX and PyTorch, in
processes where `import tensorflow` fails (on PyTorch, `import keras_hub` too: greedy
decoding without keras-hub's sampler); JAX compiles `generate` once per setting and
shape."""

import json
import pathlib
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_attn.models import BertBackbone, GPTLanguageModel, TransformerSeq2Seq
from tests.training.runs import ROOT, environment

RUNNER = pathlib.Path(__file__).with_name("run_saved_models.py")
# One worker runs this module, and its fixture (three models on TensorFlow, about 40 s)
# lives for the session: other modules' tests may run between this one's on that worker.
pytestmark = pytest.mark.xdist_group("test_backends")


@pytest.fixture(scope="session")
def saved(tmp_path_factory):
    """The three models saved on TensorFlow, their inputs, and TensorFlow's results."""
    folder = tmp_path_factory.mktemp("backends")
    keras.utils.set_random_seed(7)
    rng = np.random.default_rng(7)
    backbone = BertBackbone.from_size("tiny", vocabulary_size=60, num_layers=2)
    language_model = GPTLanguageModel(
        vocabulary_size=60,
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=16,
    )
    seq2seq = TransformerSeq2Seq(
        60, num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64, max_sequence_length=16
    )
    padding_mask = np.array([[1] * 9, [1] * 6 + [0] * 3], "int32")
    inputs = {
        "backbone_token_ids": rng.integers(5, 60, (2, 9)).astype("int32") * padding_mask,
        "backbone_segment_ids": np.array([[0] * 5 + [1] * 4, [0] * 9], "int32"),
        "backbone_padding_mask": padding_mask,
        "language_model_token_ids": rng.integers(5, 60, (2, 10)).astype("int32"),
        "language_model_prompt": rng.integers(5, 60, (2, 4)).astype("int32"),
        "seq2seq_encoder_token_ids": np.array([[7, 8, 9, 10, 3], [11, 12, 3, 0, 0]], "int32"),
        "seq2seq_decoder_token_ids": np.array([[2, 13, 14, 15], [2, 16, 0, 0]], "int32"),
    }
    np.savez(folder / "inputs.npz", **inputs)
    for name, model in (
        ("backbone", backbone),
        ("language_model", language_model),
        ("seq2seq", seq2seq),
    ):
        model.save(folder / f"{name}.keras")
    completed = _run(folder, "tensorflow", block=False)
    assert json.loads(completed.stdout.splitlines()[-1])["backend"] == "tensorflow"
    return folder, dict(np.load(folder / "tensorflow.npz"))


def _run(folder, backend, block):
    command = [sys.executable, str(RUNNER), str(folder)]
    if block:
        command.append("--without-tensorflow")
    if block and backend == "torch":
        command.append("--without-keras-hub")
    completed = subprocess.run(
        command,
        cwd=ROOT,
        env=environment(KERAS_BACKEND=backend),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-4000:]
    return completed


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["jax", "torch"])
def test_a_keras_file_saved_on_tensorflow_gives_the_same_outputs_and_tokens(saved, backend):
    folder, expected = saved
    report = json.loads(_run(folder, backend, block=True).stdout.splitlines()[-1])
    assert report["backend"] == backend and not report["tensorflow_loaded"]
    if backend == "torch":  # greedy ran as one-beam search; sampling says what to install
        assert not report["keras_hub_loaded"]
        assert "pip install keras-hub" in report["sampling_without_keras_hub"]
    got = dict(np.load(folder / f"{backend}.npz"))
    assert sorted(got) == sorted(expected)
    for name, value in expected.items():
        if value.dtype.kind == "f":
            np.testing.assert_allclose(got[name], value, atol=1e-5, rtol=0, err_msg=name)
        else:  # generated tokens
            np.testing.assert_array_equal(got[name], value, err_msg=name)
    if backend == "jax":  # twice at one shape (other prompts), then a new shape
        assert report["greedy_compilations"] == [1, 1, 2]


def test_tensorflow_only_parts_say_what_to_install():
    script = (
        "import sys\n"
        "sys.modules['tensorflow'] = None\n"
        "for name in ('keras_attn.data', 'keras_attn.export'):\n"
        "    try:\n"
        "        __import__(name)\n"
        "    except ImportError as error:\n"
        "        print(error)\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=environment(KERAS_BACKEND="jax"),
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = completed.stdout.splitlines()
    assert len(lines) == 2, completed.stdout + completed.stderr[-2000:]
    for name, line in zip(("keras_attn.data", "keras_attn.export"), lines, strict=True):
        assert line.startswith(f"{name} (") and "pip install 'keras-attn[tensorflow]'" in line
