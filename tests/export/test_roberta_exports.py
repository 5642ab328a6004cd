"""`export_onnx` and `export_openvino` of a RoBERTa classifier: the byte-level BPE as
onnxruntime-extensions' `HfJsonTokenizer` (reading the `tokenizer.json` `transformers`
writes for our vocabulary and merges) or openvino-tokenizers' conversion, in a process
without keras or TensorFlow: the SavedModel's token ids, labels and probabilities on
Rotten Tomatoes test snippets; bad requests; pairs refused."""

import numpy as np
import onnx
import pytest
import tensorflow as tf

from keras_attn.data import rotten_tomatoes
from keras_attn.export import (
    export_litert,
    export_openvino,
    export_saved_model,
    openvino_model,
)
from keras_attn.export.onnx_export import export_onnx, onnx_session
from keras_attn.export.onnx_tokenizer import INPUTS, byte_pair_graph
from keras_attn.export.openvino_export import tokenizer_model
from keras_attn.export.signatures import common
from keras_attn.models import BertClassifier, RobertaBackbone
from keras_attn.models.roberta import RobertaTokenizer
from tests.export.test_onnx_export import PROBES, _run_without_tensorflow
from tests.export.test_openvino_export import openvino_only
from tests.helpers import varied_weights

# One worker runs this module: its module fixtures (the SavedModel) are made once.
pytestmark = pytest.mark.xdist_group("test_roberta_exports")


@pytest.fixture(scope="module")
def snippets():
    _, test = rotten_tomatoes(log=False).split(0.2, seed=0)
    return test.texts[:400]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    """A byte-level BPE with RoBERTa's special tokens, learned from Rotten Tomatoes."""
    from tokenizers import ByteLevelBPETokenizer

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(
        rotten_tomatoes(log=False).texts[:3000],
        vocab_size=1000,
        special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    )
    folder = tmp_path_factory.mktemp("bpe")
    trainer.save_model(str(folder))
    return RobertaTokenizer.from_folder(folder, sequence_length=48)


@pytest.mark.parametrize("length", [16, 48])
def test_the_tokenizer_graph_packs_as_the_roberta_tokenizer(tokenizer, tmp_path, length):
    tokenizer = RobertaTokenizer(tokenizer.piece_ids, tokenizer.merges, sequence_length=length)
    onnx.save(byte_pair_graph(tokenizer), str(tmp_path / "tokenizer.onnx"))
    session = onnx_session(tmp_path / "tokenizer.onnx", threads=1)
    texts = [*PROBES, "x" * 100]
    got = session.run(list(INPUTS), {"text": np.array(texts, dtype=object)})
    ours = common.to_longest(tokenizer(tf.constant(texts)))
    for name, value in zip(INPUTS, got, strict=True):
        assert value.dtype == np.int32
        np.testing.assert_array_equal(value, ours[name].numpy(), err_msg=name)


@pytest.mark.parametrize("length", [16, 48])
def test_the_openvino_tokenizer_packs_as_the_roberta_tokenizer(tokenizer, length):
    tokenizer = RobertaTokenizer(tokenizer.piece_ids, tokenizer.merges, sequence_length=length)
    import openvino

    compiled = openvino.Core().compile_model(tokenizer_model(tokenizer), "CPU")
    texts = [*PROBES, "x" * 100]
    got = compiled(np.array(texts))
    ours = common.to_longest(tokenizer(tf.constant(texts)))
    for name in INPUTS:
        assert got[name].dtype == np.int32
        np.testing.assert_array_equal(got[name], ours[name].numpy(), err_msg=name)


@pytest.fixture(scope="module")
def classifier(tokenizer):
    backbone = RobertaBackbone.from_size(
        "tiny", vocabulary_size=tokenizer.vocabulary_size, max_sequence_length=48
    )
    return varied_weights(BertClassifier(backbone, num_classes=2))


@pytest.fixture(scope="module")
def served(tmp_path_factory, tokenizer, classifier):
    """The classifier's SavedModel `serving_default` (labels rotten, fresh): exported
    once for both runtimes' checks (its BPE makes an export cost about 15 s)."""
    folder = tmp_path_factory.mktemp("roberta_saved") / "1"
    saved = export_saved_model(classifier, tokenizer, folder, labels=["rotten", "fresh"])
    return tf.saved_model.load(str(saved)).signatures["serving_default"]


def assert_answers_as_served(served, requests, answers):
    """Each answer (a classifier's `labels` and `probabilities`, from a runtime) is the
    SavedModel's `served` answer to the same texts: the labels, probabilities <= 1e-5."""
    for texts, answer in zip(requests, answers, strict=True):
        expected = served(text=tf.constant(texts))
        assert answer["labels"] == [x.decode() for x in expected["labels"].numpy()]
        np.testing.assert_allclose(
            answer["probabilities"], expected["probabilities"].numpy(), atol=1e-5
        )


# Bad requests: an empty text, 20,000 characters, bytes that were not UTF-8 (as callers
# read them: U+FFFD) answer as the SavedModel does.
BAD = ["", "x" * 20_000, "word " * 4_000, b"bad \xff film".decode("utf-8", "replace")]


@pytest.mark.slow
def test_the_openvino_roberta_classifier_answers_as_the_saved_model(
    tmp_path, tokenizer, classifier, snippets, served
):
    labels = ["rotten", "fresh"]
    path = export_openvino(classifier, tokenizer, tmp_path / "roberta.xml", labels=labels)
    got = openvino_only(path, [snippets, BAD])
    assert got["loaded"] == []
    assert_answers_as_served(served, [snippets, BAD], got["answers"])
    assert openvino_model(path)(np.array(["a fine film"]))["probabilities"].shape == (1, 2)
    with pytest.raises(ValueError, match="WordPiece's .*not RobertaTokenizer's.*text_pair=True"):
        export_openvino(classifier, tokenizer, tmp_path / "pairs.xml", text_pair=True)
    with pytest.raises(ValueError, match="LiteRT export .*no TFLite byte-level BPE.*Roberta"):
        export_litert(classifier, tokenizer, tmp_path / "x.tflite")


@pytest.mark.slow
def test_a_roberta_classifier_answers_as_the_saved_model_without_tensorflow(
    tmp_path, tokenizer, classifier, snippets, served
):
    model = classifier
    labels = ["rotten", "fresh"]
    path = export_onnx(model, tokenizer, tmp_path / "roberta.onnx", labels=labels)
    answers = [_run_without_tensorflow(path, texts) for texts in (snippets, BAD)]
    assert [got["loaded"] for got in answers] == [[], []]
    assert_answers_as_served(served, [snippets, BAD], answers)
    assert set(answers[0]["labels"]) == set(labels)  # the weights give both labels
    empty = onnx_session(path).run(None, {"text": np.array([], dtype=object)})
    assert [o.shape for o in empty] == [(0, 2), (0,), (0,)]
    with pytest.raises(ValueError, match="HfJsonTokenizer reads one text.*text_pair=True"):
        export_onnx(model, tokenizer, tmp_path / "pairs.onnx", text_pair=True)
