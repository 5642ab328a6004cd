"""Version folders are claimed atomically: racing exports get different versions, and
TF Serving never sees a partial one."""

import json
import os
import subprocess

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.export import next_version_dir
from keras_attn.export.versions import publish, staging_folder
from tests.helpers import race
from tests.training.runs import environment

TEXTS = ["the film was great .", "awful plot .", "very poor", "good"]


def test_publish_takes_the_next_free_number_and_never_replaces(tmp_path):
    model = tmp_path / "m"
    with staging_folder(model) as first, staging_folder(model) as second:
        (first / "saved_model.pb").write_text("1")
        (second / "saved_model.pb").write_text("2")
        assert publish(first, model) == model / "1"
        (model / "2").mkdir()  # taken meanwhile (by hand, or another export)
        (model / "2" / "x").write_text("theirs")
        assert publish(second, model) == model / "3"
        assert next_version_dir(tmp_path, "m") == model / "4"
    with staging_folder(model) as third, pytest.raises(ValueError, match="exists"):
        publish(third, model, version=1)
    assert sorted(p.name for p in model.iterdir()) == ["1", "2", "3"]  # no staging folder left
    assert (model / "2" / "x").read_text() == "theirs"
    # A staging folder of a killed export (its process gone) is cleaned up by the next one.
    abandoned = model / f".staging-{os.uname().nodename}-999999999-dead"
    abandoned.mkdir()
    with staging_folder(model):
        assert not abandoned.exists()


# Each racing process exports a tiny classifier of its own seed through the whole
# `export_saved_model` path (staging, the checks, the warm-up replay, publishing) once
# every process is ready, and prints where its model went and its probabilities.
RACER = """
import json, pathlib, sys, time
import keras
from keras_attn.data import WordPieceTokenizer
from keras_attn.export import export_saved_model
from keras_attn.models import BertBackbone, BertClassifier
base, seed, texts = pathlib.Path(sys.argv[1]), int(sys.argv[2]), json.loads(sys.argv[3])
ready, go = sys.argv[-2:]
keras.utils.set_random_seed(seed)
vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "was", "great",
              "awful", "plot", "very", "poor", "good", "."]
tokenizer = WordPieceTokenizer(vocabulary, sequence_length=16)
backbone = BertBackbone.from_size("tiny", vocabulary_size=len(vocabulary), max_sequence_length=16)
model = BertClassifier(backbone, num_classes=2)
expected = keras.ops.softmax(model(tokenizer(texts))).numpy().tolist()
pathlib.Path(ready).write_text("")
while not pathlib.Path(go).exists():
    time.sleep(0.01)
path = export_saved_model(model, tokenizer, base / "conc", labels=["neg", "pos"])
print(json.dumps({"path": str(path), "probabilities": expected}))
"""


@pytest.mark.slow
def test_racing_exports_get_versions_each_its_own_model(tmp_path):
    base, count = tmp_path / "saved", 2
    answers = race(
        RACER, [[base, seed, json.dumps(TEXTS)] for seed in range(count)], tmp_path, environment()
    )
    versions = sorted(answer["path"] for answer in answers)
    assert versions == [str(base / "conc" / str(v)) for v in range(1, count + 1)]
    names = sorted(p.name for p in (base / "conc").iterdir())
    assert names == [str(v) for v in range(1, count + 1)]  # no staging folder left
    for answer in answers:  # each version serves the model of the process that wrote it
        signature = tf.saved_model.load(answer["path"]).signatures["serving_default"]
        served = signature(text=tf.constant(TEXTS))["probabilities"].numpy()
        np.testing.assert_allclose(served, answer["probabilities"], atol=1e-5)
    first, second = (np.array(answer["probabilities"]) for answer in answers[:2])
    assert np.abs(first - second).max() > 1e-3  # different models, so the check means something


@pytest.mark.slow
def test_killed_export_leaves_no_version(tmp_path):
    """A version appears by a rename of a whole folder: a process killed while writing
    leaves only a staging folder TF Serving ignores (integer names only)."""
    script = (
        "import os, signal, pathlib, sys; from keras_attn.export.versions import staging_folder\n"
        "with staging_folder(pathlib.Path(sys.argv[1])) as staged:\n"
        "    (staged / 'saved_model.pb').write_text('half'); os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    completed = subprocess.run(
        [__import__("sys").executable, "-c", script, str(tmp_path / "m")], timeout=120
    )
    assert completed.returncode == -9
    assert [p.name for p in (tmp_path / "m").iterdir() if p.name.isdigit()] == []
