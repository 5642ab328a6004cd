"""Parallel text: the Tatoeba reader, grouped splits, teacher-forcing batches."""

import numpy as np
import pytest

from keras_attn.data import (
    ParallelTextData,
    WordPieceTokenizer,
    tatoeba_zh_en,
    translation_dataset,
)

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "我",
    "們",
    "試",
    "看",
    "let",
    "'",
    "s",
    "try",
    "it",
    ".",
    "!",
]


@pytest.fixture(scope="module")
def tatoeba():
    return tatoeba_zh_en(log=False)


def test_tatoeba_pairs_and_groups(tatoeba):
    assert len(tatoeba) == 56578 and tatoeba.report.num_left_out == 0
    assert len(set(tatoeba.groups)) == 50779
    assert tatoeba.sources[0] == "我們試試看！" and tatoeba.targets[:3] == [
        "Let's try something.",
        "Let's do it.",
        "Let's try it.",
    ]


def test_split_keeps_each_source_on_one_side(tatoeba):
    train, test = tatoeba.split(test_groups=1000, seed=0)
    assert len(set(test.groups)) == 1000 and len(train) + len(test) == len(tatoeba)
    assert not set(train.groups) & set(test.groups)
    sources, references = test.references()
    assert len(sources) == 1000 and sum(map(len, references)) == len(test)
    assert any(len(r) > 1 for r in references)  # several translations: several references
    again, _ = tatoeba.split(test_groups=1000, seed=0)
    assert again.groups == train.groups
    with pytest.raises(ValueError, match="test_groups"):
        tatoeba.split(test_groups=0)


def test_subset_picks_pairs_in_order_and_rejects_bad_indices(tatoeba):
    part = tatoeba.subset(np.array([2, 0]))
    assert part.targets == [tatoeba.targets[2], tatoeba.targets[0]]
    assert part.groups == [tatoeba.groups[2], tatoeba.groups[0]] and part.report is tatoeba.report
    with pytest.raises(ValueError, match=r"`indices` in \[0, 56577\].*\[56578\]"):
        tatoeba.subset([0, len(tatoeba)])
    with pytest.raises(ValueError, match=r"\[-1\]"):
        tatoeba.subset([-1])


def test_teacher_forcing_batches():
    tokenizer = WordPieceTokenizer(VOCAB, lowercase=False)
    english = WordPieceTokenizer(VOCAB, lowercase=True)
    data = ParallelTextData(
        ["我們試試看", "我們", "看" * 50], ["let's try it.", "let's!", "try"], [1, 2, 3]
    )
    batches = translation_dataset(
        data,
        tokenizer,
        english,
        batch_size=2,
        max_length=10,
        shuffle=False,
        bucket_boundaries=(4, 8),
        static_shapes=False,
    )
    assert (batches.num_pairs, batches.num_left_out) == (
        2,
        1,
    )  # the 50-character source is too long
    found = {}
    for x, y, w in batches:
        source, decoder, y, w = (
            np.asarray(t) for t in (x["encoder_token_ids"], x["decoder_token_ids"], y, w)
        )
        assert decoder.shape == y.shape and np.array_equal(w, (y != 0).astype("float32"))
        for s_row, d_row, y_row in zip(source.tolist(), decoder.tolist(), y.tolist(), strict=True):
            found[tuple(t for t in s_row if t)] = ([t for t in d_row if t], [t for t in y_row if t])
    # "let's try it." -> decoder [CLS] let ' s try it . ; labels let ' s try it . [SEP]
    assert found[(5, 6, 7, 7, 8)] == ([2, 9, 10, 11, 12, 13, 14], [9, 10, 11, 12, 13, 14, 3])
    assert found[(5, 6)] == ([2, 9, 10, 11, 15], [9, 10, 11, 15, 3])


def test_static_shapes_are_the_bucket_boundaries():
    tokenizer = WordPieceTokenizer(VOCAB, lowercase=False)
    data = ParallelTextData(
        ["我們試試看", "我們", "看看", "我"], ["let's try it.", "let's!", "try", "it"], [1, 2, 3, 4]
    )
    batches = translation_dataset(
        data, tokenizer, tokenizer, batch_size=2, max_length=10, bucket_boundaries=(4, 8)
    )
    shapes = sorted(
        {
            (tuple(x["encoder_token_ids"].shape), tuple(x["decoder_token_ids"].shape))
            for x, _, _ in batches
        }
    )
    # Lengths max(source, target + 2): 8, 6, 3, 3. The two of length 3 fill the bucket
    # below 4: padded to 3, the decoder input one longer ([CLS] first). The others are
    # alone in their buckets: partial batches, dropped.
    assert shapes == [((2, 3), (2, 4))]


def test_detokenize_joins_pieces_punctuation_and_characters():
    tokenizer = WordPieceTokenizer(VOCAB, lowercase=False)
    ids = tokenizer.tokenize(["let's try it!", "我們試試看"]).to_tensor().numpy()
    ids = np.concatenate([np.full((2, 1), 2), ids, np.full((2, 1), 3)], axis=1)  # [CLS] .. [SEP]
    assert tokenizer.detokenize(ids) == ["let's try it!", "我們試試看"]
