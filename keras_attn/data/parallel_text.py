"""Parallel text for translation: pairs, held-out splits, teacher-forcing batches."""

import dataclasses
import logging

import numpy as np
import tensorflow as tf

from keras_attn.api_export import keras_attn_export

_log = logging.getLogger("keras_attn.data")


@keras_attn_export("keras_attn.data.ParallelTextData", serializable=False)
@dataclasses.dataclass
class ParallelTextData:
    """Sentence pairs; `groups` ties together the pairs that share a source sentence.

    A source sentence with several translations has one pair per translation and
    one group: splits keep a group on one side, so no test source is seen in
    training, and its translations become the test references.

    Args:
        sources: source sentences, one per pair.
        targets: target sentences, one per pair.
        groups: a hashable key per pair (the source sentence id).
        report: the `ReadReport` of the file read (None when built in memory).

    Call arguments:
        None: a record; `split()` holds out source sentences, `references()` gives
            each distinct source with all its translations.

    Example:

    >>> from keras_attn.data import ParallelTextData
    >>> data = ParallelTextData(["你好", "你好", "谢谢", "再见"],
    ...                         ["Hello", "Hi", "Thanks", "Bye"], [1, 1, 2, 3])
    >>> train, test = data.split(test_groups=1, seed=0)
    >>> len(train) + len(test), sorted(set(train.groups) & set(test.groups))
    (4, [])
    >>> data.references()[1]
    [['Hello', 'Hi'], ['Thanks'], ['Bye']]
    >>> data.subset([3, 0]).targets
    ['Bye', 'Hello']
    """

    sources: list
    targets: list
    groups: list
    report: object = None

    def __len__(self):
        return len(self.sources)

    def subset(self, indices):
        """The pairs at `indices` (in that order), e.g. `data.subset(range(400))` for a
        quick run; `report` is kept."""
        keep = [int(i) for i in indices]
        bad = [i for i in keep if not 0 <= i < len(self)]
        if bad:
            raise ValueError(
                f"Expected `indices` in [0, {len(self) - 1}]. Received out of range: {bad[:5]}"
            )

        def pick(values):
            return [values[i] for i in keep]

        return ParallelTextData(
            pick(self.sources), pick(self.targets), pick(self.groups), self.report
        )

    def split(self, test_groups=1000, seed=0):
        """`(train, test)` with `test_groups` source sentences (all their pairs) held out."""
        unique = sorted(set(self.groups), key=str)
        if not 0 < test_groups < len(unique):
            raise ValueError(
                f"Expected `test_groups` in [1, {len(unique) - 1}]. Received: "
                f"test_groups={test_groups}"
            )
        held_out = set(np.random.default_rng(seed).permutation(len(unique))[:test_groups].tolist())
        held_out = {unique[i] for i in held_out}
        test = [i for i, g in enumerate(self.groups) if g in held_out]
        train = [i for i, g in enumerate(self.groups) if g not in held_out]
        return self.subset(train), self.subset(test)

    def references(self):
        """`(sources, references)`: each distinct source once, with all its targets."""
        order, targets = {}, {}
        for source, target, group in zip(self.sources, self.targets, self.groups, strict=True):
            order.setdefault(group, source)
            targets.setdefault(group, []).append(target)
        return list(order.values()), [targets[g] for g in order]


@keras_attn_export("keras_attn.data.translation_dataset")
def translation_dataset(
    data,
    source_tokenizer,
    target_tokenizer,
    batch_size,
    max_length=64,
    shuffle=True,
    seed=0,
    bucket_boundaries=(8, 12, 16, 24, 32, 48),
    static_shapes=True,
):
    """Teacher-forcing batches for `TransformerSeq2Seq.fit`, bucketed by length.

    Both sides are tokenised once with tensorflow-text (`WordPieceTokenizer.tokenize`);
    the target becomes `[CLS] pieces [SEP]` (start and end), the decoder input is
    that without its last token and the labels without the first. Pairs longer
    than `max_length` on either side are left out and counted (logged, and in the
    returned dataset's `num_left_out`). Batches group pairs of similar length
    (`tf.data`'s `bucket_by_sequence_length`) and are padded with 0, to the bucket's
    boundary with `static_shapes` (and partial batches dropped: a few shapes, each
    compiled once under XLA) or else to the longest pair of the batch.

    Args:
        data: a `ParallelTextData`.
        source_tokenizer, target_tokenizer: `WordPieceTokenizer`s.
        batch_size: pairs per batch.
        max_length: longest source, and longest target with its start/end tokens.
        shuffle: shuffle the pairs each epoch (seeded).
        seed: shuffle seed.
        bucket_boundaries: length boundaries of the buckets.
        static_shapes: pad to bucket boundaries and drop partial batches.

    Returns:
        A `tf.data.Dataset` of `(x, y, sample_weight)`: `x` with
        `encoder_token_ids`, `decoder_token_ids`; `y` the next tokens; weights 1 on
        real tokens, 0 on padding. Attributes `num_pairs` and `num_left_out`.

    Example:

    >>> from keras_attn.data import ParallelTextData, WordPieceTokenizer, translation_dataset
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "你", "好", "hello", "!"]
    >>> tokenizer = WordPieceTokenizer(vocab, lowercase=False)
    >>> data = ParallelTextData(["你好"], ["hello !"], [0])
    >>> batches = translation_dataset(data, tokenizer, tokenizer, batch_size=1, static_shapes=False)
    >>> x, y, w = next(iter(batches))
    >>> [t.numpy().tolist() for t in (x["encoder_token_ids"], x["decoder_token_ids"], y)]
    [[[5, 6]], [[2, 7, 8]], [[7, 8, 3]]]
    """
    sources = source_tokenizer.tokenize(tf.constant(data.sources))
    targets = target_tokenizer.tokenize(tf.constant(data.targets))
    source_lengths = sources.row_lengths().numpy()
    target_lengths = targets.row_lengths().numpy() + 2
    keep = np.flatnonzero(
        (source_lengths <= max_length)
        & (target_lengths <= max_length)
        & (source_lengths > 0)
        & (target_lengths > 2)
    )
    left_out = len(data) - len(keep)
    if left_out:
        _log.warning(
            "translation_dataset: left out %d of %d pairs (empty, or longer than "
            "max_length=%d tokens)",
            left_out,
            len(data),
            max_length,
        )
    sources, targets = tf.gather(sources, keep), tf.gather(targets, keep)
    start, end = target_tokenizer.cls_id, target_tokenizer.sep_id
    # Dense rows plus lengths (padded_batch needs dense elements), cut back per pair.
    dataset = tf.data.Dataset.from_tensor_slices(
        (
            sources.to_tensor(),
            tf.cast(sources.row_lengths(), tf.int32),
            targets.to_tensor(),
            tf.cast(targets.row_lengths(), tf.int32),
        )
    ).map(lambda s, s_len, t, t_len: (s[:s_len], t[:t_len]))
    if shuffle:
        dataset = dataset.shuffle(len(keep), seed=seed, reshuffle_each_iteration=True)

    def bucket_length(source, target):
        return tf.maximum(tf.shape(source)[0], tf.shape(target)[0] + 2)

    boundaries = [b for b in bucket_boundaries if b < max_length] + [max_length + 1]
    dataset = dataset.bucket_by_sequence_length(
        bucket_length,
        boundaries,
        [batch_size] * (len(boundaries) + 1),
        pad_to_bucket_boundary=static_shapes,
        drop_remainder=static_shapes,
    )

    def teacher_forcing(source, target):
        batch = tf.shape(target)[0]
        bos = tf.fill([batch, 1], start)
        lengths = tf.reduce_sum(tf.cast(target != 0, tf.int32), axis=1)
        # [START] t1 .. tn [END], with END written right after each row's last piece.
        full = tf.concat([bos, target, tf.zeros([batch, 1], tf.int32)], axis=1)
        full = tf.tensor_scatter_nd_update(
            full, tf.stack([tf.range(batch), lengths + 1], axis=1), tf.fill([batch], end)
        )
        labels = full[:, 1:]
        x = {"encoder_token_ids": source, "decoder_token_ids": full[:, :-1]}
        return x, labels, tf.cast(labels != 0, tf.float32)

    dataset = dataset.map(teacher_forcing, num_parallel_calls=tf.data.AUTOTUNE)
    dataset = dataset.prefetch(tf.data.AUTOTUNE)
    dataset.num_pairs, dataset.num_left_out = len(keep), left_out
    return dataset
