"""ElmoBiLM on TensorFlow, JAX and PyTorch: each direction sees only its own side, padding
reaches nothing real, both LMs learn, the character CNN spells the vocabulary, `.keras`
round trip (the spelling table travels as a weight), features for the frozen heads."""

import keras
import numpy as np
import pytest

from keras_attn.models import ElmoBiLM, FeatureBasedTagger, character_table, registry
from tests.helpers import max_abs_diff, to_numpy

pytestmark = pytest.mark.backends("tensorflow", "jax", "torch")
VOCABULARY = [f"w{i}" for i in range(40)]
PROJECTION = 8


def _bilm(**overrides):
    keras.utils.set_random_seed(0)
    kwargs = dict(num_layers=2, hidden_dim=16, projection_dim=PROJECTION, dropout=0.0)
    if overrides.pop("characters", False):
        kwargs.update(character_cnn=True, filters=((1, 4), (2, 6), (3, 6)), max_characters=6)
        kwargs["character_table"] = character_table(VOCABULARY, max_characters=6)
    return ElmoBiLM(len(VOCABULARY), **{**kwargs, **overrides})


def _inputs():
    ids = np.random.default_rng(0).integers(1, len(VOCABULARY), (2, 7)).astype("int32")
    padding = np.array([[1] * 7, [1] * 5 + [0] * 2], "int32")
    return {"token_ids": ids * padding, "padding_mask": padding}


@pytest.mark.parametrize("characters", [False, True], ids=["embedding", "character_cnn"])
def test_each_direction_sees_only_its_own_side(characters):
    bilm = _bilm(characters=characters)
    x = _inputs()
    k = 3
    changed = dict(x, token_ids=x["token_ids"].copy())
    changed["token_ids"][:, k] = (changed["token_ids"][:, k] + 5) % len(VOCABULARY) + 1
    before, after = bilm.hidden_states(x), bilm.hidden_states(changed)
    assert len(before) == 3
    for layer, (old, new) in enumerate(zip(before, after, strict=True)):
        old, new = to_numpy(old), to_numpy(new)
        assert old.shape == (2, 7, 2 * PROJECTION)
        forward, backward = slice(0, PROJECTION), slice(PROJECTION, None)
        assert np.abs(new[:, :k, forward] - old[:, :k, forward]).max() <= 1e-6, layer
        assert np.abs(new[0, k + 1 :, backward] - old[0, k + 1 :, backward]).max() <= 1e-6
        assert np.abs(new[:, k] - old[:, k]).max() > 1e-4  # the token itself moves both
    logits, moved = bilm(x), bilm(changed)
    # Position t's forward logits predict t + 1 from tokens <= t; backward: t - 1 from >= t.
    assert max_abs_diff(moved["forward_logits"][:, :k], logits["forward_logits"][:, :k]) <= 1e-5
    assert (
        max_abs_diff(moved["backward_logits"][0, k + 1 :], logits["backward_logits"][0, k + 1 :])
        <= 1e-5
    )


def test_padding_reaches_no_real_position():
    bilm = _bilm()
    x = _inputs()
    changed = dict(x, token_ids=np.where(x["padding_mask"] == 0, 9, x["token_ids"]))
    real = x["padding_mask"] == 1
    for old, new in zip(bilm.hidden_states(x), bilm.hidden_states(changed), strict=True):
        assert np.abs(to_numpy(new)[real] - to_numpy(old)[real]).max() <= 1e-5
    for name in ("forward_logits", "backward_logits"):
        assert (
            max_abs_diff(to_numpy(bilm(changed)[name])[real], to_numpy(bilm(x)[name])[real]) <= 1e-5
        )


@pytest.mark.slow
def test_both_language_models_learn_and_round_trip(tmp_path):
    bilm = _bilm(characters=True)
    x = _inputs()
    y = ElmoBiLM.language_model_targets(x["token_ids"])
    np.testing.assert_array_equal(to_numpy(y["forward_logits"])[:, :-1], x["token_ids"][:, 1:])
    np.testing.assert_array_equal(to_numpy(y["backward_logits"])[:, 1:], x["token_ids"][:, :-1])
    assert (to_numpy(y["forward_logits"])[:, -1] == 0).all()
    bilm.compile(optimizer=keras.optimizers.Adam(0.02))
    history = bilm.fit(x, y, epochs=8, batch_size=2, verbose=0).history
    for name in ("forward_logits", "backward_logits"):
        assert history[f"{name}_loss"][-1] < history[f"{name}_loss"][0], name
    bilm.save(tmp_path / "bilm.keras")
    again = keras.saving.load_model(tmp_path / "bilm.keras")
    assert again.get_config() == bilm.get_config()
    np.testing.assert_array_equal(
        to_numpy(again.token_representation.table), character_table(VOCABULARY, 6)
    )
    for name in ("forward_logits", "backward_logits"):
        assert max_abs_diff(again(x)[name], bilm(x)[name]) <= 1e-5
    assert registry.family_of(again).name == "elmo"


def test_its_layers_feed_a_frozen_tagger():
    bilm = _bilm()
    tagger = FeatureBasedTagger(bilm, 3, features="scalar-mix", lstm_units=4, lstm_layers=1)
    x = {**_inputs(), "segment_ids": np.zeros((2, 7), "int32")}
    assert tuple(tagger(x).shape) == (2, 7, 3) and not bilm.trainable_weights


def test_the_spelling_and_bad_arguments():
    table = character_table(["[PAD]", "ab", "é"], max_characters=5)
    assert table[1].tolist() == [1, 97 + 3, 98 + 3, 2, 0]
    assert table[2].tolist() == [1, 0xC3 + 3, 0xA9 + 3, 2, 0]  # UTF-8 bytes
    assert character_table(["abcdef"], max_characters=4)[0].tolist() == [1, 100, 101, 2]
    with pytest.raises(ValueError, match="max_characters` >= 3"):
        character_table(["a"], max_characters=2)
    with pytest.raises(ValueError, match="character_table` only with character_cnn=True"):
        ElmoBiLM(40, character_table=table)
    with pytest.raises(ValueError, match="character_table` of shape \\(40, 50\\)"):
        ElmoBiLM(40, character_cnn=True, character_table=table)
    with pytest.raises(ValueError, match="hidden_dim"):
        ElmoBiLM(40, hidden_dim=0)
    for filters, match in [
        (((1, 4), (7, 4)), "filter width <= max_characters=6"),  # no window over a word
        (((2, 0),), "\\(width, count\\) pairs of positive ints"),
        ((), "non-empty list"),
        ((3, 4), "pairs"),
    ]:
        with pytest.raises(ValueError, match=match):
            ElmoBiLM(40, character_cnn=True, max_characters=6, filters=filters)
    with pytest.raises(ValueError, match="highway_layers"):
        ElmoBiLM(40, character_cnn=True, highway_layers=-1)
    ElmoBiLM(40, character_cnn=True, max_characters=6, filters=[[6, 2]], highway_layers=0)
