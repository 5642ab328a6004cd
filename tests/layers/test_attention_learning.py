"""Each scoring function learns a task that cannot be solved without attention.

The pointer task: the first token names a position p (1..7); the answer is the
token found at position p. The first position's query must find the key of
position p and copy its value. A control that replaces attention by mean pooling
stays far below, showing the task needs attention.
"""

import keras
import numpy as np
import pytest

from keras_attn.layers import LearnedPositionEmbedding, MultiHeadAttention, scoring
from tests.helpers import ALL_BACKENDS

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

LENGTH, VALUES = 8, 16


def _pointer_data(n, seed):
    rng = np.random.default_rng(seed)
    tokens = rng.integers(0, VALUES, (n, LENGTH))
    pointer = rng.integers(1, LENGTH, n)
    tokens[:, 0] = VALUES + pointer  # pointer tokens have ids of their own
    return tokens, tokens[np.arange(n), pointer]


def _model(score):
    ids = keras.Input((LENGTH,), dtype="int32")
    x = keras.layers.Embedding(VALUES + LENGTH, 32)(ids)
    x = x + LearnedPositionEmbedding(LENGTH)(x)
    if score is None:
        y = keras.layers.GlobalAveragePooling1D()(x)
    else:
        y = keras.layers.Flatten()(MultiHeadAttention(2, 16, score=score)(x[:, :1], x))
    y = keras.layers.Dense(64, activation="relu")(y)
    model = keras.Model(ids, keras.layers.Dense(VALUES)(y))
    model.compile(
        keras.optimizers.Adam(3e-3),
        keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def _held_out_accuracy(score):
    train, held_out = _pointer_data(6000, seed=0), _pointer_data(1000, seed=1)
    model = _model(score)
    model.fit(*train, batch_size=64, epochs=10, verbose=0)
    return model.evaluate(*held_out, verbose=0)[1]


@pytest.mark.slow
@pytest.mark.parametrize("score", sorted(scoring.SCORES))
def test_every_scoring_learns_the_pointer_task(score):
    assert _held_out_accuracy(score) > 0.9


def test_without_attention_the_task_is_not_learned():
    assert _held_out_accuracy(None) < 0.5
