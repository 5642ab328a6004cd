"""keras-hub presets in and out, XLNet (issue 59): a random keras-hub `XLNetBackbone`
saved with `save_to_preset` loads into ours with equal outputs, ours goes back the same
way, and what keras-hub cannot hold is refused. keras-hub has no XLNet tokenizer or
task: the backbone alone moves.

Compared one example at a time: keras-hub's `XLNetAttentionMaskLayer` reshapes the
`(batch, length)` padding mask to `(length, batch)` where a transpose is meant, so in a
batch whose rows are padded differently each row reads another row's padding; one row
at a time it computes what ours does (measured: equal to the last bit)."""

import json

import keras
import keras_hub
import numpy as np
import pytest

from keras_attn.models import registry, save_to_preset
from keras_attn.models.xlnet import XLNetBackbone

pytestmark = pytest.mark.xdist_group("test_keras_hub_presets")
SIZE = dict(num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32)


def _examples():
    rng = np.random.default_rng(0)
    for padded in (0, 3):  # XLNet pads on the left
        yield {
            "token_ids": rng.integers(0, 50, (1, 9)).astype("int32"),
            "padding_mask": np.array([[0] * padded + [1] * (9 - padded)], "int32"),
            "segment_ids": np.array([[0] * 5 + [1] * 4], "int32"),
        }


def _same(ours, theirs):
    for x in _examples():
        real = x["padding_mask"][0].astype(bool)
        np.testing.assert_allclose(
            np.asarray(ours(x)["sequence_output"])[0][real],
            np.asarray(theirs(x))[0][real],
            atol=1e-5,
        )


def test_keras_hub_xlnet_presets_in_and_out(tmp_path):
    keras.utils.set_random_seed(0)
    hub = keras_hub.models.XLNetBackbone(vocabulary_size=50, **SIZE)
    hub.save_to_preset(str(tmp_path / "hub"))
    twin = registry.family("xlnet").keras_hub  # the weights a config claims, exactly
    assert twin.parameters(hub.get_config()) == hub.count_params()
    ours = XLNetBackbone.from_preset(tmp_path / "hub")
    assert type(ours) is XLNetBackbone
    _same(ours, hub)
    keras.utils.set_random_seed(1)
    mine = XLNetBackbone(50, **SIZE)
    save_to_preset(mine, tmp_path / "ours")
    theirs = keras_hub.models.Backbone.from_preset(str(tmp_path / "ours"))
    assert type(theirs).__name__ == "XLNetBackbone"
    _same(mine, theirs)


def test_what_keras_hub_xlnet_cannot_hold_is_refused(tmp_path):
    clamped = XLNetBackbone(50, **SIZE, clamp_length=4)
    with pytest.raises(ValueError, match="XLNetBackbone computes clamp_length=None"):
        save_to_preset(clamped, tmp_path / "a")
    approximate = XLNetBackbone(50, **SIZE, activation="relu")
    with pytest.raises(ValueError, match="activation='gelu'"):
        save_to_preset(approximate, tmp_path / "b")
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
    # No tokenizer in keras-hub: a task of ours with one is refused, named.
    from keras_attn.models import TextClassifier

    keras_hub.models.XLNetBackbone(vocabulary_size=50, **SIZE).save_to_preset(str(tmp_path / "hub"))
    with pytest.raises(ValueError, match="without a tokenizer"):
        TextClassifier.from_preset(tmp_path / "hub", num_classes=2)
    # A crafted size is refused before keras-hub builds anything.
    config = json.loads((tmp_path / "hub" / "config.json").read_text())
    config["config"]["num_layers"] = 10**6
    (tmp_path / "hub" / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="more than model.weights.h5"):
        XLNetBackbone.from_preset(tmp_path / "hub")
