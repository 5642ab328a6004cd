"""Version folders are claimed atomically: racing exports get different versions, and
TF Serving never sees a partial one."""

import os
import re
import subprocess

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import WordPieceTokenizer
from keras_attn.export import next_version_dir
from keras_attn.export.versions import publish, staging_folder
from tests.training.runs import (
    backbone_folder,
    finetune_in_process,
    keras_attn_command,
    write_reviews,
)

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


@pytest.mark.slow
def test_racing_exports_get_versions_1_and_2_each_its_own_model(tmp_path):
    backbone = backbone_folder(tmp_path / "backbone")
    reviews = write_reviews(tmp_path / "reviews.csv")
    runs = [tmp_path / "run0", tmp_path / "run1"]
    for seed, run in enumerate(runs):  # two different models (the head's initialisation differs)
        finetune_in_process(backbone, reviews, run, **{"training.seed": seed})
    base = tmp_path / "saved"
    processes = [
        keras_attn_command(["export", str(run), "--name", "conc", "--base", str(base)])
        for run in runs
    ]
    outputs = [process.communicate(timeout=600)[0] for process in processes]
    assert [p.returncode for p in processes] == [0, 0], "\n".join(o[-2000:] for o in outputs)
    exported = {}
    for run, output in zip(runs, outputs, strict=True):
        (path,) = re.findall(rf"Exported {re.escape(str(run))} -> (\S+)", output)
        exported[run] = path
    assert sorted(exported.values()) == [str(base / "conc" / "1"), str(base / "conc" / "2")]
    assert sorted(p.name for p in (base / "conc").iterdir()) == ["1", "2"]
    tokenizer = WordPieceTokenizer(backbone / "vocab.txt", sequence_length=16)
    served = {}
    for run, path in exported.items():
        expected = keras.ops.softmax(
            keras.saving.load_model(run / "model.keras")(tokenizer(tf.constant(TEXTS)))
        )
        signature = tf.saved_model.load(path).signatures["serving_default"]
        served[run] = signature(text=tf.constant(TEXTS))["probabilities"].numpy()
        np.testing.assert_allclose(served[run], keras.ops.convert_to_numpy(expected), atol=1e-5)
    assert (
        np.abs(served[runs[0]] - served[runs[1]]).max() > 1e-3
    )  # the two versions are different models


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
