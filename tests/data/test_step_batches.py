"""Resumable batch streams: the same batches whatever step they start at."""

import functools

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import (
    MaskedLMMasker,
    SentencePairSampler,
    WordPieceTokenizer,
    bert_pretraining_example,
    fixed_batches,
    step_batches,
)


def _pretraining_example():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefgh") + ["."]
    tokenizer = WordPieceTokenizer(vocab, sequence_length=16)
    documents = [
        [" ".join("abcdefgh"[(d + s + i) % 8] for i in range(3)) + " ." for s in range(5)]
        for d in range(6)
    ]
    sampler = SentencePairSampler(tokenizer, documents)
    masker = MaskedLMMasker(
        len(vocab), tokenizer.mask_id, tokenizer.special_token_ids, max_predictions_per_seq=3
    )
    return len(sampler.anchors), bert_pretraining_example(sampler, masker)


def _flatten(batch):
    x, y, w = batch
    return np.concatenate(
        [
            x["token_ids"].numpy().ravel(),
            x["masked_positions"].numpy().ravel(),
            y["nsp_logits"].numpy().ravel(),
        ]
    )


@pytest.mark.slow
@pytest.mark.parametrize("batched", [False, True])
def test_resumed_stream_equals_the_uninterrupted_one_across_epochs(batched):
    count, example = _pretraining_example()
    make = functools.partial(step_batches, count, example, batch_size=4, seed=3, batched=batched)
    whole = [_flatten(b) for b in make().take(12)]
    for start in (1, 5, 7):  # inside the first epoch, at and past the epoch end (24 examples / 4)
        resumed = [_flatten(b) for b in make(start_step=start).take(3)]
        for a, b in zip(whole[start : start + 3], resumed, strict=True):
            np.testing.assert_array_equal(a, b)
    # Batches differ from one another: each has its own seed (pairs and masks).
    assert len({a.tobytes() for a in whole}) == len(whole)


def test_batched_examples_are_made_in_one_call_from_the_batch_indices_and_one_seed():
    calls = []

    def example(indices, seed):
        calls.append(indices.shape)
        return {"index": indices, "seed": tf.broadcast_to(seed, [tf.shape(indices)[0], 2])}

    batches = list(
        step_batches(6, example, batch_size=4, seed=7, shuffle=False, batched=True).take(3)
    )
    assert calls == [tf.TensorShape([4])]  # traced once, for whole batches
    assert [b["index"].numpy().tolist() for b in batches] == [
        [0, 1, 2, 3],
        [4, 5, 0, 1],
        [2, 3, 4, 5],
    ]
    # The seed of a batch is (seed, stream position of its first example).
    assert [b["seed"].numpy()[0].tolist() for b in batches] == [[7, 0], [7, 4], [7, 8]]
    fixed = list(fixed_batches(6, example, batch_size=4, seed=7, batched=True))
    assert [b["index"].numpy().tolist() for b in fixed] == [[0, 1, 2, 3], [4, 5]]
    assert [b["seed"].numpy()[0].tolist() for b in fixed] == [[7, 0], [7, 4]]


def test_each_epoch_is_a_new_permutation_of_all_examples():
    batches = [b.numpy() for b in step_batches(10, lambda i, seed: i, batch_size=5, seed=0).take(6)]
    epochs = np.concatenate(batches).reshape(3, 10)
    for epoch in epochs:
        assert sorted(epoch) == list(range(10))
    assert not np.array_equal(epochs[0], epochs[1])


@pytest.mark.parametrize("batched", [False, True])
def test_fixed_batches_are_the_same_at_every_pass(batched):
    count, example = _pretraining_example()
    dataset = fixed_batches(count, example, batch_size=5, seed=1, batched=batched)
    first, second = ([_flatten(b) for b in dataset] for _ in range(2))
    assert len(first) == 5  # 24 examples: 4 full batches and one of 4
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "kwargs, name",
    [
        (dict(num_examples=0), "num_examples"),
        (dict(batch_size=0), "batch_size"),
        (dict(start_step=-1), "start_step"),
    ],
)
def test_bad_arguments_are_named(kwargs, name):
    arguments = dict(num_examples=10, example_fn=lambda i, seed: i, batch_size=2)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=name):
        step_batches(**arguments)
    if name != "start_step":
        arguments.pop("start_step", None)
        with pytest.raises(ValueError, match=name):
            fixed_batches(**arguments)
