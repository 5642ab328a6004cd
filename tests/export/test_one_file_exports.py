"""One-file exports (ONNX, OpenVINO, LiteRT) as a hostile user meets them: claimed like
SavedModel versions (never a TF Serving version, never over another export, whole or
absent when exports race), checked against their checksum when loaded, and every
command names the export it read."""

import json

import numpy as np
import pytest
import yaml

from keras_attn.cli import export, predict
from keras_attn.cli.user_errors import CommandError
from keras_attn.export.one_file import ChecksumMismatch, claimed_file, verify_checksum
from tests.helpers import race
from tests.training.runs import environment

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "film", "was", "good"]
TEXTS = ["the film was good", "the film"]
FORMATS = {"onnx": "model.onnx", "openvino": "model.xml", "litert": "model.tflite"}


def write_run(folder, seed=0):
    """A run folder as `keras-attn finetune` leaves it (a tiny classifier), built by hand."""
    import keras

    from keras_attn.models import BertBackbone, BertClassifier

    keras.utils.set_random_seed(seed)
    folder.mkdir(parents=True)
    backbone = BertBackbone.from_size(
        "tiny", vocabulary_size=len(VOCABULARY), max_sequence_length=16
    )
    BertClassifier(backbone, num_classes=2).save(folder / "model.keras")
    (folder / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    (folder / "labels.json").write_text(json.dumps(["neg", "pos"]))
    config = {"model": {"sequence_length": 16}, "data": {"task": "classification"}}
    (folder / "config.yaml").write_text(yaml.safe_dump(config))
    return folder


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    return write_run(tmp_path_factory.mktemp("one_file") / "run")


def test_claimed_file_never_replaces_and_leaves_nothing_when_the_writer_fails(tmp_path):
    target = tmp_path / "m.xml"
    with claimed_file(target) as partial:
        partial.write_text("<xml/>")
        partial.with_suffix(".bin").write_bytes(b"\0" * 8)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.bin", "m.xml", "m.xml.sha256"]
    assert verify_checksum(target) is True
    with pytest.raises(FileExistsError, match="m.xml.*exists"), claimed_file(target):
        pass
    with (
        pytest.raises(RuntimeError, match="no other.bin"),
        claimed_file(tmp_path / "other.xml") as p,
    ):
        p.write_text("<xml/>")  # OpenVINO's .bin never written
    with pytest.raises(KeyboardInterrupt), claimed_file(tmp_path / "third.onnx") as p:
        p.write_bytes(b"half")
        raise KeyboardInterrupt
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.bin", "m.xml", "m.xml.sha256"]
    assert target.read_text() == "<xml/>"
    assert verify_checksum(tmp_path / "unchecked.onnx") is False  # no checksum beside it


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda sums, bin: bin.write_bytes(b"\1" + bin.read_bytes()[1:]), "m.bin does not match"),
        (lambda sums, bin: sums.write_text("not a checksum\n"), "not the checksum file"),
        (lambda sums, bin: sums.write_bytes(b"0" * 100_000), "not the checksum file"),
        (lambda sums, bin: bin.unlink(), "m.bin does not match"),
    ],
)
def test_verify_checksum_names_the_file_that_changed(tmp_path, damage, message):
    target = tmp_path / "m.xml"
    with claimed_file(target) as partial:
        partial.write_text("<xml/>")
        partial.with_suffix(".bin").write_bytes(b"\0" * 64)
    damage(tmp_path / "m.xml.sha256", tmp_path / "m.bin")
    with pytest.raises(ChecksumMismatch, match=message):
        verify_checksum(target)


@pytest.mark.slow
def test_one_file_exports_stay_out_of_tf_serving_versions_and_are_checked(run, tmp_path, capsys):
    base = tmp_path / "saved_models"
    saved = export.main([str(run), "--base", str(base), "--name", "reviews"])
    assert saved == base / "reviews" / "1"
    files = {}
    for format, name in FORMATS.items():
        path = export.main([str(run), "--base", str(base), "--name", "reviews", "--format", format])
        assert path == base / "reviews" / format / "1" / name
        assert (path.parent / f"{name}.sha256").is_file()
        files[format] = path
    # TF Serving loads the integer folders of saved_models/reviews: the SavedModel alone.
    assert sorted(p.name for p in (base / "reviews").iterdir()) == ["1", *sorted(FORMATS)]
    capsys.readouterr()
    expected = predict.main([str(base / "reviews"), "--text", TEXTS[0], "--text", TEXTS[1]])
    assert capsys.readouterr().err.splitlines()[-1] == f"reading {saved} (SavedModel)"
    for format, path in files.items():  # the format folder -> its newest version's file
        answered = predict.main(
            [str(base / "reviews" / format), "--text", TEXTS[0], "--text", TEXTS[1]]
        )
        kind = {"onnx": "ONNX", "openvino": "OpenVINO", "litert": "LiteRT"}[format]
        assert capsys.readouterr().err.splitlines()[-1] == f"reading {path} ({kind})"
        np.testing.assert_allclose(answered["probabilities"], expected["probabilities"], atol=1e-5)

    # No checksum beside it (removed, or a file made elsewhere): run, and said so.
    sums = files["litert"].parent / "model.tflite.sha256"
    sums.rename(tmp_path / "kept.sha256")
    predict.main([str(files["litert"]), "--text", "good"])
    assert f"note: no model.tflite.sha256 beside {files['litert']}" in capsys.readouterr().err
    (tmp_path / "kept.sha256").rename(sums)

    # A flipped bit in the weights: refused in one error line naming the file, every format.
    for format, path in files.items():
        weights = path.with_suffix(".bin") if format == "openvino" else path
        data = bytearray(weights.read_bytes())
        data[len(data) * 2 // 3] ^= 0x10
        weights.write_bytes(bytes(data))
        with pytest.raises(CommandError, match=rf"^error: {weights} does not match its checksum"):
            predict.main([str(path), "--text", "good"])

    # One-file exports left as versions by an earlier release: named, not "damaged".
    legacy = base / "old"
    (legacy / "1").mkdir(parents=True)
    (legacy / "1" / "model.tflite").write_bytes(b"TFL3")
    for command in (
        lambda: predict.main([str(legacy), "--text", "a"]),
        lambda: __import__("keras_attn.cli.attention").cli.attention.main(
            ["--saved-model", str(legacy), "--text", "a", "--output", str(tmp_path / "a.png")]
        ),
    ):
        with pytest.raises(CommandError, match=r"^error: .*old/1 holds a LiteRT export .* not a"):
            command()
    only_files = base / "files"
    (only_files / "onnx" / "1").mkdir(parents=True)
    with pytest.raises(CommandError, match="holds no SavedModel version, only one-file"):
        predict.main([str(only_files), "--text", "a"])


@pytest.mark.parametrize("format", ["saved_model", *FORMATS])
def test_export_refuses_a_file_in_the_way_and_a_long_name_in_one_line(run, tmp_path, format):
    (tmp_path / "base").write_text("a file")
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "taken").write_text("a file")
    cases = [
        (["--base", str(tmp_path / "base")], r"base is a file, where the export needs a folder"),
        (["--base", str(tmp_path / "base" / "deeper")], r"cannot make the model folder"),
        (["--base", str(tmp_path / "models"), "--name", "taken"], r"taken is a file"),
        (["--base", str(tmp_path / "models"), "--name", "n" * 300], r"at most 128 characters"),
    ]
    for flags, message in cases:
        with pytest.raises(CommandError, match=rf"^error: .*{message}") as caught:
            export.main([str(run), "--format", format, *flags])
        assert "\n" not in str(caught.value)
    assert (tmp_path / "base").read_text() == "a file"
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == ["taken"]


# Each racing process runs `keras-attn export --format F` on the same run for each
# one-file format, once every process is ready, and prints the paths it was told.
RACER = """
import json, pathlib, sys, time
from keras_attn.cli import export
run, base, ready, go = sys.argv[1:5]  # READY and GO: tests.helpers.race's
import keras_attn.export.onnx_export, keras_attn.export.openvino_export  # noqa: F401
pathlib.Path(ready).write_text("")
while not pathlib.Path(go).exists():
    time.sleep(0.01)
paths = {f: str(export.main([run, "--base", base, "--name", "m", "--format", f]))
         for f in ("onnx", "openvino", "litert")}
print(json.dumps(paths))
"""


@pytest.mark.slow
def test_racing_one_file_exports_each_get_a_whole_version(run, tmp_path):
    base, count = tmp_path / "saved", 2
    reported = race(RACER, [[run, base]] * count, tmp_path, environment())
    for format, name in FORMATS.items():
        paths = sorted(answer[format] for answer in reported)
        assert paths == [str(base / "m" / format / str(v) / name) for v in range(1, count + 1)]
        folder = base / "m" / format
        assert sorted(p.name for p in folder.iterdir()) == [str(v) for v in range(1, count + 1)]
        answers = [predict.predict(path, TEXTS) for path in paths]  # each whole, checksum too
        for path, answer in zip(paths, answers, strict=True):
            assert verify_checksum(path) is True
            np.testing.assert_allclose(
                answer["probabilities"], answers[0]["probabilities"], atol=1e-5
            )
    assert sorted(p.name for p in (base / "m").iterdir()) == sorted(FORMATS)  # no version


def test_claimed_file_without_hard_links_still_never_replaces(tmp_path, monkeypatch):
    import os

    def no_links(source, target):
        raise PermissionError(1, "Operation not permitted")  # as on some network shares

    monkeypatch.setattr(os, "link", no_links)
    target = tmp_path / "m.onnx"
    with claimed_file(target) as partial:
        partial.write_bytes(b"weights")
    assert target.read_bytes() == b"weights" and verify_checksum(target) is True
    with pytest.raises(FileExistsError, match="m.onnx.*exists"), claimed_file(target) as p:
        p.write_bytes(b"other")
    assert target.read_bytes() == b"weights"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.onnx", "m.onnx.sha256"]
