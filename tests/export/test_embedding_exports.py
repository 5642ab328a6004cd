"""Sentence embeddings in every one-file format: a backbone exported by `export_onnx`,
`export_openvino` and `export_litert` answers `embeddings` (the mean of the sequence
over the real tokens, L2-normalised) and `pooled_output` as the SavedModel's
`serving_default` does, on Rotten Tomatoes test snippets and bad requests."""

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import WordPieceTokenizer, rotten_tomatoes
from keras_attn.export import (
    export_litert,
    export_onnx,
    export_openvino,
    export_saved_model,
    litert_runner,
    onnx_session,
    openvino_model,
)
from keras_attn.models import BertBackbone
from tests.export.vocabulary import rotten_tomatoes_vocabulary

BAD = ["", "x" * 20_000, "word " * 4_000, b"bad \xff film".decode("utf-8", "replace")]


def _onnx(path, texts):
    session = onnx_session(path, threads=1)
    names = [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(None, {"text": np.array(texts, object)}), strict=True))


def _openvino(path, texts):
    compiled = openvino_model(path, threads=1)
    return {o.get_any_name(): value for o, value in compiled(np.array(texts)).items()}


def _litert(path, texts):
    return litert_runner(path, threads=1)(text=np.array(texts, object))


@pytest.mark.slow
def test_every_format_embeds_as_the_saved_model(tmp_path):
    tokenizer = WordPieceTokenizer(rotten_tomatoes_vocabulary(), sequence_length=48)
    backbone = BertBackbone.from_size(
        "tiny", vocabulary_size=tokenizer.vocabulary_size, max_sequence_length=48
    )
    saved = export_saved_model(backbone, tokenizer, tmp_path / "saved" / "1")
    served = tf.saved_model.load(str(saved)).signatures["serving_default"]
    _, test = rotten_tomatoes(log=False).split(0.2, seed=0)
    snippets = [t for t in test.texts[:300] if t.isascii()]  # ONNX's and OpenVINO's NFKC
    for export, run, name in (
        (export_onnx, _onnx, "e.onnx"),
        (export_openvino, _openvino, "e.xml"),
        (export_litert, _litert, "e.tflite"),
    ):
        path = export(backbone, tokenizer, tmp_path / name)
        for request in (snippets, BAD):
            got, expected = run(path, request), served(text=tf.constant(request))
            assert sorted(got) == ["embeddings", "pooled_output"], name
            for output in got:
                np.testing.assert_allclose(
                    got[output], expected[output].numpy(), atol=1e-5, err_msg=f"{name} {output}"
                )
        np.testing.assert_allclose(np.linalg.norm(got["embeddings"], axis=-1), 1.0, atol=1e-5)
        if name != "e.xml":  # OpenVINO cannot read an empty string tensor (`predict` can)
            assert run(path, [])["embeddings"].shape == (0, backbone.hidden_dim)
        with pytest.raises(ValueError, match="labels=None for an encoder"):
            export(backbone, tokenizer, tmp_path / f"labelled_{name}", labels=["a"])
