"""TensorBoard: the event files hold the named scalars, histograms, attention images and
hyper-parameters (read back with TensorBoard's own reader), and `tensorboard` serves them."""

import json
import subprocess
import sys
import time
import urllib.request

import keras
import numpy as np
import pytest

from keras_attn.visualize import attention_heatmap
from tests.training.runs import (
    ROOT,
    environment,
    free_ports,
    pretrain_args,
    run_keras_attn,
    write_corpus,
)

# Every test here reads a trained run or a served export (a shared fixture of ~15-25 s).
# One worker runs this module: its module fixtures are made once (`--dist loadgroup`).
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("test_monitor")]


def _events(directory):
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(
        str(directory),
        size_guidance={
            event_accumulator.IMAGES: 0,
            event_accumulator.TENSORS: 0,
            event_accumulator.HISTOGRAMS: 0,
        },
    )
    accumulator.Reload()
    return accumulator.Tags()


@pytest.fixture(scope="module")
def pretrain_run(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("tensorboard")
    corpus = write_corpus(tmp_path / "corpus.txt")
    run_keras_attn(
        pretrain_args(
            corpus,
            tmp_path / "run",
            steps=30,
            steps_per_epoch=15,
            attention_every=15,
            histogram_every=1,
        )
    )
    return tmp_path / "run"


def test_event_files_hold_scalars_histograms_images_and_hparams(pretrain_run):
    logs = pretrain_run / "logs"
    train = _events(logs / "train")
    scalars = set(train["tensors"]) | set(train["scalars"])
    for name in (
        "epoch_loss",
        "epoch_mlm_logits_accuracy",
        "epoch_nsp_logits_accuracy",
        "learning_rate",
        "tokens_per_second",
        "step_time_ms",
        "running_loss",
    ):
        assert name in scalars, (name, sorted(scalars))
    kernels = [tag for tag in train["tensors"] if tag.endswith("kernel/histogram")]
    assert kernels, train
    from tensorboard.backend.event_processing import event_accumulator

    reader = event_accumulator.EventAccumulator(
        str(logs / "train"), size_guidance={event_accumulator.TENSORS: 0}
    )
    reader.Reload()
    assert [e.step for e in reader.Tensors(kernels[0])] == [15, 30]  # each epoch's last step
    validation = _events(logs / "validation")
    assert "epoch_loss" in set(validation["tensors"]) | set(validation["scalars"])
    attention = _events(logs / "attention")
    images = set(attention["images"]) | set(attention["tensors"])
    assert {"layer_0", "layer_1"} <= images, attention
    root = _events(logs)
    assert "_hparams_/session_start_info" in root["tensors"], root


def test_attention_images_are_real_renders(pretrain_run):
    from tensorboard.backend.event_processing import event_accumulator

    accumulator = event_accumulator.EventAccumulator(
        str(pretrain_run / "logs" / "attention"), size_guidance={event_accumulator.TENSORS: 0}
    )
    accumulator.Reload()
    events = accumulator.Tensors("layer_0")
    assert [e.step for e in events] == [0, 15, 30]
    import tensorflow as tf

    first, last = (
        tf.io.decode_png(tf.make_ndarray(e.tensor_proto)[2]).numpy()
        for e in (events[0], events[-1])
    )
    assert first.shape[0] > 100 and first.shape[1] > 200  # two heads side by side
    assert first.std() > 10 and not np.array_equal(first, last)  # drawn, and the attention moved


def test_attention_heatmap_checks_its_shapes():
    with pytest.raises(ValueError, match="shape"):
        attention_heatmap(np.ones((2, 3, 4)), ["a", "b", "c"])


def test_tensorboard_serves_the_run(pretrain_run):
    port = free_ports()[0]
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tensorboard.main",
            "--logdir",
            str(pretrain_run / "logs"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--load_fast",
            "false",
        ],
        cwd=ROOT,
        env=environment(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        runs, deadline = None, time.time() + 90
        while time.time() < deadline:
            try:
                with urllib.request.urlopen(
                    f"http://127.0.0.1:{port}/data/runs", timeout=5
                ) as response:
                    runs = json.loads(response.read())
                if {"train", "validation", "attention"} <= set(runs):
                    break
            except OSError:
                pass
            time.sleep(1)
        assert runs is not None and {"train", "validation", "attention"} <= set(runs), runs
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.mark.parametrize(
    "architecture",
    [
        [],
        ["--architecture", "transformer_xl", "--memory-length", "16", "--segments", "2"],
        ["--num-heads", "4", "--num-key-value-heads", "2", "--position-embedding", "rotary"],
        ["--architecture", "llama", "--num-heads", "4", "--num-key-value-heads", "2"],
    ],
    ids=["gpt", "transformer_xl", "gpt_grouped_query_rotary", "llama"],
)
def test_lm_runs_write_generated_text(tmp_path, architecture):
    import tensorflow as tf
    from tensorboard.backend.event_processing import event_accumulator

    corpus = write_corpus(tmp_path / "corpus.txt")
    run_keras_attn(
        [
            "lm",
            "--corpus",
            str(corpus),
            "--vocabulary-size",
            "200",
            "--held-out-documents",
            "4",
            "--num-layers",
            "1",
            "--hidden-dim",
            "32",
            "--intermediate-dim",
            "64",
            "--sequence-length",
            "32",
            "--batch-size",
            "8",
            "--steps",
            "20",
            "--steps-per-epoch",
            "10",
            "--samples-every",
            "10",
            "--prompts",
            "the king|a river",
            "--histogram-every",
            "0",
            "--output",
            str(tmp_path / "run"),
            "--verbose",
            "0",
            *architecture,
        ]
    )
    accumulator = event_accumulator.EventAccumulator(
        str(tmp_path / "run" / "logs" / "samples"), size_guidance={event_accumulator.TENSORS: 0}
    )
    accumulator.Reload()
    events = accumulator.Tensors("samples")
    assert [e.step for e in events] == [10, 20]
    table = tf.make_ndarray(events[-1].tensor_proto).item().decode()
    assert "| the king | the king" in table and "| a river | a river" in table
    model = keras.saving.load_model(tmp_path / "run" / "model.keras")
    kind = architecture[1] if architecture[:1] == ["--architecture"] else "gpt"
    assert (
        type(model).__name__
        == {
            "gpt": "GPTLanguageModel",
            "llama": "LlamaLanguageModel",
            "transformer_xl": "TransformerXL",
        }[kind]
    )
    if kind == "llama":
        assert model.transformer_layers[0].self_attention.num_key_value_heads == 2
    elif "--num-key-value-heads" in architecture:  # a Llama-style GPT: 2 K/V heads, RoPE
        attention = model.transformer_layers[0].self_attention
        assert (attention.num_key_value_heads, model.position_embedding) == (2, None)
    from keras_attn.cli.export import export_run
    from keras_attn.errors import UserInputError

    if not architecture:  # an unexportable length is a user's error (GPT's export: tests/export)
        with pytest.raises(UserInputError, match=r"in \[2, 32\] \(the model's positions\)"):
            export_run(tmp_path / "run", "gpt", tmp_path / "saved", max_length=999)
    else:  # the run serves generation: beam search, or sampling (Transformer-XL's memory)
        settings = (
            dict(strategy="sample", sampling={"top_k": 5, "seed": 1})
            if kind == "transformer_xl"
            else dict(strategy="beam", num_beams=2)
        )
        path = export_run(tmp_path / "run", "lm", tmp_path / "saved", max_length=12, **settings)
        signature = tf.saved_model.load(str(path)).signatures["serving_default"]
        served, again = (signature(prompt=tf.constant(["The king", ""])) for _ in range(2))
        assert served["token_ids"].shape == (2, 12)
        assert served["text"][0].numpy().decode().startswith("the king")
        np.testing.assert_array_equal(served["token_ids"], again["token_ids"])


def test_text_samples_escape_table_cells(tmp_path):
    from keras_attn.training import TextSamples

    samples = TextSamples(tmp_path, lambda: [("a|b", "line\nbreak")])
    assert samples.write(step=1).splitlines()[-1] == "| a\\|b | line break |"
