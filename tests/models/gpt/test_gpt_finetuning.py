"""GPT-1's fine-tuning: the input transformations on token ids as the paper draws them,
the head reads the extract token's state (both orders added for similarity, a softmax over
answers for multiple choice), and λ = 0 leaves the task's loss alone."""

import keras
import numpy as np
import pytest

from keras_attn.models import GPTFineTuner, GPTLanguageModel, gpt1_inputs
from tests.helpers import max_abs_diff, to_numpy

# A few steps of a small model each, the traced steps being the family's and
# tests/training's: run eagerly (conftest.py's `eager`), about a third of the traced time.
pytestmark = pytest.mark.eager

S, D, E = 1, 2, 3  # start, delimiter ($), extract
VOCABULARY = 40


def _lm():
    keras.utils.set_random_seed(0)
    return GPTLanguageModel(VOCABULARY, 2, 2, 16, 32, max_sequence_length=16, dropout=0.0)


def test_input_transformations_are_the_papers():
    assert gpt1_inputs("classification", [[5, 6, 7]], S, D, E, 7).tolist() == [
        [S, 5, 6, 7, E, 0, 0]
    ]
    assert gpt1_inputs("entailment", [([5, 6], [7, 8])], S, D, E, 8).tolist() == [
        [S, 5, 6, D, 7, 8, E, 0]
    ]
    assert gpt1_inputs("similarity", [([5], [7, 8])], S, D, E, 6).tolist() == [
        [[S, 5, D, 7, 8, E], [S, 7, 8, D, 5, E]]
    ]
    assert gpt1_inputs("multiple_choice", [([5, 6], [[7], [8, 9]])], S, D, E, 7).tolist() == [
        [[S, 5, 6, D, 7, E, 0], [S, 5, 6, D, 8, 9, E]]
    ]
    # Too long: the longest segment loses its last tokens; start, $ and extract stay.
    assert gpt1_inputs("entailment", [([5, 6, 7, 8], [9])], S, D, E, 6, pad_id=0).tolist() == [
        [S, 5, 6, D, 9, E]
    ]
    with pytest.raises(ValueError, match="sequence_length above 4"):
        gpt1_inputs("entailment", [([5], [6])], S, D, E, 4)
    with pytest.raises(ValueError, match="`task` in"):
        gpt1_inputs("summarization", [[5]], S, D, E, 8)


def _extract_states(lm, token_ids):
    states = to_numpy(lm.hidden_states(token_ids)[-1])
    rows = np.arange(len(token_ids))
    return states[rows, np.argmax(token_ids == E, axis=1)]


def test_the_head_reads_the_extract_token():
    lm = _lm()
    model = GPTFineTuner(lm, "classification", num_classes=3, extract_token_id=E, dropout=0.0)
    x = gpt1_inputs("classification", [[5, 6, 7], [8, 9]], S, D, E, 8)
    kernel, bias = (to_numpy(w) for w in model.output_dense.weights)
    expected = _extract_states(lm, x) @ kernel + bias
    assert max_abs_diff(model(x)["logits"], expected) <= 1e-5
    assert max_abs_diff(model(x)["lm_logits"], lm(x)) <= 1e-5  # the LM's own logits
    after = x.copy()
    after[x == 0] = 11  # what follows the extract token changes nothing
    assert max_abs_diff(model(after)["logits"], model(x)["logits"]) <= 1e-5


def test_similarity_adds_both_orders_and_choices_share_one_softmax():
    lm = _lm()
    model = GPTFineTuner(lm, "similarity", num_classes=2, extract_token_id=E, dropout=0.0)
    x = gpt1_inputs("similarity", [([5, 6], [7]), ([8], [9, 10])], S, D, E, 8)
    kernel, bias = (to_numpy(w) for w in model.output_dense.weights)
    states = _extract_states(lm, x.reshape(4, 8)).reshape(2, 2, -1).sum(1)
    assert max_abs_diff(model(x)["logits"], states @ kernel + bias) <= 1e-5
    swapped = gpt1_inputs("similarity", [([7], [5, 6]), ([9, 10], [8])], S, D, E, 8)
    assert max_abs_diff(model(swapped)["logits"], model(x)["logits"]) <= 1e-5  # no order
    choices = GPTFineTuner(lm, "multiple_choice", extract_token_id=E, num_choices=3, dropout=0)
    x = gpt1_inputs("multiple_choice", [([5, 6], [[7], [8, 9], [10]])], S, D, E, 8)
    logits = to_numpy(choices(x)["logits"])
    kernel, bias = (to_numpy(w) for w in choices.output_dense.weights)
    np.testing.assert_allclose(
        logits[0], (_extract_states(lm, x[0]) @ kernel + bias)[:, 0], atol=1e-5
    )
    reordered = gpt1_inputs("multiple_choice", [([5, 6], [[10], [7], [8, 9]])], S, D, E, 8)
    np.testing.assert_allclose(
        to_numpy(choices(reordered)["logits"])[0], logits[0][[2, 0, 1]], atol=1e-5
    )


@pytest.mark.parametrize("lm_weight", [0.0, 0.5])
def test_the_auxiliary_loss_is_weighted_by_lambda(lm_weight, tmp_path):
    model = GPTFineTuner(_lm(), "entailment", extract_token_id=E, lm_weight=lm_weight, dropout=0)
    x = gpt1_inputs("entailment", [([5, 6], [7]), ([8], [9, 10]), ([11], [12])], S, D, E, 8)
    labels = np.array([0, 1, 1])
    targets = model.language_model_targets(x)
    np.testing.assert_array_equal(targets[:, :-1], x[:, 1:])
    model.compile(optimizer=keras.optimizers.SGD(0.0))
    y = {"logits": labels, "lm_logits": targets}
    found = model.evaluate(x, y, verbose=0, return_dict=True)["loss"]
    outputs = model(x)
    task = keras.losses.SparseCategoricalCrossentropy(from_logits=True)(labels, outputs["logits"])
    lm = keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0)(
        targets, outputs["lm_logits"]
    )
    expected = float(to_numpy(task)) + lm_weight * float(to_numpy(lm))
    assert found == pytest.approx(expected, abs=1e-4)
    model.compile(optimizer=keras.optimizers.Adam(0.01))
    history = model.fit(x, y, epochs=5, batch_size=3, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    model.save(tmp_path / "tuned.keras")
    again = keras.saving.load_model(tmp_path / "tuned.keras")
    assert again.get_config() == model.get_config()
    assert max_abs_diff(again(x)["logits"], model(x)["logits"]) <= 1e-5


def test_bad_arguments_are_named():
    lm = _lm()
    with pytest.raises(ValueError, match="`task` in"):
        GPTFineTuner(lm, "qa", extract_token_id=E)
    with pytest.raises(ValueError, match="extract_token_id` < the vocabulary's 40"):
        GPTFineTuner(lm, extract_token_id=40)
    with pytest.raises(ValueError, match="lm_weight` >= 0"):
        GPTFineTuner(lm, extract_token_id=E, lm_weight=-1)
    with pytest.raises(TypeError, match="Expected a GPTLanguageModel"):
        GPTFineTuner(keras.Sequential(), extract_token_id=E)


def test_a_grown_vocabulary_keeps_every_old_logit():
    from keras_attn.models.functional_model import with_vocabulary_size

    lm = _lm()
    grown = with_vocabulary_size(lm, VOCABULARY + 3)
    assert grown.vocabulary_size == VOCABULARY + 3
    x = np.random.default_rng(0).integers(1, VOCABULARY, (2, 9)).astype("int32")
    logits = to_numpy(grown(x))
    assert max_abs_diff(logits[..., :VOCABULARY], lm(x)) <= 1e-5
    assert np.isfinite(logits).all() and logits[..., VOCABULARY:].std() > 0
    with pytest.raises(ValueError, match="vocabulary_size` >= the model's 40"):
        with_vocabulary_size(lm, 10)
