"""Batch streams that can start at any step and still give the same batches."""

import tensorflow as tf

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int

_NO_END = 2**62  # epochs in an endless stream


@keras_attn_export("keras_attn.data.step_batches")
def step_batches(
    num_examples, example_fn, batch_size, seed=0, start_step=0, shuffle=True, batched=False
):
    """An endless stream of batches in which batch `k` does not depend on where it starts.

    Epoch `e` visits the `num_examples` examples in a permutation drawn from
    `(seed, e)`; the epochs are concatenated and cut into batches of `batch_size`
    (no example is dropped at an epoch end, every batch is full). Example `i` at
    stream position `p` is made by `example_fn(i, (seed, p))`, so its random choices
    (sentence pairs, masks) are fixed by its position. Starting at `start_step` skips
    indices, not work: a run resumed from a checkpoint at step `s` trains on exactly
    the batches the uninterrupted run saw after step `s`. Sharding across workers
    splits the data (`AutoShardPolicy.DATA`).

    With `batched=True`, `example_fn` makes a whole batch in one (vectorised) call:
    `example_fn(indices, (seed, p))` with the `(batch_size,)` indices of the batch
    and `p` the stream position of its first example, so batch `k` is still fixed
    by `(seed, k)` wherever the stream starts.

    Args:
        num_examples: examples in one epoch.
        example_fn: `(index, seed)` -> one example (a nest of tensors); `index` is
            an int64 scalar, `seed` an int64 `(2,)` tensor for stateless random ops.
        batch_size: examples per batch (the global batch under a strategy).
        seed: int seed of the order and of every example's randomness.
        start_step: the first batch to produce.
        shuffle: a new permutation every epoch (else the natural order).
        batched: `example_fn` takes a vector of indices and returns a batch.

    Returns:
        An endless `tf.data.Dataset` of batches.

    Example:

    >>> from keras_attn.data import step_batches
    >>> def make(start):
    ...     return step_batches(10, lambda i, seed: i, batch_size=4, seed=0, start_step=start)
    >>> whole = [b.numpy().tolist() for b in make(0).take(5)]
    >>> resumed = [b.numpy().tolist() for b in make(3).take(2)]
    >>> resumed == whole[3:], sorted(sum(whole[:5], [])[:10]) == list(range(10))
    (True, True)
    >>> batched = step_batches(10, lambda i, seed: i, batch_size=4, seed=0, batched=True)
    >>> [b.numpy().tolist() for b in batched.take(5)] == whole
    True
    """
    check_positive_int("num_examples", num_examples)
    check_positive_int("batch_size", batch_size)
    if isinstance(start_step, bool) or not isinstance(start_step, int) or start_step < 0:
        raise ValueError(
            f"Expected `start_step` to be an integer >= 0. Received: start_step={start_step!r}"
        )
    first_epoch, offset = divmod(start_step * batch_size, num_examples)
    seed = tf.constant(seed, tf.int64)

    def epoch_items(epoch):
        indices = tf.range(num_examples, dtype=tf.int64)
        if shuffle:
            indices = tf.random.experimental.stateless_shuffle(
                indices, seed=tf.stack([seed, epoch])
            )
        positions = epoch * num_examples + tf.range(num_examples, dtype=tf.int64)
        return tf.data.Dataset.from_tensor_slices((indices, positions))

    items = tf.data.Dataset.range(first_epoch, _NO_END).flat_map(epoch_items).skip(offset)
    return _shard_by_data(
        _examples(items, example_fn, seed, batch_size, batched, drop_remainder=True)
    )


@keras_attn_export("keras_attn.data.fixed_batches")
def fixed_batches(
    num_examples, example_fn, batch_size, seed=0, batched=False, drop_remainder=False
):
    """All `num_examples` examples once, in order, with fixed randomness: an evaluation set
    that is the same at every evaluation (the last batch may be smaller, or, with
    `drop_remainder`, left out: every batch is then whole, as `keras.distribution` needs to
    split batches over processes). `example_fn` and `batched` as for `step_batches`.

    Example:

    >>> from keras_attn.data import fixed_batches
    >>> def tens(index, seed):  # one example (or, batched, a vector of them) per index
    ...     return index * 10
    >>> [b.numpy().tolist() for b in fixed_batches(5, tens, batch_size=2)]
    [[0, 10], [20, 30], [40]]
    >>> [b.numpy().tolist() for b in fixed_batches(5, tens, batch_size=2, batched=True)]
    [[0, 10], [20, 30], [40]]
    """
    check_positive_int("num_examples", num_examples)
    check_positive_int("batch_size", batch_size)
    seed = tf.constant(seed, tf.int64)
    items = tf.data.Dataset.range(num_examples).map(lambda index: (index, index))
    return _shard_by_data(_examples(items, example_fn, seed, batch_size, batched, drop_remainder))


def _examples(items, example_fn, seed, batch_size, batched, drop_remainder):
    """Batches of `example_fn` over `(index, position)` items: made one example at a
    time, or a batch at a time (seeded by its first position) when `batched`."""
    if batched:
        batches = items.batch(batch_size, drop_remainder=drop_remainder).map(
            lambda indices, positions: example_fn(indices, tf.stack([seed, positions[0]])),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
    else:
        batches = items.map(
            lambda index, position: example_fn(index, tf.stack([seed, position])),
            num_parallel_calls=tf.data.AUTOTUNE,
            deterministic=True,
        )
        batches = batches.batch(batch_size, drop_remainder=drop_remainder)
    if drop_remainder:  # every batch whole: say so in the shapes (keras.distribution reads them)
        batches = batches.map(
            lambda *batch: tf.nest.map_structure(
                lambda t: tf.ensure_shape(t, [batch_size] + t.shape[1:]),
                batch if len(batch) > 1 else batch[0],
            )
        )
    return batches.prefetch(tf.data.AUTOTUNE)


def _shard_by_data(dataset):
    # Generated from indices, not read from files: each worker keeps its share of batches.
    options = tf.data.Options()
    options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.DATA
    return dataset.with_options(options)
