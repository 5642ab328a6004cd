"""Feature-based heads: the features are the named mix of the frozen encoder's hidden
states (read without dropout), only the head learns, the models round-trip."""

import keras
import numpy as np
import pytest

from keras_attn.models import (
    BertBackbone,
    DebertaV3Backbone,
    FeatureBasedClassifier,
    FeatureBasedTagger,
    GPTLanguageModel,
)
from tests.helpers import max_abs_diff, to_numpy

pytestmark = pytest.mark.backends("tensorflow", "jax", "torch")
VOCABULARY = 50


def _encoder(dropout=0.0):
    keras.utils.set_random_seed(0)
    return BertBackbone(VOCABULARY, 4, 2, 16, 32, max_sequence_length=8, dropout=dropout)


def _inputs():
    rng = np.random.default_rng(0)
    return {
        "token_ids": rng.integers(4, VOCABULARY, (2, 6)).astype("int32"),
        "segment_ids": np.zeros((2, 6), "int32"),
        "padding_mask": np.array([[1] * 6, [1] * 4 + [0] * 2], "int32"),
    }


def _features(model, x, training=False):
    """What reaches the head: the features dropout's input."""
    reader = keras.Model(model.input, model.get_layer("features_dropout").input)
    return to_numpy(reader(x, training=training))


@pytest.mark.parametrize("features", ["last", "second-to-last", "sum-last-4", "concat-last-4"])
def test_features_are_the_named_mix_of_hidden_states(features):
    backbone = _encoder(dropout=0.3)  # the encoder is read in inference mode
    x = _inputs()
    states = [to_numpy(s) for s in backbone.hidden_states(x)]
    expected = {
        "last": states[-1],
        "second-to-last": states[-2],
        "sum-last-4": sum(states[-4:]),
        "concat-last-4": np.concatenate(states[-4:], axis=-1),
    }[features]
    model = FeatureBasedTagger(backbone, 3, features=features, lstm_units=4, lstm_layers=1)
    assert max_abs_diff(_features(model, x, training=True), expected) <= 1e-5


@pytest.mark.slow
def test_scalar_mix_starts_as_the_mean_and_only_the_head_learns(tmp_path):
    backbone = _encoder()
    x = _inputs()
    model = FeatureBasedClassifier(backbone, 2, features="scalar-mix", lstm_units=4)
    states = [to_numpy(s) for s in backbone.hidden_states(x)]
    assert max_abs_diff(_features(model, x), np.mean(states, axis=0)) <= 1e-5
    assert not backbone.trainable and not backbone.trainable_weights
    frozen = {id(w): to_numpy(w).copy() for w in backbone.weights}
    head = {w.path: to_numpy(w).copy() for w in model.trainable_weights}
    assert any("scalar_mix" in path for path in head) and any("bilstm" in p for p in head)
    model.compile(optimizer=keras.optimizers.Adam(0.05))
    history = model.fit(x, np.array([0, 1]), epochs=5, batch_size=2, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    assert all(np.array_equal(to_numpy(w), frozen[id(w)]) for w in backbone.weights)
    unchanged = [
        w.path for w in model.trainable_weights if np.array_equal(to_numpy(w), head[w.path])
    ]
    assert not unchanged, unchanged
    model.save(tmp_path / "model.keras")
    reloaded = keras.saving.load_model(tmp_path / "model.keras")
    assert reloaded.get_config() == model.get_config() and not reloaded.backbone.trainable
    assert max_abs_diff(reloaded.predict(x, verbose=0), model.predict(x, verbose=0)) <= 1e-6


@pytest.mark.parametrize("pooling", ["final", "mean"])
def test_the_classifier_ignores_padding(pooling):
    model = FeatureBasedClassifier(_encoder(), 2, lstm_units=4, lstm_layers=2, pooling=pooling)
    x = _inputs()
    changed = dict(x, token_ids=np.where(x["padding_mask"] == 0, 9, x["token_ids"]))
    assert max_abs_diff(model(changed), model(x)) <= 1e-5


def test_the_tagger_masks_padding_and_takes_other_encoders():
    keras.utils.set_random_seed(0)
    deberta = DebertaV3Backbone(VOCABULARY, 2, 2, 16, 32, max_sequence_length=8, position_buckets=4)
    tagger = FeatureBasedTagger(deberta, 4, features="scalar-mix", lstm_units=4)
    x = _inputs()
    logits = to_numpy(tagger(x))
    assert logits.shape == (2, 6, 4)
    changed = dict(x, token_ids=np.where(x["padding_mask"] == 0, 7, x["token_ids"]))
    real = x["padding_mask"] == 1
    assert max_abs_diff(to_numpy(tagger(changed))[real], logits[real]) <= 1e-5


def test_bad_arguments_are_named():
    backbone = _encoder()
    with pytest.raises(ValueError, match="`features` in"):
        FeatureBasedTagger(backbone, 3, features="last-4")
    with pytest.raises(ValueError, match="4 or more layers for features='sum-last-4'"):
        FeatureBasedTagger(BertBackbone(VOCABULARY, 2, 2, 16, 32), 3, features="sum-last-4")
    with pytest.raises(TypeError, match="an encoder taking"):
        FeatureBasedClassifier(GPTLanguageModel(VOCABULARY, 1, 2, 16, 32), 2)
    with pytest.raises(ValueError, match="pooling"):
        FeatureBasedClassifier(backbone, 2, pooling="cls")
    with pytest.raises(ValueError, match="lstm_units"):
        FeatureBasedClassifier(backbone, 2, lstm_units=0)
