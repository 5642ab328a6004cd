"""keras-hub presets in and out, RoBERTa (issue 59): a random keras-hub
`RobertaTextClassifier` saved with `save_to_preset` loads into ours with equal token ids
(accents, emoji, CJK, pairs) and equal logits, ours written with `save_to_preset` loads
into keras-hub the same way, and what keras-hub's RoBERTa cannot hold is refused."""

import keras
import keras_hub
import numpy as np
import pytest

from keras_attn.models import (
    BertClassifier,
    RobertaBackbone,
    TextClassifier,
    TextClassifierPreprocessor,
    save_to_preset,
)
from keras_attn.models.roberta import RobertaTokenizer
from tests.models.bert.test_keras_hub_presets import PAIRS, PROBES, _same_logits

SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, max_sequence_length=40)


def _ids(preprocessor, x):
    packed = preprocessor(x=x)  # keras-hub's RoBERTa packs no segment ids
    return {key: np.asarray(packed[key]) for key in ("token_ids", "padding_mask")}


def _same_ids(ours, theirs, x):
    mine, hub = _ids(ours, x), _ids(theirs, x)
    for key in mine:
        np.testing.assert_array_equal(mine[key], hub[key], err_msg=key)


def _hub_tokenizer(sources):
    ours = RobertaTokenizer.from_folder(sources["bpe"])
    return keras_hub.models.RobertaTokenizer(
        vocabulary=dict(ours.piece_ids), merges=list(ours.merges)
    )


@pytest.mark.slow  # 12 s: `make test`; BERT's way in is in test-fast
def test_a_keras_hub_roberta_classifier_preset_loads_into_ours(sources, tmp_path):
    keras.utils.set_random_seed(0)
    tokenizer = _hub_tokenizer(sources)
    preprocessor = keras_hub.models.RobertaTextClassifierPreprocessor(tokenizer, sequence_length=24)
    backbone = keras_hub.models.RobertaBackbone(vocabulary_size=tokenizer.vocabulary_size(), **SIZE)
    hub = keras_hub.models.RobertaTextClassifier(backbone, 3, preprocessor=preprocessor)
    hub.save_to_preset(str(tmp_path / "hub"))

    ours = TextClassifier.from_preset(tmp_path / "hub")
    assert type(ours) is BertClassifier and type(ours.backbone) is RobertaBackbone
    assert ours.num_classes == 3 and ours.preprocessor.sequence_length == 24
    for x in (PROBES, PAIRS):
        _same_ids(ours.preprocessor, hub.preprocessor, x)
        logits = _same_logits(ours, hub, x)
    np.testing.assert_allclose(ours.predict(PAIRS, verbose=0), logits, atol=1e-5)
    # The backbone alone: equal at every real token.
    backbone.save_to_preset(str(tmp_path / "backbone"))
    alone = RobertaBackbone.from_preset(tmp_path / "backbone")
    inputs = _ids(preprocessor, PROBES)
    mask = inputs["padding_mask"][..., None] > 0
    ours_inputs = {**inputs, "segment_ids": np.zeros_like(inputs["token_ids"])}
    np.testing.assert_allclose(
        np.asarray(alone(ours_inputs)["sequence_output"]) * mask,
        np.asarray(backbone(inputs)) * mask,
        atol=1e-5,
    )


@pytest.mark.slow
def test_ours_saved_as_a_keras_hub_roberta_preset_loads_into_keras_hub(sources, tmp_path):
    keras.utils.set_random_seed(1)
    tokenizer = RobertaTokenizer.from_folder(
        sources["bpe"],
        sequence_length=20,
        truncate="round_robin",  # keras-hub's packer's
    )
    backbone = RobertaBackbone(tokenizer.vocabulary_size, **SIZE)
    segment = next(w for w in backbone.weights if w.path == "segment_embedding/embeddings")
    segment.assign(np.full(segment.shape, 0.3, "float32"))  # folded into the positions
    ours = BertClassifier(backbone, 2, preprocessor=TextClassifierPreprocessor(tokenizer))
    folder = ours.save_to_preset(tmp_path / "ours")
    hub = keras_hub.models.TextClassifier.from_preset(str(folder))
    assert type(hub).__name__ == "RobertaTextClassifier"
    for x in (PROBES, PAIRS):
        _same_ids(ours.preprocessor, hub.preprocessor, x)
        logits = _same_logits(ours, hub, x)
    np.testing.assert_allclose(hub.predict(PAIRS, verbose=0), logits, atol=1e-5)
    again = TextClassifier.from_preset(folder)  # and back
    _same_logits(again, hub, PROBES)


def test_what_keras_hub_roberta_cannot_hold_is_refused(sources, tmp_path):
    tokenizer = RobertaTokenizer.from_folder(sources["bpe"])
    pre_ln = RobertaBackbone(tokenizer.vocabulary_size, **SIZE, norm_first=True)
    with pytest.raises(ValueError, match="RobertaBackbone computes norm_first=False"):
        save_to_preset(pre_ln, tmp_path / "a")
    backbone = RobertaBackbone(tokenizer.vocabulary_size, **SIZE)
    mean = BertClassifier(backbone, 2, pooling="mean")
    with pytest.raises(ValueError, match="pooling='cls'.*pooling='mean'"):
        save_to_preset(mean, tmp_path / "b", tokenizer=tokenizer)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
