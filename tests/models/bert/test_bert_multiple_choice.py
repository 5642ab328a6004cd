"""BertMultipleChoice: trained end to end on generated SWAG-like data; round trip; bad arguments."""

import keras
import numpy as np
import pytest

from keras_attn.data import WordPieceTokenizer, multiple_choice_inputs
from keras_attn.models import BertBackbone, BertMultipleChoice

ANIMALS = ["cat", "dog", "cow", "owl"]
SOUNDS = {"cat": "meows", "dog": "barks", "cow": "moos", "owl": "hoots"}
FILLER = ["the", "a", "old", "young", "loud", "then"]
VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + ANIMALS + list(SOUNDS.values()) + FILLER


def _examples(n, seed, num_choices=3):
    """A context mentions an animal; the right ending has its sound, the others not."""
    rng = np.random.default_rng(seed)
    contexts, choices, labels = [], [], rng.integers(0, num_choices, n)
    for label in labels:
        animal = rng.choice(ANIMALS)
        contexts.append(f"{rng.choice(FILLER)} {rng.choice(FILLER)} {animal}")
        wrong = rng.permutation([s for a, s in SOUNDS.items() if a != animal])[
            : num_choices - 1
        ].tolist()
        endings = wrong[:label] + [SOUNDS[animal]] + wrong[label:]
        choices.append([f"{rng.choice(FILLER)} {ending}" for ending in endings])
    return contexts, choices, labels


def _model(**kwargs):
    backbone = BertBackbone(
        vocabulary_size=len(VOCAB),
        num_layers=2,
        num_heads=2,
        hidden_dim=32,
        intermediate_dim=64,
        max_sequence_length=12,
        dropout=0.0,
        initializer_range=0.1,
    )
    return BertMultipleChoice(backbone, num_choices=3, **kwargs)


@pytest.mark.slow
def test_multiple_choice_trains_end_to_end():
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=10)
    contexts, choices, labels = _examples(1500, seed=0)
    x = {k: v.numpy() for k, v in multiple_choice_inputs(tokenizer, contexts, choices).items()}
    assert x["token_ids"].shape == (1500, 3, 10)
    keras.utils.set_random_seed(0)
    model = _model()
    model.compile(optimizer=keras.optimizers.Adam(2e-3))
    model.fit(x, labels, batch_size=32, epochs=5, verbose=0)
    contexts, choices, labels = _examples(300, seed=1)
    test = {k: v.numpy() for k, v in multiple_choice_inputs(tokenizer, contexts, choices).items()}
    assert model.evaluate(test, labels, return_dict=True, verbose=0)["accuracy"] > 0.9


def test_choices_are_scored_independently_and_in_order():
    model = _model()
    tokenizer = WordPieceTokenizer(VOCAB, sequence_length=10)
    x = {
        k: v.numpy()
        for k, v in multiple_choice_inputs(
            tokenizer, ["the cat"], [["a meows", "a barks", "a moos"]]
        ).items()
    }
    logits = np.asarray(model(x))
    swapped = {k: v[:, [2, 0, 1]] for k, v in x.items()}
    np.testing.assert_allclose(np.asarray(model(swapped)), logits[:, [2, 0, 1]], atol=1e-5)


def test_save_load_round_trip(tmp_path):
    model = _model(dropout=0.3)
    x = {
        "token_ids": np.full((2, 3, 6), 7),
        "segment_ids": np.zeros((2, 3, 6), "int32"),
        "padding_mask": np.ones((2, 3, 6), "int32"),
    }
    path = str(tmp_path / "choice.keras")
    model.save(path)
    restored = keras.saving.load_model(path)
    assert isinstance(restored, BertMultipleChoice) and restored.num_choices == 3
    np.testing.assert_allclose(restored(x), model(x), atol=1e-6)


def test_bad_arguments():
    backbone = _model().backbone
    with pytest.raises(ValueError, match="num_choices=1"):
        BertMultipleChoice(backbone, num_choices=1)
    with pytest.raises(ValueError, match="num_choices=2.5"):
        BertMultipleChoice(backbone, num_choices=2.5)
    with pytest.raises(TypeError, match="Expected a BertBackbone"):
        BertMultipleChoice(keras.layers.Dense(3), num_choices=2)
