"""SavedModels: raw-text and token-id signatures equal the in-memory model, loaded by
TensorFlow alone (no keras, no keras_attn in the process)."""

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import WordPieceTokenizer
from keras_attn.export import export_saved_model, next_version_dir
from keras_attn.models import BertBackbone, BertClassifier

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "plot", "the", "."]
TEXTS = ["the film was good .", "bad plot", "", "good " * 50]

# Runs in a process where keras and keras_attn cannot be imported: what TF Serving has.
TF_ONLY = """
import glob, importlib.util, json, os, sys
sys.modules["keras"] = None
sys.modules["keras_attn"] = None
import tensorflow as tf
# tensorflow-text's ops, loaded as TF Serving links them: the op libraries alone (its
# Python package would import keras).
ops = os.path.join(importlib.util.find_spec("tensorflow_text").submodule_search_locations[0], "python", "ops")
for library in sorted(glob.glob(os.path.join(ops, "*.so"))):
    tf.load_op_library(library)
path, inputs = sys.argv[1], json.loads(sys.argv[2])
outputs = {}
loaded = tf.saved_model.load(path)
for name, kwargs in inputs.items():
    signature = loaded.signatures[name]
    tensors = {k: tf.constant(v, tf.string if isinstance(v[0], str) else tf.int32) for k, v in kwargs.items()}
    outputs[name] = {k: (v.numpy().astype(str) if v.dtype == tf.string else v.numpy()).tolist()
                     for k, v in signature(**tensors).items()}
print(json.dumps(outputs))
"""


def _tf_only(path, inputs):
    completed = subprocess.run([sys.executable, "-c", TF_ONLY, str(path), json.dumps(inputs)],
                               capture_output=True, text=True, timeout=300)
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("text_pair", [False, True])
def test_classifier_signatures_match_the_model_without_keras(tmp_path, text_pair):
    tokenizer = WordPieceTokenizer(VOCABULARY, sequence_length=16)
    model = BertClassifier(BertBackbone.from_preset("tiny", vocabulary_size=len(VOCABULARY),
                                                    max_sequence_length=16), num_classes=3)
    path = export_saved_model(model, tokenizer, next_version_dir(tmp_path, "clf"), labels=["a", "b", "c"],
                              text_pair=text_pair)
    assert path == tmp_path / "clf" / "1" and (path / "assets" / "vocab.txt").read_text().split() == VOCABULARY
    pairs = ["good", "bad", "film", "plot plot"] if text_pair else None
    x = {k: v.numpy() for k, v in tokenizer(tf.constant(TEXTS), None if pairs is None else tf.constant(pairs)).items()}
    expected = tf.nn.softmax(model(x)).numpy()
    text_inputs = {"text": TEXTS, **({"text_pair": pairs} if pairs else {})}
    served = _tf_only(path, {"serving_default": text_inputs, "serve_token_ids": {k: v.tolist() for k, v in x.items()}})
    np.testing.assert_allclose(served["serving_default"]["probabilities"], expected, atol=1e-5)
    np.testing.assert_allclose(served["serve_token_ids"]["probabilities"], expected, atol=1e-5)
    assert served["serving_default"]["labels"] == [["a", "b", "c"][i] for i in expected.argmax(-1)]
    assert served["serving_default"]["label_ids"] == expected.argmax(-1).tolist()


def test_backbone_exports_sentence_embeddings(tmp_path):
    tokenizer = WordPieceTokenizer(VOCABULARY, sequence_length=16)
    backbone = BertBackbone.from_preset("tiny", vocabulary_size=len(VOCABULARY), max_sequence_length=16)
    path = export_saved_model(backbone, tokenizer, tmp_path / "emb" / "1")
    served = _tf_only(path, {"serving_default": {"text": TEXTS[:2]}})["serving_default"]
    x = {k: v.numpy() for k, v in tokenizer(tf.constant(TEXTS[:2])).items()}
    sequence = backbone(x)["sequence_output"].numpy()
    mask = x["padding_mask"][..., None]
    mean = (sequence * mask).sum(1) / mask.sum(1)
    np.testing.assert_allclose(served["embeddings"], mean / np.linalg.norm(mean, axis=-1, keepdims=True), atol=1e-5)


def test_export_refuses_an_existing_version_and_bad_names(tmp_path):
    tokenizer = WordPieceTokenizer(VOCABULARY, sequence_length=16)
    backbone = BertBackbone.from_preset("tiny", vocabulary_size=len(VOCABULARY))
    (tmp_path / "m" / "1").mkdir(parents=True)
    with pytest.raises(ValueError, match="exists"):
        export_saved_model(backbone, tokenizer, tmp_path / "m" / "1")
    with pytest.raises(ValueError, match="name"):
        next_version_dir(tmp_path, "../escape")
    with pytest.raises(ValueError, match="labels"):
        export_saved_model(BertClassifier(backbone, 2), tokenizer, tmp_path / "m" / "2", labels=["only one"])
