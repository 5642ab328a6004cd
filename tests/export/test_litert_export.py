"""`export_litert`: a classifier as one LiteRT model that takes raw text (the model's own
`FastBertTokenizer` as TensorFlow Text's TFLite operators, the rest LiteRT builtins),
run by `ai-edge-litert`'s interpreter in a process that imports neither keras nor
TensorFlow: the SavedModel's labels and probabilities on Rotten Tomatoes test
snippets; bad requests; int8; what LiteRT cannot hold yet is named."""

import json
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import WordPieceTokenizer, rotten_tomatoes
from keras_attn.data.wordpiece_tokenizer import train_wordpiece_vocabulary
from keras_attn.export import export_litert, export_saved_model, litert_runner
from keras_attn.models import BertBackbone, BertClassifier, BertTokenClassifier

# A user's service: ai-edge-litert, TensorFlow Text's operator library (its kernels link
# TensorFlow's framework library, loaded as a shared library), nothing of ours; says
# whether the tensorflow or keras Python packages got imported.
LITERT_ONLY = """
import ctypes, importlib.machinery, importlib.util, json, pathlib, sys
import numpy as np
spec = {n: importlib.util.find_spec(n) for n in ("tensorflow", "tensorflow_text")}
root = {n: pathlib.Path(s.submodule_search_locations[0]) for n, s in spec.items()}
ctypes.CDLL(str(root["tensorflow"] / "libtensorflow_framework.so.2"), mode=ctypes.RTLD_GLOBAL)
library = root["tensorflow_text"] / "core" / "pybinds" / "tflite_registrar.so"
loader = importlib.machinery.ExtensionFileLoader("tflite_registrar", str(library))
ops = importlib.util.module_from_spec(importlib.util.spec_from_loader("tflite_registrar", loader))
loader.exec_module(ops)
from ai_edge_litert import interpreter
loaded = interpreter.InterpreterWithCustomOps(model_path=sys.argv[1], custom_op_registerers=[
    ops.AddFastBertNormalize, ops.AddFastWordpieceTokenize, ops.AddRaggedTensorToTensor])
runner = loaded.get_signature_runner("serving_default")
answers = [runner(text=np.array([t.encode() for t in texts], object))
           for texts in json.load(sys.stdin)]
modules = sorted({m.split(".")[0] for m in sys.modules} & {"tensorflow", "keras", "tf_keras"})
print(json.dumps({"signatures": loaded.get_signature_list(), "loaded": modules,
                  "answers": [{"probabilities": a["probabilities"].tolist(),
                               "labels": [x.decode() for x in a["labels"]]} for a in answers]}))
"""


@pytest.fixture(scope="module")
def snippets():
    _, test = rotten_tomatoes(log=False).split(0.2, seed=0)
    return test.texts[:1000]


@pytest.fixture(scope="module")
def tokenizer():
    texts = tf.data.Dataset.from_tensor_slices(rotten_tomatoes(log=False).texts[:3000])
    return WordPieceTokenizer(train_wordpiece_vocabulary(texts, 2000), sequence_length=64)


@pytest.fixture(scope="module")
def classifier(tokenizer):
    backbone = BertBackbone.from_size(
        "tiny", vocabulary_size=tokenizer.vocabulary_size, max_sequence_length=64
    )
    model = BertClassifier(backbone, num_classes=2)
    for weight in model.weights:  # labels that vary: no untrained half-and-half answers
        weight.assign(np.random.default_rng(len(weight.path)).normal(0, 0.2, weight.shape))
    return model


@pytest.mark.slow
def test_the_litert_classifier_answers_as_the_saved_model_without_tensorflow(
    tmp_path, tokenizer, classifier, snippets
):
    labels = ["rotten", "fresh"]
    path = export_litert(classifier, tokenizer, tmp_path / "classifier.tflite", labels=labels)
    saved = export_saved_model(classifier, tokenizer, tmp_path / "saved" / "1", labels=labels)
    served = tf.saved_model.load(str(saved)).signatures["serving_default"]
    # Bad requests: an empty text, 20,000 characters, text whose bytes were not UTF-8
    # (as callers read them: U+FFFD); an empty batch (answered empty, in the graph).
    bad = ["", "x" * 20_000, "word " * 4_000, b"bad \xff film".decode("utf-8", "replace")]
    completed = subprocess.run(
        [sys.executable, "-c", LITERT_ONLY, str(path)],
        input=json.dumps([snippets, bad, []]),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    got = json.loads(completed.stdout.strip().splitlines()[-1])
    outputs = ["label_ids", "labels", "probabilities"]
    assert got["signatures"] == {"serving_default": {"inputs": ["text"], "outputs": outputs}}
    assert got["loaded"] == []
    for texts, answer in zip([snippets, bad], got["answers"][:2], strict=True):
        expected = served(text=tf.constant(texts))
        assert answer["labels"] == [x.decode() for x in expected["labels"].numpy()]
        # The same FastBertTokenizer: the same pieces, NFKC included (every snippet).
        np.testing.assert_allclose(
            answer["probabilities"], expected["probabilities"].numpy(), atol=1e-5
        )
    assert got["answers"][2] == {"probabilities": [], "labels": []}


@pytest.mark.slow
def test_an_int8_litert_export_is_smaller_and_close(tmp_path, tokenizer, classifier, snippets):
    floats = export_litert(classifier, tokenizer, tmp_path / "float.tflite")
    int8 = export_litert(classifier, tokenizer, tmp_path / "int8.tflite", quantize="int8")
    assert int8.stat().st_size < 0.6 * floats.stat().st_size  # the vocabulary stays
    texts = np.array(snippets[:200], dtype=object)
    a, b = (litert_runner(p, threads=1)(text=texts) for p in (floats, int8))
    assert np.mean(a["label_ids"] == b["label_ids"]) >= 0.9
    np.testing.assert_allclose(a["probabilities"], b["probabilities"], atol=0.1)


def test_what_the_litert_export_cannot_hold_is_named(tmp_path, tokenizer, classifier):
    backbone = classifier.backbone
    with pytest.raises(ValueError, match="Expected a classifier .* BertTokenClassifier"):
        export_litert(BertTokenClassifier(backbone, num_classes=3), tokenizer, tmp_path / "x")
    with pytest.raises(ValueError, match="one text per row .* text_pair=True"):
        export_litert(classifier, tokenizer, tmp_path / "p.tflite", text_pair=True)
    with pytest.raises(ValueError, match="quantize.*Received: quantize='float16'"):
        export_litert(classifier, tokenizer, tmp_path / "q.tflite", quantize="float16")

    class OtherTokenizer:
        sequence_length = 16

    with pytest.raises(ValueError, match="WordPieceTokenizer.*Received: OtherTokenizer"):
        export_litert(classifier, OtherTokenizer(), tmp_path / "y.tflite")
    assert not any(tmp_path.iterdir())
