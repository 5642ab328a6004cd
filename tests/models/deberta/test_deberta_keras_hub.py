"""keras-hub presets in and out, DeBERTa-v3 (issue 59): a random keras-hub
`DebertaV3TextClassifier` saved with `save_to_preset` loads into ours with equal token ids
(accents, emoji, CJK, pairs) and equal logits, ours written with `save_to_preset` loads
into keras-hub the same way, and what keras-hub's DeBERTa-v3 cannot hold is refused."""

import keras
import keras_hub
import numpy as np
import pytest

from keras_attn.models import (
    DebertaV3Backbone,
    DebertaV3Classifier,
    TextClassifier,
    TextClassifierPreprocessor,
    save_to_preset,
)
from keras_attn.models.deberta.deberta_tokenizer import DebertaV3Tokenizer
from tests.models.bert.test_keras_hub_presets import PAIRS, PROBES, _same_logits

SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=64)


def _ids(preprocessor, x):
    packed = preprocessor(x=x)  # keras-hub's DeBERTa-v3 packs no segment ids
    return {key: np.asarray(packed[key]) for key in ("token_ids", "padding_mask")}


def _same_ids(ours, theirs, x):
    mine, hub = _ids(ours, x), _ids(theirs, x)
    for key in mine:
        np.testing.assert_array_equal(mine[key], hub[key], err_msg=key)


@pytest.mark.slow  # 12 s: `make test`; BERT's way in is in test-fast
def test_a_keras_hub_deberta_classifier_preset_loads_into_ours(sources, tmp_path):
    keras.utils.set_random_seed(0)
    tokenizer = keras_hub.models.DebertaV3Tokenizer(proto=sources["spm"])
    preprocessor = keras_hub.models.DebertaV3TextClassifierPreprocessor(
        tokenizer, sequence_length=24
    )
    backbone = keras_hub.models.DebertaV3Backbone(
        vocabulary_size=tokenizer.vocabulary_size(), bucket_size=8, **SIZE
    )
    hub = keras_hub.models.DebertaV3TextClassifier(backbone, 3, preprocessor=preprocessor)
    hub.save_to_preset(str(tmp_path / "hub"))

    ours = TextClassifier.from_preset(tmp_path / "hub")
    assert type(ours) is DebertaV3Classifier and ours.backbone.position_buckets == 8
    for x in (PROBES, PAIRS):
        _same_ids(ours.preprocessor, hub.preprocessor, x)
        logits = _same_logits(ours, hub, x)
    np.testing.assert_allclose(ours.predict(PAIRS, verbose=0), logits, atol=1e-5)


@pytest.mark.slow
def test_ours_saved_as_a_keras_hub_deberta_preset_loads_into_keras_hub(sources, tmp_path):
    keras.utils.set_random_seed(1)
    # Pairs cut round robin, as keras-hub's packer can (longest first, transformers' and
    # our default, it cannot: written round robin with a warning).
    tokenizer = DebertaV3Tokenizer(sources["spm"], sequence_length=20, truncate="round_robin")
    backbone = DebertaV3Backbone(tokenizer.vocabulary_size, position_buckets=8, **SIZE)
    ours = DebertaV3Classifier(backbone, 2, preprocessor=TextClassifierPreprocessor(tokenizer))
    folder = ours.save_to_preset(tmp_path / "ours")
    again = TextClassifier.from_preset(folder)
    assert again.preprocessor.tokenizer.truncate == "round_robin"
    default = DebertaV3Tokenizer(sources["spm"], sequence_length=20)
    with pytest.warns(UserWarning, match="not longest first.*written round robin"):
        save_to_preset(ours, tmp_path / "longest_first", tokenizer=default)
    hub = keras_hub.models.TextClassifier.from_preset(str(folder))
    assert type(hub).__name__ == "DebertaV3TextClassifier"
    for x in (PROBES, PAIRS):
        _same_ids(ours.preprocessor, hub.preprocessor, x)
        logits = _same_logits(ours, hub, x)
    np.testing.assert_allclose(hub.predict(PAIRS, verbose=0), logits, atol=1e-5)


def test_what_keras_hub_deberta_cannot_hold_is_refused(sources, tmp_path):
    tokenizer = DebertaV3Tokenizer(sources["spm"])
    c2p = DebertaV3Backbone(
        tokenizer.vocabulary_size, **SIZE, position_buckets=8, attention_types=["c2p"]
    )
    with pytest.raises(ValueError, match="DebertaV3Backbone computes attention_types"):
        save_to_preset(c2p, tmp_path / "a")
    mean = DebertaV3Classifier(
        DebertaV3Backbone(tokenizer.vocabulary_size, **SIZE, position_buckets=8), 2, pooling="mean"
    )
    with pytest.raises(ValueError, match="pooling='cls'.*pooling='mean'"):
        save_to_preset(mean, tmp_path / "b", tokenizer=tokenizer)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
