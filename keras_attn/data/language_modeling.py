"""Next-token batches for causal language models, from documents of sentences."""

import numpy as np
import tensorflow as tf

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.data.language_model_dataset")
def language_model_dataset(
    documents, tokenizer, sequence_length, batch_size, shuffle=True, seed=0, separator_id=None
):
    """`(token_ids, next_token_ids, sample_weight)` windows over tokenised documents.

    Each document's sentences are tokenised in the graph (tensorflow-text), joined
    with `separator_id` after every sentence (default: the tokenizer's `[SEP]`), and
    cut into consecutive windows of `sequence_length + 1` tokens (a document's last,
    shorter window is padded; windows never cross documents). Inputs are a window's
    first `sequence_length` tokens, labels the last `sequence_length`, weights 1 on
    real labels.

    Args:
        documents: a list of documents, each a list of sentence strings.
        tokenizer: a `WordPieceTokenizer`.
        sequence_length: tokens per training sequence.
        batch_size: sequences per batch (the last partial batch is dropped).
        shuffle: shuffle the windows each epoch.
        seed: shuffle seed.
        separator_id: token id appended to every sentence.

    Returns:
        A `tf.data.Dataset`; its `num_tokens` attribute counts the labels.

    Example:

    >>> from keras_attn.data import WordPieceTokenizer, language_model_dataset
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "."]
    >>> tokenizer = WordPieceTokenizer(vocab)
    >>> data = language_model_dataset([["a b .", "b a ."]], tokenizer, 4, 1, shuffle=False)
    >>> [t.numpy().tolist() for t in next(iter(data))]
    [[[5, 6, 7, 3]], [[6, 7, 3, 6]], [[1.0, 1.0, 1.0, 1.0]]]
    """
    windows = language_model_windows(documents, tokenizer, sequence_length, separator_id)
    dataset = tf.data.Dataset.from_tensor_slices(windows)
    if shuffle:
        dataset = dataset.shuffle(len(windows), seed=seed, reshuffle_each_iteration=True)

    def split(batch):
        labels = batch[:, 1:]
        return batch[:, :-1], labels, tf.cast(labels != tokenizer.pad_id, tf.float32)

    dataset = dataset.batch(batch_size, drop_remainder=True).map(split).prefetch(tf.data.AUTOTUNE)
    dataset.num_tokens = int((windows[:, 1:] != tokenizer.pad_id).sum())
    return dataset


@keras_attn_export("keras_attn.data.language_model_windows")
def language_model_windows(
    documents, tokenizer, sequence_length, separator_id=None, pad_id=None, start_id=None
):
    """The windows behind `language_model_dataset`: `(windows, sequence_length + 1)` int32.

    Each row holds `sequence_length + 1` consecutive tokens of one document
    (sentences joined by `separator_id`, default `[SEP]`; a document's last window
    padded with `pad_id`, default the tokenizer's); inputs are a row's first
    `sequence_length` tokens, labels its last. With `start_id` (a model trained with a
    start token before every text, as Gemma is) each row is that token and then
    `sequence_length` tokens. `tokenizer.tokenize` may give a ragged tensor or lists (a
    byte-level BPE's); it is called once, on every sentence.

    Example:

    >>> from keras_attn.data import WordPieceTokenizer, language_model_windows
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "."]
    >>> language_model_windows([["a b .", "b a ."]], WordPieceTokenizer(vocab), 4).tolist()
    [[5, 6, 7, 3, 6], [6, 5, 7, 3, 0]]
    """
    separator = tokenizer.sep_id if separator_id is None else separator_id
    pad_id = tokenizer.pad_id if pad_id is None else pad_id
    window = sequence_length + 1
    rows = []
    # One call for every sentence (a tokenizer's call costs far more than a sentence).
    sentences = [sentence for document in documents for sentence in document]
    pieces = tokenizer.tokenize(tf.constant(sentences)) if sentences else []
    pieces = iter(pieces.to_list() if hasattr(pieces, "to_list") else pieces)  # a BPE's: lists
    for document in documents:
        ids = [i for _ in document for i in [*next(pieces), separator]]
        # Consecutive windows overlapping by one token (or each after the start token), so
        # every token is a label once.
        for start in range(0, max(len(ids) - (start_id is None), 1), sequence_length):
            if start_id is None:
                chunk = ids[start : start + window]
            else:
                chunk = [start_id, *ids[start : start + sequence_length]]
            if len(chunk) > 1:
                rows.append(np.pad(chunk, (0, window - len(chunk)), constant_values=pad_id))
    return np.stack(rows).astype("int32")
