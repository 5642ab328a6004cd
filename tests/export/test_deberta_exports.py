"""`export_openvino` of a DeBERTa-v3 classifier: its SentencePiece tokenizer as
openvino-tokenizers converts what `transformers` reads from the tokenizer's own folder,
in a process with openvino alone: the SavedModel's ids and probabilities on Rotten
Tomatoes test snippets and bad requests. ONNX and LiteRT say why they cannot hold it."""

import io

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import rotten_tomatoes
from keras_attn.export import export_litert, export_onnx, export_openvino, export_saved_model
from keras_attn.export.onnx_tokenizer import INPUTS
from keras_attn.export.openvino_export import tokenizer_model
from keras_attn.export.signatures import common
from keras_attn.models import DebertaV3Backbone, DebertaV3Classifier
from keras_attn.models.deberta import DebertaV3Tokenizer
from tests.export.test_openvino_export import openvino_only
from tests.export.test_roberta_exports import BAD, assert_answers_as_served
from tests.helpers import varied_weights
from tests.models.deberta.test_deberta_tokenizer import PROBES


@pytest.fixture(scope="module")
def snippets():
    _, test = rotten_tomatoes(log=False).split(0.2, seed=0)
    return test.texts[:500]


@pytest.fixture(scope="module")
def model_bytes():
    """A unigram SentencePiece model with DeBERTa's special pieces, from Rotten Tomatoes."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(rotten_tomatoes(log=False).texts[:3000]),
        model_writer=model,
        vocab_size=1000,
        model_type="unigram",
        pad_id=0,
        bos_id=1,
        eos_id=2,
        unk_id=3,
        pad_piece="[PAD]",
        bos_piece="[CLS]",
        eos_piece="[SEP]",
        unk_piece="[UNK]",
        minloglevel=2,
    )
    return model.getvalue()


@pytest.mark.parametrize("length", [12, 48])
def test_the_openvino_tokenizer_packs_as_the_deberta_tokenizer(model_bytes, length):
    import openvino

    tokenizer = DebertaV3Tokenizer(model_bytes, sequence_length=length)
    compiled = openvino.Core().compile_model(tokenizer_model(tokenizer), "CPU")
    texts = [*PROBES, "x" * 100]
    got = compiled(np.array(texts))
    ours = common.to_longest(tokenizer(tf.constant(texts)))
    for name in INPUTS:
        assert got[name].dtype == np.int32
        np.testing.assert_array_equal(got[name], ours[name].numpy(), err_msg=name)


@pytest.mark.slow
def test_the_openvino_deberta_classifier_answers_as_the_saved_model(
    tmp_path, model_bytes, snippets
):
    tokenizer = DebertaV3Tokenizer(model_bytes, sequence_length=48)
    backbone = DebertaV3Backbone.from_size(
        "tiny",
        vocabulary_size=tokenizer.vocabulary_size,
        max_sequence_length=48,
        position_buckets=16,
        max_relative_positions=48,
    )
    model = varied_weights(DebertaV3Classifier(backbone, num_classes=2))
    labels = ["rotten", "fresh"]
    path = export_openvino(model, tokenizer, tmp_path / "deberta.xml", labels=labels)
    saved = export_saved_model(model, tokenizer, tmp_path / "saved" / "1", labels=labels)
    served = tf.saved_model.load(str(saved)).signatures["serving_default"]
    got = openvino_only(path, [snippets, BAD])
    assert got["loaded"] == []
    assert_answers_as_served(served, [snippets, BAD], got["answers"])
    # ONNX and LiteRT cannot hold the tokenizer exactly: said in one line, nothing written.
    with pytest.raises(ValueError, match="ONNX export .*not built .*DebertaV3Tokenizer"):
        export_onnx(model, tokenizer, tmp_path / "x.onnx")
    with pytest.raises(ValueError, match="LiteRT export .*no TFLite kernel.*DebertaV3Token"):
        export_litert(model, tokenizer, tmp_path / "x.tflite")
    assert not (tmp_path / "x.onnx").exists() and not (tmp_path / "x.tflite").exists()
