"""keras-hub presets in and out, ALBERT (issue 59): a random keras-hub ALBERT classifier
saved with `save_to_preset` loads into our `BertBackbone` (one shared block, a
factorised embedding) and `AlbertTokenizer` with equal ids and outputs, ours goes back
the same way, and the SentencePiece tokenizer refuses what it cannot read."""

import io
import json

import keras
import keras_hub
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import SentencePieceTokenizer
from keras_attn.layers import gelu_approximate
from keras_attn.models import (
    BertBackbone,
    BertClassifier,
    TextClassifier,
    registry,
    save_to_preset,
)
from keras_attn.models.bert import AlbertTokenizer
from tests.models.bert.test_keras_hub_presets import (
    PAIRS,
    PROBES,
    _ids,
    _same_ids,
    _same_logits,
)

pytestmark = pytest.mark.xdist_group("test_keras_hub_presets")
SIZE = dict(num_layers=3, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=64)
PIECES = dict(
    pad_id=0, unk_id=1, bos_id=2, eos_id=3, pad_piece="<pad>", unk_piece="<unk>",
    bos_piece="[CLS]", eos_piece="[SEP]", user_defined_symbols="[MASK]", minloglevel=2,
)  # fmt: skip


@pytest.fixture(scope="module")
def spiece(reviews):
    """A unigram SentencePiece model with ALBERT's special pieces, from Rotten Tomatoes
    (its own NFKC normaliser, as ALBERT's `spiece.model` has)."""
    import sentencepiece

    model = io.BytesIO()
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(reviews[2]), model_writer=model, vocab_size=400, **PIECES
    )
    return model.getvalue()


@pytest.mark.slow  # 5 s: `make test`; BERT's way in is in test-fast
def test_a_keras_hub_albert_preset_loads_into_ours_and_goes_back(spiece, tmp_path):
    keras.utils.set_random_seed(0)
    tokenizer = keras_hub.models.AlbertTokenizer(proto=spiece)
    preprocessor = keras_hub.models.AlbertTextClassifierPreprocessor(tokenizer, sequence_length=24)
    backbone = keras_hub.models.AlbertBackbone(
        vocabulary_size=tokenizer.vocabulary_size(), embedding_dim=8, **SIZE
    )
    hub = keras_hub.models.AlbertTextClassifier(backbone, 3, preprocessor=preprocessor)
    hub.save_to_preset(str(tmp_path / "hub"))

    ours = TextClassifier.from_preset(tmp_path / "hub")
    assert type(ours) is BertClassifier and type(ours.preprocessor.tokenizer) is AlbertTokenizer
    assert (ours.backbone.share_layers, ours.backbone.embedding_dim) == ("all", 8)
    for x in (PROBES, PAIRS):  # accents, emoji, CJK, NFKC's "ﬁ", whitespace; pairs
        _same_ids(ours.preprocessor, hub.preprocessor, x)
        logits = _same_logits(ours, hub, x)
    np.testing.assert_allclose(ours.predict(PAIRS, verbose=0), logits, atol=1e-5)
    # Ours back into keras-hub: its classes, the same answers.
    folder = save_to_preset(ours, tmp_path / "ours")
    theirs = keras_hub.models.TextClassifier.from_preset(str(folder))
    assert type(theirs).__name__ == "AlbertTextClassifier"
    _same_ids(ours.preprocessor, theirs.preprocessor, PAIRS)
    _same_logits(ours, theirs, PAIRS)
    # A `.keras` file keeps the SentencePiece model; the export serves the same labels.
    ours.save(tmp_path / "albert.keras")
    again = keras.saving.load_model(tmp_path / "albert.keras")
    assert type(again.preprocessor.tokenizer) is AlbertTokenizer
    _same_logits(again, hub, PROBES)
    path = again.export(tmp_path / "served" / "1", labels=["a", "b", "c"], warmup=False)
    served = tf.saved_model.load(str(path)).signatures["serving_default"]
    np.testing.assert_array_equal(
        served(text=tf.constant(PROBES))["label_ids"].numpy(),
        np.argmax(ours.predict(PROBES, verbose=0), -1),
    )


def test_our_albert_backbone_alone_both_ways_and_what_keras_hub_cannot_hold(spiece, tmp_path):
    keras.utils.set_random_seed(1)
    ours = BertBackbone(
        400, **SIZE, embedding_dim=8, share_layers="all", activation=gelu_approximate
    )
    save_to_preset(ours, tmp_path / "backbone")
    theirs = keras_hub.models.Backbone.from_preset(str(tmp_path / "backbone"))
    assert type(theirs).__name__ == "AlbertBackbone"
    inputs = _ids(keras_hub.models.AlbertTextClassifierPreprocessor(
        keras_hub.models.AlbertTokenizer(proto=spiece), sequence_length=24), PROBES)  # fmt: skip
    for key in ("sequence_output", "pooled_output"):
        np.testing.assert_allclose(
            np.asarray(theirs(inputs)[key]), np.asarray(ours(inputs)[key]), atol=1e-5
        )
    # keras-hub's groups of distinct blocks: ours shares one.
    grouped = keras_hub.models.AlbertBackbone(
        vocabulary_size=400, embedding_dim=8, num_groups=3, **SIZE
    )
    twin = registry.family("bert").keras_hub  # the weights a config claims, exactly
    assert twin.parameters(grouped.get_config()) == grouped.count_params()
    grouped.save_to_preset(str(tmp_path / "grouped"))
    with pytest.raises(ValueError, match="num_groups=3 of num_inner_repetitions=1"):
        BertBackbone.from_preset(tmp_path / "grouped")
    # A crafted group count is refused before keras-hub builds a block.
    config = json.loads((tmp_path / "grouped" / "config.json").read_text())
    config["config"]["num_groups"] = 10**6
    (tmp_path / "grouped" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="more than model.weights.h5"):
        BertBackbone.from_preset(tmp_path / "grouped")
    unfactorised = BertBackbone(400, **SIZE, share_layers="all", activation=gelu_approximate)
    with pytest.raises(ValueError, match="embedding_dim=None"):
        save_to_preset(unfactorised, tmp_path / "a")
    exact = BertBackbone(400, **SIZE, embedding_dim=8, share_layers="all")
    with pytest.raises(ValueError, match="AlbertBackbone computes activation='gelu_approximate'"):
        save_to_preset(exact, tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_the_sentencepiece_tokenizer_refuses_what_it_cannot_read(spiece, tmp_path):
    with pytest.raises(ValueError, match="Expected a SentencePiece model"):
        SentencePieceTokenizer(b"\x0a\xff\xff\xff\xff\x0f not a model")
    with pytest.raises(TypeError, match="`model` as bytes or a path"):
        AlbertTokenizer(["a", "list"])
    with pytest.raises(ValueError, match=r"Missing: \['\[PAD\]', '\[UNK\]'\]"):
        SentencePieceTokenizer(spiece)  # ALBERT's pieces are <pad> and <unk>
    with pytest.raises(ValueError, match="sequence_length"):
        AlbertTokenizer(spiece, sequence_length=2)
    with pytest.raises(FileNotFoundError, match="spiece.model"):
        AlbertTokenizer.from_folder(tmp_path)
    tokenizer = AlbertTokenizer(spiece, sequence_length=12)
    tokenizer.save_assets(tmp_path)
    again = AlbertTokenizer.from_folder(tmp_path, sequence_length=12)
    assert again.vocabulary == tokenizer.vocabulary and again.truncate == "round_robin"
    ids = again(tf.constant(["the film is fine"]))["token_ids"]
    assert again.detokenize(ids) == ["the film is fine"]
