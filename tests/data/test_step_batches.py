"""Resumable batch streams: the same batches whatever step they start at."""

import numpy as np
import pytest

from keras_attn.data import (MaskedLMMasker, SentencePairSampler, WordPieceTokenizer, bert_pretraining_example,
                             fixed_batches, step_batches)


def _pretraining_example():
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + list("abcdefgh") + ["."]
    tokenizer = WordPieceTokenizer(vocab, sequence_length=16)
    documents = [[" ".join("abcdefgh"[(d + s + i) % 8] for i in range(3)) + " ." for s in range(5)]
                 for d in range(6)]
    sampler = SentencePairSampler(tokenizer, documents)
    masker = MaskedLMMasker(len(vocab), tokenizer.mask_id, tokenizer.special_token_ids, max_predictions_per_seq=3)
    return len(sampler.anchors), bert_pretraining_example(sampler, masker)


def _flatten(batch):
    x, y, w = batch
    return np.concatenate([x["token_ids"].numpy().ravel(), x["masked_positions"].numpy().ravel(),
                           y["nsp_logits"].numpy().ravel()])


def test_resumed_stream_equals_the_uninterrupted_one_across_epochs():
    count, example = _pretraining_example()
    whole = [_flatten(b) for b in step_batches(count, example, batch_size=4, seed=3).take(12)]
    for start in (1, 5, 7):  # inside the first epoch, at and past the epoch end (24 examples / 4)
        resumed = [_flatten(b) for b in step_batches(count, example, batch_size=4, seed=3, start_step=start).take(3)]
        for a, b in zip(whole[start:], resumed):
            np.testing.assert_array_equal(a, b)


def test_each_epoch_is_a_new_permutation_of_all_examples():
    batches = [b.numpy() for b in step_batches(10, lambda i, seed: i, batch_size=5, seed=0).take(6)]
    epochs = np.concatenate(batches).reshape(3, 10)
    for epoch in epochs:
        assert sorted(epoch) == list(range(10))
    assert not np.array_equal(epochs[0], epochs[1])


def test_fixed_batches_are_the_same_at_every_pass():
    count, example = _pretraining_example()
    dataset = fixed_batches(count, example, batch_size=5, seed=1)
    first, second = ([_flatten(b) for b in dataset] for _ in range(2))
    assert len(first) == 5  # 24 examples: 4 full batches and one of 4
    for a, b in zip(first, second):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("kwargs, name", [(dict(num_examples=0), "num_examples"), (dict(batch_size=0), "batch_size"),
                                          (dict(start_step=-1), "start_step")])
def test_bad_arguments_are_named(kwargs, name):
    arguments = dict(num_examples=10, example_fn=lambda i, seed: i, batch_size=2)
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=name):
        step_batches(**arguments)
