"""language_model_dataset: windows of next-token pairs over documents."""

import numpy as np

from keras_attn.data import WordPieceTokenizer, language_model_dataset

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "."]


def test_every_token_is_a_label_once_and_windows_stay_in_their_document():
    tokenizer = WordPieceTokenizer(VOCAB)
    documents = [["a b .", "c ."], ["b b b b ."]]
    data = language_model_dataset(
        documents, tokenizer, sequence_length=3, batch_size=1, shuffle=False
    )
    rows = [
        (x.numpy()[0].tolist(), y.numpy()[0].tolist(), w.numpy()[0].tolist()) for x, y, w in data
    ]
    # Document 1: a b . [SEP] c . [SEP] -> windows of 4 overlapping by one.
    assert rows[0] == ([5, 6, 8], [6, 8, 3], [1, 1, 1])
    assert rows[1] == ([3, 7, 8], [7, 8, 3], [1, 1, 1])
    # Document 2 starts afresh: b b b b . [SEP]
    assert rows[2] == ([6, 6, 6], [6, 6, 6], [1, 1, 1])
    assert rows[3] == ([6, 8, 3], [8, 3, 0], [1, 1, 0])
    # Labels: every token of each document but its first.
    assert data.num_tokens == (7 - 1) + (6 - 1) == sum(sum(r[2]) for r in rows)


def test_shuffled_batches_have_static_shapes():
    tokenizer = WordPieceTokenizer(VOCAB)
    documents = [["a b c ."] * 20, ["c c ."] * 20]
    data = language_model_dataset(documents, tokenizer, sequence_length=8, batch_size=4, seed=1)
    shapes = {tuple(x.shape) for x, _, _ in data}
    assert shapes == {(4, 8)}
    first = [x.numpy() for x, _, _ in data]
    second = [x.numpy() for x, _, _ in data]
    assert not all(
        np.array_equal(a, b) for a, b in zip(first, second, strict=True)
    )  # reshuffled each epoch


def test_windows_are_what_the_dataset_batches():
    from keras_attn.data import WordPieceTokenizer, language_model_dataset, language_model_windows

    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "."]
    tokenizer = WordPieceTokenizer(vocab)
    documents = [["a b c .", "c b ."], ["b ."]]
    windows = language_model_windows(documents, tokenizer, 4)
    # Document 1: a b c . [SEP] c b . [SEP] -> windows of 5 overlapping by one; document 2 alone.
    assert windows.tolist() == [[5, 6, 7, 8, 3], [3, 7, 6, 8, 3], [6, 8, 3, 0, 0]]
    batches = list(language_model_dataset(documents, tokenizer, 4, batch_size=3, shuffle=False))
    ((inputs, labels, weights),) = batches
    assert (
        inputs.numpy().tolist() == windows[:, :-1].tolist()
        and labels.numpy().tolist() == windows[:, 1:].tolist()
    )
