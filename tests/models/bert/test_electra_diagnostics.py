"""ELECTRA's diagnostics against values computed by hand, the replaced-token weight's
warm-up and ramp, the uniform control, and the new arguments named when wrong."""

import itertools

import keras
import numpy as np
import pytest

from keras_attn.models import BertBackbone, ElectraPretrainer
from keras_attn.models.bert.electra_diagnostics import (
    diagnostic_metrics,
    frequent_piece_mask,
    update_diagnostics,
)
from tests.models.bert.test_electra_pretrainer import VOCABULARY, _batch, _pretrainer

# A few steps of a small model each, the traced steps being the family's and
# tests/training's: run eagerly (conftest.py's `eager`), about half the traced time.
pytestmark = pytest.mark.eager


def _auc_by_pairs(scores, labels):
    """The ROC AUC as its definition: the share of (replaced, original) pairs ranked
    right, ties counting half."""
    positives = [s for s, y in zip(scores, labels, strict=True) if y]
    negatives = [s for s, y in zip(scores, labels, strict=True) if not y]
    right = sum(
        1.0 if p > n else 0.5 if p == n else 0.0 for p, n in itertools.product(positives, negatives)
    )
    return right / (len(positives) * len(negatives))


def at_real_predictions(ids, x):
    """`ids` `(batch, length)` read at `x`'s real masked positions, flattened."""
    positions = np.take_along_axis(np.asarray(ids), x["masked_positions"], 1)
    return positions[x["masked_weights"] > 0]


def test_auc_and_recalls_equal_the_hand_computed_values():
    logits = np.array([[2.0, -1.0, 0.5, -3.0, 1.0, 4.0], [-2.0, 3.0, -0.5, 0.2, -4.0, 9.0]])
    labels = np.array([[1, 0, 1, 0, 0, 1], [1, 1, 0, 0, 0, 0]])
    real = np.array([[1, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 0]])  # the last one: padding
    token_ids = np.array([[5, 6, 7, 5, 8, 9], [6, 5, 5, 9, 6, 5]])
    frequent = [5, 6]
    metrics = diagnostic_metrics(frequent=True)
    update_diagnostics(
        metrics, logits, labels, real, token_ids, frequent_piece_mask(frequent, VOCABULARY)
    )
    result = {name: float(metric.result()) for name, metric in metrics.items()}

    kept = real.ravel() == 1
    np.testing.assert_allclose(
        result["rtd_auc"], _auc_by_pairs(logits.ravel()[kept], labels.ravel()[kept]), atol=1e-6
    )
    # Replaced real tokens: logits 2, 0.5, 4, -2, 3 -> four called replaced (> 0).
    np.testing.assert_allclose(result["rtd_recall"], 4 / 5, atol=1e-6)
    among = kept & np.isin(token_ids.ravel(), frequent)
    np.testing.assert_allclose(
        result["frequent_rtd_auc"],
        _auc_by_pairs(logits.ravel()[among], labels.ravel()[among]),
        atol=1e-6,
    )
    # Frequent replaced tokens: (5, 2.0), (6, -2.0), (5, 3.0) -> two of three.
    np.testing.assert_allclose(result["frequent_rtd_recall"], 2 / 3, atol=1e-6)
    assert set(diagnostic_metrics(frequent=False)) == {"rtd_auc", "rtd_recall"}


@pytest.mark.slow  # over 10 s: left out of `make test-fast`
def test_the_replaced_token_weight_waits_then_ramps_and_is_saved(tmp_path):
    pretrainer = _pretrainer(seed=0, generator_warmup_steps=2, rtd_ramp_steps=4)
    pretrainer.compile(optimizer=keras.optimizers.Adam(1e-3))
    x = _batch(4)
    shares = []
    for _ in range(7):
        pretrainer.train_on_batch(x)
        shares.append(float(pretrainer.rtd_schedule()))
        assert int(pretrainer.steps_taken.numpy()) == len(shares)  # once per step
    # Steps 1-2: masked LM alone; steps 3-6 ramp a quarter each; then the full weight.
    np.testing.assert_allclose(shares, [0, 0, 0.25, 0.5, 0.75, 1, 1])
    pretrainer.evaluate(x, verbose=0)  # evaluation is not a step
    assert int(pretrainer.steps_taken.numpy()) == 7
    y_pred = pretrainer(x, training=False)
    mlm, rtd = pretrainer._objectives(x, y_pred)
    np.testing.assert_allclose(  # evaluation weighs the replaced-token loss fully
        float(pretrainer.compute_loss(x, y_pred=y_pred, training=False)),
        float(mlm) + 50.0 * float(rtd),
        rtol=1e-5,
    )
    pretrainer.save(tmp_path / "electra.keras")
    restored = keras.saving.load_model(tmp_path / "electra.keras")
    assert int(restored.steps_taken.numpy()) == 7  # a resumed run goes on where it was
    assert (restored.generator_warmup_steps, restored.rtd_ramp_steps) == (2, 4)
    assert _pretrainer().rtd_schedule() == 1.0  # no schedule: the full weight at once


def test_the_uniform_control_replaces_with_any_piece():
    x = _batch(64, seed=3)
    drawn = at_real_predictions(_pretrainer(seed=0, uniform_generator=True)(x)["corrupted_ids"], x)
    # Every id with the same chance: a chi-square over the 60 ids.
    counts = np.bincount(drawn, minlength=VOCABULARY)
    expected = len(drawn) / VOCABULARY
    assert ((counts - expected) ** 2 / expected).sum() < 2 * VOCABULARY
    assert drawn.min() >= 0 and drawn.max() < VOCABULARY


def test_new_arguments_are_named_and_kept_in_the_config():
    for name, value in (("generator_warmup_steps", -1), ("rtd_ramp_steps", 1.5)):
        with pytest.raises(ValueError, match=name):
            _pretrainer(**{name: value})
    with pytest.raises(ValueError, match="frequent_ids"):
        _pretrainer(frequent_ids=[VOCABULARY])
    config = _pretrainer(frequent_ids=[5, 6], uniform_generator=True).get_config()
    assert config["frequent_ids"] == [5, 6] and config["uniform_generator"] is True
    assert isinstance(ElectraPretrainer.from_config(config).generator, BertBackbone)


def test_uniform_warmup_replaces_uniformly_then_hands_over_to_the_generator():
    from tests.models.bert.test_electra_pretrainer import _force_generator

    x = _batch(32, seed=5)
    pretrainer = _pretrainer(seed=0, uniform_warmup_steps=2)
    _force_generator(pretrainer, x, 9)  # the generator would always write token 9

    def written(step):
        pretrainer.steps_taken.assign(step)
        return at_real_predictions(pretrainer(x)["corrupted_ids"], x)

    assert np.mean(written(2) == 9) < 0.2  # within the warm-up: uniform draws
    assert np.all(written(3) == 9)  # after it: the generator's samples
    assert _pretrainer(uniform_warmup_steps=5).get_config()["uniform_warmup_steps"] == 5


def test_the_unigram_control_draws_by_corpus_frequency_and_keeps_it(tmp_path):
    counts = np.ones(VOCABULARY)
    counts[7], counts[8] = 3000, 1000  # ids 7 and 8: three quarters and a quarter, nearly
    pretrainer = _pretrainer(seed=0, unigram_generator=True, unigram_counts=counts)
    x = _batch(64, seed=2)
    drawn = at_real_predictions(pretrainer(x)["corrupted_ids"], x)
    shares = [np.mean(drawn == 7), np.mean(drawn == 8)]
    np.testing.assert_allclose(shares, [3000 / 4058, 1000 / 4058], atol=0.08)
    pretrainer.save(tmp_path / "unigram.keras")
    restored = keras.saving.load_model(tmp_path / "unigram.keras")
    np.testing.assert_allclose(
        np.asarray(restored.unigram_log_probs), np.asarray(pretrainer.unigram_log_probs)
    )
