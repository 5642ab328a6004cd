"""`export_openvino`: a classifier as one OpenVINO model that takes raw text (WordPiece
converted by `openvino-tokenizers`, the model read from its ONNX graph), run by
OpenVINO in a process that imports neither keras nor TensorFlow: the SavedModel's
labels on Rotten Tomatoes test snippets, its probabilities; bad requests; what
OpenVINO cannot hold yet is named."""

import json

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import WordPieceTokenizer, rotten_tomatoes
from keras_attn.export import export_openvino, export_saved_model, openvino_model
from keras_attn.export.onnx_tokenizer import INPUTS
from keras_attn.export.openvino_export import tokenizer_model
from keras_attn.models import BertBackbone, BertClassifier, BertTokenClassifier
from tests.export.vocabulary import rotten_tomatoes_vocabulary
from tests.helpers import script_answer

# Runs an exported file as a user's service would: openvino and openvino-tokenizers,
# nothing of ours; says whether keras or TensorFlow got imported.
OPENVINO_ONLY = """
import json, sys
import numpy as np
import openvino, openvino_tokenizers
compiled = openvino.Core().compile_model(sys.argv[1], "CPU", {"INFERENCE_PRECISION_HINT": "f32"})
answers = [compiled(np.array(texts)) for texts in json.load(sys.stdin)]
loaded = sorted({m.split(".")[0] for m in sys.modules} & {"tensorflow", "keras", "tf_keras"})
print(json.dumps({"names": [o.get_any_name() for o in compiled.outputs], "loaded": loaded,
                  "answers": [{"probabilities": a["probabilities"].tolist(),
                               "labels": a["labels"].tolist()} for a in answers]}))
"""


def openvino_only(path, requests):
    """`OPENVINO_ONLY`'s answer to `requests` (each a list of texts) for `path`."""
    return script_answer(OPENVINO_ONLY, path, stdin=json.dumps(requests))


PROBES = [
    "A good film, señor!",
    "Déjà vu: the CAFÉ scene (again) — 3.5 stars?",
    "中文 and 日本語 words",
    "unbelievably long " * 40,
    "",
    "  spaces\tand\ttabs  ",
]


@pytest.fixture(scope="module")
def snippets():
    _, test = rotten_tomatoes(log=False).split(0.2, seed=0)
    return test.texts[:1000]


@pytest.fixture(scope="module")
def tokenizer():
    return WordPieceTokenizer(rotten_tomatoes_vocabulary(), sequence_length=64)


def test_the_tokenizer_model_packs_as_the_wordpiece_tokenizer(tokenizer, snippets, tmp_path):
    import openvino

    openvino.save_model(tokenizer_model(tokenizer), str(tmp_path / "tokenizer.xml"))
    compiled = openvino_model(tmp_path / "tokenizer.xml", threads=1)
    texts = PROBES + [t for t in snippets if t.isascii()]
    answer = compiled(np.array(texts))
    ours = tokenizer(tf.constant(texts))
    longest = int(ours["padding_mask"].numpy().sum(1).max())
    for name in INPUTS:
        assert answer[name].shape == (len(texts), longest) and answer[name].dtype == np.int32
        np.testing.assert_array_equal(answer[name], ours[name].numpy()[:, :longest])


@pytest.mark.slow
def test_the_openvino_classifier_answers_as_the_saved_model_without_tensorflow(
    tmp_path, tokenizer, snippets
):
    backbone = BertBackbone.from_size(
        "tiny", vocabulary_size=tokenizer.vocabulary_size, max_sequence_length=64
    )
    model = BertClassifier(backbone, num_classes=2)
    labels = ["rotten", "fresh"]
    path = export_openvino(model, tokenizer, tmp_path / "classifier.xml", labels=labels)
    assert path.with_suffix(".bin").is_file()
    saved = export_saved_model(model, tokenizer, tmp_path / "saved" / "1", labels=labels)
    served = tf.saved_model.load(str(saved)).signatures["serving_default"]
    # Bad requests: an empty text, 20,000 characters, a byte that is not UTF-8 (read as
    # U+FFFD, as the SavedModel's graph reads it); an empty batch is `predict`'s.
    bad = ["", "x" * 20_000, "word " * 4_000, b"bad \xff film".decode("utf-8", "replace")]
    got = openvino_only(path, [snippets, bad])
    assert got["names"] == ["probabilities", "label_ids", "labels"]
    assert got["loaded"] == []
    for texts, answer in zip([snippets, bad], got["answers"], strict=True):
        expected = served(text=tf.constant(texts))
        assert answer["labels"] == [x.decode() for x in expected["labels"].numpy()]
        same = [i for i, t in enumerate(texts) if t.isascii()]  # NFKC: docs/deployment.md
        np.testing.assert_allclose(
            np.array(answer["probabilities"])[same],
            expected["probabilities"].numpy()[same],
            atol=1e-5,
        )


@pytest.mark.parametrize("length", [32, 33])  # odd and even budgets: who gets the odd piece
def test_the_pair_tokenizer_model_packs_as_the_wordpiece_tokenizer(tokenizer, snippets, length):
    import openvino

    from keras_attn.export.openvino_export import pair_tokenizer_model
    from keras_attn.export.signatures import common

    tokenizer = WordPieceTokenizer(tokenizer.vocabulary, sequence_length=length)
    first = [t if i % 3 else " ".join(t.split()[:3]) for i, t in enumerate(snippets[:300])]
    first, second = first + ["", "", "film"], snippets[300:600] + ["", "film", ""]
    compiled = openvino.Core().compile_model(pair_tokenizer_model(tokenizer), "CPU")
    got = {o.get_any_name(): v for o, v in compiled([np.array(first), np.array(second)]).items()}
    ours = common.to_longest(tokenizer(tf.constant(first), tf.constant(second)))
    plain = [i for i, (a, b) in enumerate(zip(first, second, strict=True)) if (a + b).isascii()]
    assert len(plain) > 250
    for name in INPUTS:
        np.testing.assert_array_equal(got[name][plain], ours[name].numpy()[plain], err_msg=name)


@pytest.mark.slow
def test_an_openvino_classifier_of_pairs_answers_as_the_saved_model(tmp_path, tokenizer, snippets):
    tokenizer = WordPieceTokenizer(tokenizer.vocabulary, sequence_length=33)
    backbone = BertBackbone.from_size(
        "tiny", vocabulary_size=tokenizer.vocabulary_size, max_sequence_length=64
    )
    model = BertClassifier(backbone, num_classes=2)
    path = export_openvino(model, tokenizer, tmp_path / "pairs.xml", text_pair=True)
    saved = export_saved_model(model, tokenizer, tmp_path / "saved" / "1", text_pair=True)
    served = tf.saved_model.load(str(saved)).signatures["serving_default"]
    first, second = snippets[:200], snippets[200:400]
    compiled = openvino_model(path)
    assert sorted(i.get_any_name() for i in compiled.inputs) == ["text", "text_pair"]
    answer = {o.get_any_name(): v for o, v in compiled([np.array(first), np.array(second)]).items()}
    expected = served(text=tf.constant(first), text_pair=tf.constant(second))
    plain = [i for i, (a, b) in enumerate(zip(first, second, strict=True)) if (a + b).isascii()]
    np.testing.assert_allclose(
        answer["probabilities"][plain], expected["probabilities"].numpy()[plain], atol=1e-5
    )
    assert (answer["label_ids"] == expected["label_ids"].numpy()).mean() >= 0.99


def test_what_the_openvino_export_cannot_hold_is_named(tmp_path, tokenizer):
    backbone = BertBackbone.from_size("tiny", vocabulary_size=tokenizer.vocabulary_size)
    classifier = BertClassifier(backbone, num_classes=2)
    with pytest.raises(ValueError, match="Expected a classifier .* BertTokenClassifier"):
        export_openvino(BertTokenClassifier(backbone, num_classes=3), tokenizer, tmp_path / "x")
    with pytest.raises(ValueError, match="quantize.*Received: quantize='int8'"):
        export_openvino(classifier, tokenizer, tmp_path / "q.xml", quantize="int8")

    class OtherTokenizer:
        sequence_length = 16

    with pytest.raises(ValueError, match="WordPieceTokenizer.*Received: OtherTokenizer"):
        export_openvino(classifier, OtherTokenizer(), tmp_path / "y.xml")
    assert not any(tmp_path.iterdir())
