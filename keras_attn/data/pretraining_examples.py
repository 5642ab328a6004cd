"""The BERT pre-training input pipeline: sentence pairs, then dynamic masking."""

import tensorflow as tf

from keras_attn.api_export import keras_attn_export
from keras_attn.data.sentence_pairs import _CHUNK


@keras_attn_export("keras_attn.data.bert_pretraining_dataset")
def bert_pretraining_dataset(sampler, masker, batch_size, seed=0, shuffle=True):
    """`(x, y, sample_weight)` batches for `BertPretrainer.fit`, masked anew each epoch.

    Pairs come from `sampler` (`SentencePairSampler`), masks from `masker`
    (`MaskedLMMasker`), both with stateless randomness driven by `seed`, so a run is
    reproducible and each epoch sees new pairs and new masks ("dynamic masking").

    Args:
        sampler: a `SentencePairSampler`.
        masker: a `MaskedLMMasker`.
        batch_size: examples per batch (the last partial batch is dropped, so every
            batch has a static shape).
        seed: int seed of the pipeline.
        shuffle: shuffle the anchors each epoch.

    Returns:
        A `tf.data.Dataset` of `(x, y, sample_weight)`: `x` has `token_ids`,
        `segment_ids`, `padding_mask`, `masked_positions`; `y` has `mlm_logits`
        (original ids) and `nsp_logits`/`sop_logits` (labels); `sample_weight` has
        the masked-LM weights and ones for the sentence head.

    Example:

    >>> from keras_attn.data import (MaskedLMMasker, SentencePairSampler,
    ...     WordPieceTokenizer, bert_pretraining_dataset)
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "."]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=12)
    >>> sampler = SentencePairSampler(tokenizer, [["a b .", "c a ."], ["b b .", "c c ."]])
    >>> masker = MaskedLMMasker(len(vocab), tokenizer.mask_id, tokenizer.special_token_ids,
    ...                         max_predictions_per_seq=2)
    >>> x, y, w = next(iter(bert_pretraining_dataset(sampler, masker, batch_size=1)))
    >>> sorted(x), sorted(y)
    (['masked_positions', 'padding_mask', 'segment_ids', 'token_ids'], ['mlm_logits', 'nsp_logits'])
    """
    return _training_examples(sampler, masker, seed, shuffle, batch_size).prefetch(tf.data.AUTOTUNE)


@keras_attn_export("keras_attn.data.bert_pretraining_example")
def bert_pretraining_example(sampler, masker):
    """`(anchor, seed) -> (x, y, sample_weight)`: one masked sentence pair, or a batch of
    them from a `(batch,)` vector of anchors (made at once, vectorised), for
    `step_batches` / `fixed_batches` (resumable and fixed-evaluation pipelines; pass
    `batched=True` there for the vectorised form).

    Example:

    >>> from keras_attn.data import (MaskedLMMasker, SentencePairSampler, WordPieceTokenizer,
    ...     bert_pretraining_example, fixed_batches)
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "."]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=12)
    >>> sampler = SentencePairSampler(tokenizer, [["a b .", "c a ."], ["b b .", "c c ."]])
    >>> masker = MaskedLMMasker(len(vocab), tokenizer.mask_id, tokenizer.special_token_ids,
    ...                         max_predictions_per_seq=2)
    >>> example = bert_pretraining_example(sampler, masker)
    >>> x, y, w = next(iter(fixed_batches(len(sampler.anchors), example, batch_size=2)))
    >>> x["token_ids"].shape, y["nsp_logits"].shape
    (TensorShape([2, 12]), TensorShape([2]))
    >>> batches = fixed_batches(len(sampler.anchors), example, batch_size=2, batched=True)
    >>> x, y, w = next(iter(batches))
    >>> x["token_ids"].shape, w["mlm_logits"].shape
    (TensorShape([2, 12]), TensorShape([2, 2]))
    """
    head = f"{sampler.objective}_logits"

    def example(anchor, seed):
        pair_seed, masking_seed = tf.unstack(
            tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 2)
        )
        pair = sampler(tf.cast(anchor, tf.int32), pair_seed)
        return _masked(pair, masker(pair["token_ids"], masking_seed), head)

    return example


@keras_attn_export("keras_attn.data.electra_pretraining_example")
def electra_pretraining_example(sampler, masker):
    """`(anchor, seed) -> x`: `bert_pretraining_example`'s masked pair as
    `ElectraPretrainer` takes it, the masked-LM targets (`masked_ids`,
    `masked_weights`) among the inputs and no sentence label (use a sampler with
    `objective="none"`: B is the true continuation).

    Example:

    >>> from keras_attn.data import (MaskedLMMasker, SentencePairSampler, WordPieceTokenizer,
    ...     electra_pretraining_example, fixed_batches)
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "."]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=12)
    >>> sampler = SentencePairSampler(
    ...     tokenizer, [["a b .", "c a ."], ["b b .", "c c ."]], objective="none")
    >>> masker = MaskedLMMasker(len(vocab), tokenizer.mask_id, tokenizer.special_token_ids,
    ...     max_predictions_per_seq=2)
    >>> example = electra_pretraining_example(sampler, masker)
    >>> x = next(iter(fixed_batches(2, example, batch_size=2, batched=True)))
    >>> sorted(x)  # doctest: +NORMALIZE_WHITESPACE
    ['masked_ids', 'masked_positions', 'masked_weights', 'padding_mask', 'segment_ids',
     'token_ids']
    """
    bert_example = bert_pretraining_example(sampler, masker)

    def example(anchor, seed):
        x, y, weights = bert_example(anchor, seed)
        return {**x, "masked_ids": y["mlm_logits"], "masked_weights": weights["mlm_logits"]}

    return example


def _masked(pair, masked, head):
    x = {
        "token_ids": masked["token_ids"],
        "segment_ids": pair["segment_ids"],
        "padding_mask": pair["padding_mask"],
        "masked_positions": masked["masked_positions"],
    }
    y = {"mlm_logits": masked["masked_ids"]}
    weights = {"mlm_logits": masked["masked_weights"]}
    if head != "none_logits":  # a sampler without a sentence objective: masked LM alone
        y[head] = pair["label"]
        weights[head] = tf.ones_like(pair["label"], tf.float32)
    return x, y, weights


def _training_examples(sampler, masker, seed, shuffle, batch_size=None):
    """`(x, y, sample_weight)`: pairs from `sampler`, masks from `masker`, made and
    masked a batch at a time (vectorised); batches of `batch_size` (the partial one
    dropped), or single examples when it is `None`."""
    head = f"{sampler.objective}_logits"
    masking_seeds = tf.data.Dataset.random(seed=seed + 1, rerandomize_each_iteration=True).batch(2)
    # For single examples, pairs come (and are masked) in the sampler's chunks, none dropped.
    pairs = sampler.dataset(
        seed=seed,
        shuffle=shuffle,
        batch_size=batch_size or _CHUNK,
        drop_remainder=batch_size is not None,
    )
    examples = tf.data.Dataset.zip(pairs, masking_seeds).map(
        lambda pair, masking_seed: _masked(pair, masker(pair["token_ids"], masking_seed), head),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=True,
    )
    return examples if batch_size else examples.unbatch()


# Google's create_pretraining_data.py feature names: files either side writes, both read.
_INT_FEATURES = {
    "input_ids": ("x", "token_ids"),
    "input_mask": ("x", "padding_mask"),
    "segment_ids": ("x", "segment_ids"),
    "masked_lm_positions": ("x", "masked_positions"),
    "masked_lm_ids": ("y", "mlm_logits"),
}


@keras_attn_export("keras_attn.data.write_pretraining_tfrecords")
def write_pretraining_tfrecords(sampler, masker, directory, num_shards=4, dupe_factor=1, seed=0):
    """Static masking: pairs and masks made once, written to sharded TFRecord files.

    The original BERT's recipe ("we duplicated the training data 10 times so that
    each sequence is masked in 10 different ways", RoBERTa's description of it):
    `dupe_factor` passes over the corpus, each with new pairs and new masks,
    spread round-robin over `num_shards` files named
    `pretraining-SSSSS-of-NNNNN.tfrecord`. The records are `tf.train.Example`s
    with the feature names of Google's `create_pretraining_data.py`
    (`input_ids`, `input_mask`, `segment_ids`, `masked_lm_positions`,
    `masked_lm_ids`, `masked_lm_weights`, `next_sentence_labels`), so files made
    by either tool feed the other's reader. Read them back with
    `pretraining_tfrecord_dataset`.

    Args:
        sampler: a `SentencePairSampler`.
        masker: a `MaskedLMMasker`.
        directory: where the shards go (created if missing).
        num_shards: number of files.
        dupe_factor: passes over the corpus (each anchor sentence once per pass).
        seed: int seed of pairs and masks.

    Returns:
        The list of shard paths, in order.

    Example:

    >>> import tempfile
    >>> from keras_attn.data import (MaskedLMMasker, SentencePairSampler, WordPieceTokenizer,
    ...     pretraining_tfrecord_dataset, write_pretraining_tfrecords)
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "."]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=12)
    >>> sampler = SentencePairSampler(tokenizer, [["a b .", "c a ."], ["b b .", "c c ."]])
    >>> masker = MaskedLMMasker(len(vocab), tokenizer.mask_id, tokenizer.special_token_ids,
    ...                         max_predictions_per_seq=2)
    >>> folder = tempfile.mkdtemp()
    >>> paths = write_pretraining_tfrecords(sampler, masker, folder, num_shards=2, dupe_factor=3)
    >>> [p.rsplit("/", 1)[1] for p in paths]
    ['pretraining-00000-of-00002.tfrecord', 'pretraining-00001-of-00002.tfrecord']
    >>> x, y, w = next(iter(pretraining_tfrecord_dataset(paths, batch_size=3)))
    >>> x["token_ids"].shape, y["nsp_logits"].shape
    (TensorShape([3, 12]), TensorShape([3]))
    """
    import os

    from keras_attn.argument_checks import check_positive_int

    check_positive_int("num_shards", num_shards)
    check_positive_int("dupe_factor", dupe_factor)
    os.makedirs(directory, exist_ok=True)
    paths = [
        os.path.join(str(directory), f"pretraining-{i:05d}-of-{num_shards:05d}.tfrecord")
        for i in range(num_shards)
    ]
    head = f"{sampler.objective}_logits"
    examples = _training_examples(sampler, masker, seed, shuffle=True).batch(256)
    writers = [tf.io.TFRecordWriter(path) for path in paths]
    count = 0
    try:
        for _ in range(dupe_factor):  # each iteration draws new pairs and masks
            for x, y, w in examples:
                arrays = {
                    name: (x if part == "x" else y)[key].numpy()
                    for name, (part, key) in _INT_FEATURES.items()
                }
                weights = w["mlm_logits"].numpy()
                # Masked LM alone (objective "none"): the records keep the field, label 0.
                labels = y[head].numpy() if head in y else [0] * len(weights)
                for i in range(len(labels)):
                    feature = {name: _int64s(values[i]) for name, values in arrays.items()}
                    feature["masked_lm_weights"] = tf.train.Feature(
                        float_list=tf.train.FloatList(value=weights[i])
                    )
                    feature["next_sentence_labels"] = _int64s([labels[i]])
                    example = tf.train.Example(features=tf.train.Features(feature=feature))
                    writers[count % num_shards].write(example.SerializeToString())
                    count += 1
    finally:
        for writer in writers:
            writer.close()
    return paths


def _int64s(values):
    return tf.train.Feature(int64_list=tf.train.Int64List(value=[int(v) for v in values]))


@keras_attn_export("keras_attn.data.pretraining_tfrecord_dataset")
def pretraining_tfrecord_dataset(
    files,
    batch_size,
    sequence_length=None,
    max_predictions_per_seq=None,
    objective="nsp",
    shuffle=True,
    seed=0,
    shuffle_buffer=10_000,
):
    """Reads pre-training TFRecords (ours or Google's) as `BertPretrainer` batches.

    Files are listed (and shuffled), read `interleave`d in parallel, examples
    shuffled in a buffer, parsed in batches, and prefetched; the last partial batch
    is dropped so every batch has a static shape.

    Args:
        files: a glob pattern, a directory (all its `*.tfrecord` files) or a list
            of paths.
        batch_size: examples per batch.
        sequence_length: `input_ids` length; `None` reads it from the first record.
        max_predictions_per_seq: `masked_lm_positions` length; `None`: from the
            first record.
        objective: `"nsp"` or `"sop"`: names the sentence head's label and weight.
        shuffle: shuffle files and examples (reshuffled every epoch).
        seed: seed of the shuffles.
        shuffle_buffer: examples in the shuffle buffer.

    Returns:
        A `tf.data.Dataset` of `(x, y, sample_weight)`, as `bert_pretraining_dataset`.

    Example:

    >>> from keras_attn.data import pretraining_tfrecord_dataset
    >>> pretraining_tfrecord_dataset("no/such/dir/*.tfrecord", batch_size=8)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    ValueError: Expected pre-training TFRecord files. Received: files=... (matches nothing)
    """
    import os

    if objective not in ("nsp", "sop"):
        raise ValueError(
            f"Expected `objective` in ('nsp', 'sop'). Received: objective={objective!r}"
        )
    if isinstance(files, (str, os.PathLike)):
        pattern = str(files)
        if os.path.isdir(pattern):
            pattern = os.path.join(pattern, "*.tfrecord")
        paths = sorted(tf.io.gfile.glob(pattern))
    else:
        paths = [str(p) for p in files]
    if not paths:
        raise ValueError(
            f"Expected pre-training TFRecord files. Received: files={files!r} (matches nothing)"
        )
    if sequence_length is None or max_predictions_per_seq is None:
        first = tf.train.Example.FromString(next(iter(tf.data.TFRecordDataset(paths[:1]))).numpy())
        features = first.features.feature
        sequence_length = sequence_length or len(features["input_ids"].int64_list.value)
        max_predictions_per_seq = max_predictions_per_seq or len(
            features["masked_lm_positions"].int64_list.value
        )
    spec = {
        name: tf.io.FixedLenFeature([sequence_length], tf.int64)
        for name in ("input_ids", "input_mask", "segment_ids")
    }
    spec.update(
        {
            name: tf.io.FixedLenFeature([max_predictions_per_seq], tf.int64)
            for name in ("masked_lm_positions", "masked_lm_ids")
        }
    )
    spec["masked_lm_weights"] = tf.io.FixedLenFeature([max_predictions_per_seq], tf.float32)
    spec["next_sentence_labels"] = tf.io.FixedLenFeature([1], tf.int64)
    head = f"{objective}_logits"

    def parse(records):
        parsed = tf.io.parse_example(records, spec)
        x = {
            key: tf.cast(parsed[name], tf.int32)
            for name, (part, key) in _INT_FEATURES.items()
            if part == "x"
        }
        y = {
            "mlm_logits": tf.cast(parsed["masked_lm_ids"], tf.int32),
            head: tf.cast(parsed["next_sentence_labels"][:, 0], tf.int32),
        }
        w = {
            "mlm_logits": parsed["masked_lm_weights"],
            head: tf.ones_like(parsed["masked_lm_weights"][:, 0]),
        }
        return x, y, w

    dataset = tf.data.Dataset.from_tensor_slices(paths)
    if shuffle:
        dataset = dataset.shuffle(len(paths), seed=seed, reshuffle_each_iteration=True)
    dataset = dataset.interleave(
        tf.data.TFRecordDataset,
        cycle_length=min(len(paths), 8),
        num_parallel_calls=tf.data.AUTOTUNE,
        deterministic=not shuffle,
    )
    if shuffle:
        dataset = dataset.shuffle(shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
    return (
        dataset.batch(batch_size, drop_remainder=True)
        .map(parse, num_parallel_calls=tf.data.AUTOTUNE)
        .prefetch(tf.data.AUTOTUNE)
    )


def xlnet_pretraining_example(sampler, masker):
    """`(anchor, seed) -> x`: an unmasked sentence pair (`token_ids`, `segment_ids`,
    `padding_mask`) for `XLNetPretrainer`, which draws its own factorisation orders
    (`masker` is unused: XLNet masks nothing)."""

    def example(anchor, seed):
        pair = sampler(tf.cast(anchor, tf.int32), seed)
        return {name: pair[name] for name in ("token_ids", "segment_ids", "padding_mask")}

    return example
