"""MaskedLMMasker: BERT's 15% / 80-10-10 statistics over >100k tokens, specials untouched."""

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import MaskedLMMasker

VOCAB, PAD, CLS, SEP, MASK, UNK = 3000, 0, 101, 102, 103, 100
SPECIAL = [PAD, UNK, CLS, SEP, MASK]


def _batch(n, length, seed):
    """[CLS] A [SEP] B [SEP] [PAD]... with random lengths and non-special tokens."""
    rng = np.random.default_rng(seed)
    tokens = rng.integers(104, VOCAB, (n, length))
    total = rng.integers(12, length + 1, n)
    split = rng.integers(2, total - 3)
    positions = np.arange(length)[None]
    tokens[:, 0] = CLS
    tokens[positions == split[:, None]] = SEP
    tokens[positions == (total - 1)[:, None]] = SEP
    tokens[positions >= total[:, None]] = PAD
    return tokens.astype("int32")


@pytest.fixture(scope="module")
def statistics():
    masker = MaskedLMMasker(VOCAB, MASK, SPECIAL, max_predictions_per_seq=40)
    tokens = _batch(4000, 64, seed=0)
    out = {k: v.numpy() for k, v in masker(tokens, seed=tf.constant([3, 4])).items()}
    return tokens, out


def test_fifteen_percent_of_eligible_tokens_are_chosen(statistics):
    tokens, out = statistics
    eligible = ~np.isin(tokens, SPECIAL)
    assert eligible.sum() > 100_000
    rate = out["masked_weights"].sum() / eligible.sum()
    assert abs(rate - 0.15) <= 0.005, rate


def test_eighty_ten_ten_split(statistics):
    tokens, out = statistics
    chosen = out["masked_weights"].astype(bool)
    new = np.take_along_axis(out["token_ids"], out["masked_positions"], axis=1)[chosen]
    original = out["masked_ids"][chosen]
    np.testing.assert_array_equal(
        original, np.take_along_axis(tokens, out["masked_positions"], 1)[chosen]
    )
    masked = np.mean(new == MASK)
    random = np.mean((new != MASK) & (new != original))
    unchanged = np.mean(new == original)
    assert abs(masked - 0.8) <= 0.01 and abs(random - 0.1) <= 0.01 and abs(unchanged - 0.1) <= 0.01


def test_special_tokens_are_never_chosen_nor_drawn(statistics):
    tokens, out = statistics
    chosen = out["masked_weights"].astype(bool)
    assert not np.isin(out["masked_ids"][chosen], SPECIAL).any()
    special_positions = np.isin(tokens, SPECIAL)
    np.testing.assert_array_equal(out["token_ids"][special_positions], tokens[special_positions])
    new = np.take_along_axis(out["token_ids"], out["masked_positions"], 1)[chosen]
    assert not np.isin(new[new != MASK], SPECIAL).any()
    # Only chosen positions change.
    changed = (out["token_ids"] != tokens).sum()
    assert changed == (new != out["masked_ids"][chosen]).sum()


def test_cap_rounding_and_determinism():
    masker = MaskedLMMasker(VOCAB, MASK, SPECIAL, max_predictions_per_seq=5)
    tokens = _batch(50, 128, seed=1)
    out = masker(tokens, seed=[1, 1])
    eligible = (~np.isin(tokens, SPECIAL)).sum(1)
    expected = np.minimum(np.maximum(np.floor(eligible * 0.15 + 0.5), 1), 5)
    np.testing.assert_array_equal(out["masked_weights"].numpy().sum(1), expected)
    again = masker(tokens, seed=[1, 1])
    np.testing.assert_array_equal(out["token_ids"], again["token_ids"])
    other = masker(tokens, seed=[1, 2])
    assert not np.array_equal(out["token_ids"], other["token_ids"])


def test_works_per_example_inside_tf_data():
    masker = MaskedLMMasker(VOCAB, MASK, SPECIAL, max_predictions_per_seq=8)
    tokens = _batch(6, 16, seed=2)
    seeds = tf.data.Dataset.random(seed=5).batch(2)
    dataset = tf.data.Dataset.zip(tf.data.Dataset.from_tensor_slices(tokens), seeds)
    examples = list(dataset.map(lambda t, s: masker(t, s)).as_numpy_iterator())
    assert len(examples) == 6 and examples[0]["masked_positions"].shape == (8,)
    for example, original in zip(examples, tokens, strict=True):
        assert np.isin(
            example["token_ids"], [MASK] + list(range(104, VOCAB)) + [CLS, SEP, PAD]
        ).all()
        assert example["masked_weights"].sum() == max(
            1, np.floor((~np.isin(original, SPECIAL)).sum() * 0.15 + 0.5)
        )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(vocabulary_size=3), "vocabulary_size=3"),
        (dict(mask_token_id=5000), "mask_token_id=5000"),
        (dict(selection_rate=0.0), "selection_rate=0.0"),
        (dict(mask_token_rate=0.95, random_token_rate=0.1), "random_token_rate=0.1"),
        (dict(max_predictions_per_seq=0), "max_predictions_per_seq=0"),
    ],
)
def test_bad_arguments(kwargs, match):
    config = dict(vocabulary_size=VOCAB, mask_token_id=MASK, special_token_ids=SPECIAL)
    config.update(kwargs)
    with pytest.raises(ValueError, match=match):
        MaskedLMMasker(**config)
