"""TransformerXL: calling it on several segments is `call_segment` step by step with
the memory carried; with no memory each segment is read alone, and with a memory that
covers everything before it the segments equal one causal pass over the whole text;
`stream_perplexity` is the mean negative log-likelihood of those logits; gradients
stop at the memory; `fit` and a `.keras` round trip; bad arguments named."""

import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.models import GenerationConfig, TransformerXL
from tests.helpers import max_abs_diff, to_numpy

# A few steps of a small model each, the traced steps being the family's and
# tests/training's: run eagerly (conftest.py's `eager`), about a quarter of the traced time.
pytestmark = pytest.mark.eager

SIZE = dict(
    vocabulary_size=40, num_layers=2, num_heads=2, hidden_dim=16, intermediate_dim=32, dropout=0.0
)


def _model(segment_length=4, memory_length=4, **kwargs):
    keras.utils.set_random_seed(0)
    return TransformerXL(
        segment_length=segment_length, memory_length=memory_length, **{**SIZE, **kwargs}
    )


def _ids(length=12, seed=0):
    return np.random.default_rng(seed).integers(1, 40, (2, length)).astype("int32")


def test_segments_carry_the_memory():
    model, ids = _model(), _ids()
    logits, memories, steps = model(ids), None, []
    for start in (0, 4, 8):
        step, memories = model.call_segment(ids[:, start : start + 4], memories)
        steps.append(to_numpy(step))
    assert max_abs_diff(logits, np.concatenate(steps, axis=1)) < 1e-6
    assert [tuple(m.shape) for m in memories] == [(2, 4, 16)] * 2


def test_no_memory_reads_each_segment_alone_and_a_full_memory_reads_everything():
    alone = _model(memory_length=0)
    ids = _ids()
    pieces = [to_numpy(alone(ids[:, s : s + 4])) for s in (0, 4, 8)]
    assert max_abs_diff(alone(ids), np.concatenate(pieces, axis=1)) < 1e-6
    whole = _model(segment_length=12, memory_length=0)
    remembering = _model(memory_length=8)  # the 8 positions before the last segment
    for model in (whole, remembering):
        model.set_weights(alone.get_weights())
    assert max_abs_diff(remembering(ids), whole(ids)) < 1e-5
    assert max_abs_diff(alone(ids), whole(ids)) > 1e-3  # the memory matters


def test_stream_perplexity_is_the_mean_negative_log_likelihood():
    model = _model()
    stream = np.random.default_rng(1).integers(1, 40, 2 * 13).astype("int32")
    ids = stream.reshape(2, 13)
    log_probs = tf.nn.log_softmax(model(ids[:, :12]), axis=-1).numpy()
    expected = -np.take_along_axis(log_probs, ids[:, 1:, None], -1).mean()
    result = model.stream_perplexity(stream, num_streams=2)
    assert result["tokens"] == 24 and abs(result["loss"] - expected) < 1e-5
    assert abs(result["perplexity"] - math.exp(expected)) < 1e-3
    # A longer memory than in training changes what the last segment sees.
    longer = model.stream_perplexity(stream, num_streams=2, memory_length=8)
    assert abs(longer["loss"] - expected) > 1e-6


@pytest.mark.parametrize("strategy", ["greedy", "sample"])
def test_decoding_with_the_memory_equals_rereading_the_sequence(strategy):
    model = _model()
    prompt = _ids(3)
    tokens = model.generate(prompt, 9, strategy=strategy, seed=3)
    assert tokens.shape == (2, 9) and (tokens[:, :3] == prompt).all()
    # Re-read from scratch: one causal segment over everything so far.
    whole = _model(segment_length=9, memory_length=0)
    whole.set_weights(model.get_weights())
    if strategy == "greedy":
        for t in range(3, 9):
            expected = np.argmax(to_numpy(whole(tokens[:, :t]))[:, -1], axis=-1)
            assert (tokens[:, t] == expected).all()
    else:  # the same draws from the same distributions
        assert (model.generate(prompt, 9, strategy="sample", seed=3) == tokens).all()
    uncached = model.generate(prompt, 9, strategy=strategy, seed=3, use_cache=False)
    assert (uncached == tokens).all()


@pytest.mark.slow  # over 10 s: left out of `make test-fast`
def test_beam_search_through_the_generation_config():
    model = _model()
    prompts = [[5, 6, 7], [9]]  # rows of different lengths, right-padded inside
    greedy = model.generate(prompts, config=GenerationConfig(max_length=9))
    one_beam = model.generate(
        prompts, config=GenerationConfig(strategy="beam", num_beams=1, max_length=9)
    )
    assert (one_beam == greedy).all()
    for row, prompt in zip(greedy, prompts, strict=True):  # each row as if alone
        assert (model.generate([prompt], 9)[0] == row).all()
    # With as many beams as tokens, two steps of beam search are an exhaustive search.
    exhaustive = GenerationConfig(strategy="beam", num_beams=SIZE["vocabulary_size"])
    prompt = _ids(3)
    beam, log_probs = model.generate(prompt, 5, exhaustive, return_log_probs=True)
    _, greedy_log_probs = model.generate(prompt, 5, return_log_probs=True)
    assert (beam[:, :3] == prompt).all() and (log_probs >= greedy_log_probs - 1e-5).all()
    pairs = np.stack(np.meshgrid(np.arange(40), np.arange(40), indexing="ij"), -1).reshape(-1, 2)
    for row in range(2):  # the best of all 1,600 continuations, scored by a full pass
        candidates = np.concatenate([np.repeat(prompt[row : row + 1], 1600, 0), pairs], axis=1)
        scores = tf.nn.log_softmax(model(candidates)[:, 2:4], axis=-1).numpy()
        scores = np.take_along_axis(scores, pairs[:, :, None], -1).sum(axis=(1, 2))
        best = np.argmax(scores)
        assert (beam[row, 3:] == pairs[best]).all() and abs(scores[best] - log_probs[row]) < 1e-4


def test_no_gradient_reaches_the_memory():
    model, ids = _model(), _ids(8)
    _, memories = model.call_segment(ids[:, :4])
    memories = [tf.Variable(m) for m in memories]
    with tf.GradientTape() as tape:
        logits, _ = model.call_segment(ids[:, 4:], memories)
        loss = tf.reduce_sum(logits)
    assert all(g is None for g in tape.gradient(loss, memories))


def test_fit_and_round_trip(tmp_path):
    model, ids = _model(), _ids(13)
    model.compile(optimizer=keras.optimizers.Adam(1e-2))
    history = model.fit(ids[:, :12], ids[:, 1:], epochs=4, verbose=0).history
    assert history["loss"][-1] < history["loss"][0]
    path = str(tmp_path / "xl.keras")
    model.save(path)
    reloaded = keras.saving.load_model(path)
    assert reloaded.get_config() == model.get_config()
    assert max_abs_diff(reloaded(ids[:, :12]), model(ids[:, :12])) < 1e-6


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"memory_length": -1}, "memory_length"),
        ({"segment_length": 0}, "segment_length"),
        ({"hidden_dim": 15, "num_heads": 3}, "even `hidden_dim`"),
        ({"dropout": 1.5}, "dropout"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        _model(**kwargs)


def test_bad_memories_and_streams_are_named():
    model = _model()
    with pytest.raises(ValueError, match="memories"):
        model.call_segment(_ids(4), [np.zeros((2, 4, 16), "float32")])
    with pytest.raises(ValueError, match="num_streams"):
        model.stream_perplexity(np.arange(10), num_streams=6)
    with pytest.raises(ValueError, match="max_length"):
        model.generate(_ids(4), 4)
    with pytest.raises(ValueError, match="prompt"):
        model.generate([[1, 0, 2]], 6)  # padding inside a row
    with pytest.raises(ValueError, match="strategy"):
        model.generate(_ids(4), 6, strategy="nucleus")
