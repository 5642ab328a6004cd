"""`export_model`: one entry point, each format's writer; an unknown format or a path
that is not the format's is a ValueError naming it, and nothing is written."""

import pytest

from keras_attn.data import WordPieceTokenizer
from keras_attn.export import export_model
from keras_attn.models import BertBackbone, BertClassifier

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "film"]


@pytest.mark.slow  # 10-12 s: out of `make test-fast`
def test_export_model_writes_each_format_and_refuses_what_is_not_one(tmp_path):
    tokenizer = WordPieceTokenizer(VOCABULARY, sequence_length=8)
    model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=7), num_classes=2)
    with pytest.raises(ValueError, match="Expected `format` in .*Received: format='tflite'"):
        export_model(model, tokenizer, tmp_path / "m.tflite", format="tflite")
    with pytest.raises(ValueError, match=r"ending in \.xml for format='openvino'"):
        export_model(model, tokenizer, tmp_path / "m.onnx", format="openvino")
    assert not any(tmp_path.iterdir())
    saved = export_model(model, tokenizer, tmp_path / "saved" / "1", warmup=False, check=False)
    assert (saved / "saved_model.pb").is_file()
    for format, name in (("onnx", "m.onnx"), ("openvino", "m.xml"), ("litert", "m.tflite")):
        written = export_model(model, tokenizer, tmp_path / name, format=format, labels=["a", "b"])
        assert written == tmp_path / name and written.stat().st_size > 0
    with pytest.raises(TypeError, match="warmup"):  # a SavedModel option to a file format
        export_model(model, tokenizer, tmp_path / "x.onnx", format="onnx", warmup=False)
