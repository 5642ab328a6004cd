"""A new export format is one record (`keras_attn.export_formats`): a toy format whose
writer, runtime and record live in this file alone is written by `export_model` and by
`keras-attn export --format toy`, kept out of TF Serving's versions, found in its version
folders and run by `keras-attn predict`; the built-in formats' records agree with what
their writers write."""

import json
import pathlib

import numpy as np
import pytest

from keras_attn import export_formats
from keras_attn.cli import export, predict
from keras_attn.export.versions import export_kind, resolve_export
from keras_attn.export_formats import ExportFormat, add_export_format
from tests.export.test_one_file_exports import write_run

TOY = ExportFormat(
    name="toy",
    suffix=".toy",
    writer=f"{__name__}:write_toy",
    runtime="Toy",
    runtime_long="the toy runtime",
    packages="nothing",
    loader=f"{__name__}:load_toy",
)


def write_toy(model, tokenizer, path, labels=None, quantize=None, text_pair=False):
    """The toy export: the labels and the vocabulary's size, as JSON."""
    answer = {"labels": labels, "vocabulary": len(tokenizer.vocabulary)}
    pathlib.Path(path).write_text(json.dumps(answer))
    return path


def load_toy(path, reason):
    """The toy runtime, answering as a classifier's export: each text's label is its
    length's parity, held with probability 1."""
    labels = json.loads(pathlib.Path(path).read_text())["labels"]

    def call(text):
        parity = [len(t) % 2 for t in text]
        return {
            "labels": np.array([labels[p].encode() for p in parity], object),
            "probabilities": np.eye(2, dtype="float32")[parity],
        }

    return call, ["text"], ["labels", "probabilities"]


@pytest.fixture
def toy():
    add_export_format(TOY)
    try:
        yield TOY
    finally:
        export_formats.EXPORT_FORMATS.pop("toy")


def test_a_toy_format_is_one_record(toy, tmp_path, capsys):
    run = write_run(tmp_path / "run")
    base = tmp_path / "saved_models"
    path = export.main([str(run), "--base", str(base), "--name", "m", "--format", "toy"])
    assert path == base / "m" / "toy" / "1" / "model.toy"
    assert json.loads(path.read_text()) == {"labels": ["neg", "pos"], "vocabulary": 9}
    assert "with nothing" in capsys.readouterr().out  # the record's hint
    assert resolve_export(base / "m" / "toy") == path and export_kind(path) == "Toy"
    with pytest.raises(Exception, match=r"only one-file exports: name one of .*m/toy"):
        resolve_export(base / "m")  # never read as a TF Serving version
    answered = predict.main([str(base / "m" / "toy"), "--text", "ab", "--text", "abc"])
    assert list(answered["labels"]) == [b"neg", b"pos"]
    assert capsys.readouterr().err.splitlines()[-1] == f"reading {path} (Toy)"


def test_a_taken_name_or_suffix_and_a_file_without_a_runtime_are_refused(toy):
    with pytest.raises(ValueError, match="'toy' has them"):
        add_export_format(ExportFormat("other", ".toy", TOY.writer, "T", loader=TOY.loader))
    with pytest.raises(ValueError, match="'onnx' has them"):
        add_export_format(ExportFormat("onnx", ".onnx2", TOY.writer, "T", loader=TOY.loader))
    with pytest.raises(ValueError, match="a runtime and a loader"):
        add_export_format(ExportFormat("bare", ".bare", TOY.writer))
    with pytest.raises(TypeError, match="ExportFormat"):
        add_export_format({"name": "dict"})
    with pytest.raises(ValueError, match=r"Expected `format` in \[.*'toy'.*format='nope'"):
        export_formats.export_format("nope")


def test_the_built_in_records():
    records = export_formats.EXPORT_FORMATS
    assert list(records) == ["saved_model", "onnx", "openvino", "litert"]
    assert [r.file_name for r in export_formats.file_formats()] == [
        "model.onnx",
        "model.xml",
        "model.tflite",
    ]
    assert records["saved_model"].file_name is None
    assert export_formats.format_of_file("a/B.TFLITE") is records["litert"]
    assert export_formats.format_of_file("a/1") is None
    for record in records.values():  # every writer and loader resolves
        assert callable(export_formats._resolved(record.writer))
        assert not record.loader or callable(export_formats._resolved(record.loader))
