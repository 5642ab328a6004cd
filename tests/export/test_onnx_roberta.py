"""`export_onnx` of a RoBERTa classifier: the byte-level BPE as onnxruntime-extensions'
`HfJsonTokenizer` (reading the `tokenizer.json` `transformers` writes for our vocabulary
and merges), in a process without keras or TensorFlow: the SavedModel's token ids, labels
and probabilities on Rotten Tomatoes test snippets; bad requests; pairs refused."""

import numpy as np
import onnx
import pytest
import tensorflow as tf

from keras_attn.data import rotten_tomatoes
from keras_attn.export import export_saved_model
from keras_attn.export.onnx_export import export_onnx, onnx_session
from keras_attn.export.onnx_tokenizer import INPUTS, byte_pair_graph
from keras_attn.export.signatures import common
from keras_attn.models import BertClassifier, RobertaBackbone
from keras_attn.models.roberta import RobertaTokenizer
from tests.export.test_onnx_export import PROBES, _run_without_tensorflow


@pytest.fixture(scope="module")
def snippets():
    _, test = rotten_tomatoes(log=False).split(0.2, seed=0)
    return test.texts[:1000]


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


@pytest.mark.slow
def test_a_roberta_classifier_answers_as_the_saved_model_without_tensorflow(
    tmp_path, tokenizer, snippets
):
    backbone = RobertaBackbone.from_size(
        "tiny", vocabulary_size=tokenizer.vocabulary_size, max_sequence_length=48
    )
    model = BertClassifier(backbone, num_classes=2)
    for weight in model.weights:  # labels that vary: no untrained half-and-half answers
        weight.assign(np.random.default_rng(len(weight.path)).normal(0, 0.2, weight.shape))
    labels = ["rotten", "fresh"]
    path = export_onnx(model, tokenizer, tmp_path / "roberta.onnx", labels=labels)
    saved = export_saved_model(model, tokenizer, tmp_path / "saved" / "1", labels=labels)
    served = tf.saved_model.load(str(saved)).signatures["serving_default"]
    # Bad requests: an empty text, 20,000 characters, bytes that were not UTF-8 (as
    # callers read them: U+FFFD) answer as the SavedModel does.
    bad = ["", "x" * 20_000, "word " * 4_000, b"bad \xff film".decode("utf-8", "replace")]
    answers = []
    for texts in (snippets, bad):
        got, expected = _run_without_tensorflow(path, texts), served(text=tf.constant(texts))
        assert got["loaded"] == []
        assert got["labels"] == [x.decode() for x in expected["labels"].numpy()]
        np.testing.assert_allclose(
            got["probabilities"], expected["probabilities"].numpy(), atol=1e-5
        )
        answers.append(got)
    assert set(answers[0]["labels"]) == set(labels)  # the weights give both labels
    empty = onnx_session(path).run(None, {"text": np.array([], dtype=object)})
    assert [o.shape for o in empty] == [(0, 2), (0,), (0,)]
    with pytest.raises(ValueError, match="HfJsonTokenizer reads one text.*text_pair=True"):
        export_onnx(model, tokenizer, tmp_path / "pairs.onnx", text_pair=True)
