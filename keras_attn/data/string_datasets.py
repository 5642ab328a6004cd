"""What a task model's `fit`, `evaluate` and `predict` do with strings: the data as a
batched `tf.data.Dataset` with the model's preprocessor mapped over it, in parallel and
prefetched, so the tokenizer runs in the input pipeline beside the training steps.

The structure rules are Keras's and `tf.data`'s: a tuple or a dict is structure (a pair
of texts is `(texts, pairs)`), a list or an array is one batch of values.
"""

import numpy as np
import tensorflow as tf

DEFAULT_BATCH_SIZE = 32  # Keras's own default for arrays


def holds_strings(data):
    """Whether `data` (a nest of arrays, lists, tensors, or a `tf.data.Dataset`) holds
    any strings: raw text for the preprocessor, not token ids."""
    if isinstance(data, tf.data.Dataset):
        return any(spec.dtype == tf.string for spec in tf.nest.flatten(data.element_spec))
    if isinstance(data, (tuple, dict)):
        values = data.values() if isinstance(data, dict) else data
        return any(holds_strings(value) for value in values)
    if isinstance(data, str | bytes):
        return True
    if isinstance(data, (tf.Tensor, tf.RaggedTensor)):
        return data.dtype == tf.string
    if isinstance(data, np.ndarray):
        return data.dtype.kind in "USO" and data.size > 0 and _first_is_text(data.flat)
    if isinstance(data, list):
        return bool(data) and _first_is_text(data)
    return False


def _first_is_text(values):
    for value in values:
        while isinstance(value, (list, tuple, np.ndarray)) and len(value):
            value = value[0]
        return isinstance(value, str | bytes)
    return False


def _map_values(data, fn):
    """`fn` over the values of `data`, where tuples and dicts are structure and anything
    else (a list included) is one value, as `from_tensor_slices` reads them."""
    if isinstance(data, tuple):
        return tuple(_map_values(value, fn) for value in data)
    if isinstance(data, dict):
        return {key: _map_values(value, fn) for key, value in data.items()}
    return fn(data)


def _slices(data):
    """What `from_tensor_slices` takes: arrays of Python objects (strings) as arrays of
    `str`, and lists of lists of different lengths (word lists, a tag per word) as
    RaggedTensors."""

    def sliceable(values):
        if isinstance(values, np.ndarray) and values.dtype.kind == "O":
            return values.astype(str)
        if isinstance(values, list) and values and isinstance(values[0], (list, tuple)):
            if len({len(row) for row in values}) > 1:
                return tf.ragged.constant(values)
        return values

    return _map_values(data, sliceable)


def _count(x):
    """Rows of `x`: of its first value, where tuples and dicts are structure and a
    list is one value (as `from_tensor_slices` reads them)."""
    while isinstance(x, (tuple, dict)):
        x = next(iter(x.values())) if isinstance(x, dict) else x[0]
    if isinstance(x, str | bytes):
        raise ValueError(
            "Expected a batch of strings (a list, an array). Received one string: "
            f"{x[:80]!r} (wrap it in a list)"
        )
    return int(x.shape[0]) if hasattr(x, "shape") else len(x)


def preprocessed(
    preprocessor, x, y=None, sample_weight=None, batch_size=None, shuffle=False, seed=None
):
    """`(x, y, sample_weight)` as a dataset of the model's inputs.

    Args:
        preprocessor: the model's preprocessor (a Keras layer: strings in).
        x: strings (a list, an array, a tensor; a pair as a tuple of two), or a batched
            `tf.data.Dataset` of `x` / `(x, y)` / `(x, y, sample_weight)`.
        y, sample_weight: arrays of the same length as `x` (not with a dataset).
        batch_size: rows per batch (default 32); not with a dataset (it is batched).
        shuffle: a new order every epoch (arrays only; a dataset keeps its own).
        seed: the shuffle's seed.

    Returns:
        A `tf.data.Dataset` of `x`, `(x, y)` or `(x, y, sample_weight)` batches.
    """
    autotune = tf.data.AUTOTUNE
    if isinstance(x, tf.data.Dataset):
        if y is not None or sample_weight is not None:
            raise ValueError(
                "Expected `y` and `sample_weight` inside the dataset when `x` is a "
                "tf.data.Dataset. Received: y or sample_weight as well"
            )
        if batch_size is not None:
            raise ValueError(
                "Expected no `batch_size` with a tf.data.Dataset (batch the dataset "
                f"itself). Received: batch_size={batch_size}"
            )
        dataset = x
    else:
        if batch_size is not None and (not isinstance(batch_size, int) or batch_size < 1):
            raise ValueError(f"Expected `batch_size` an int >= 1. Received: {batch_size!r}")
        parts = tuple(part for part in (x, y, sample_weight) if part is not None)
        if y is None and sample_weight is not None:
            raise ValueError("Expected `y` with `sample_weight`. Received: sample_weight only")
        counts = {_count(part) for part in parts}
        if len(counts) > 1:
            raise ValueError(
                "Expected `x`, `y` and `sample_weight` of one length. Received lengths "
                f"{sorted(counts)}"
            )
        dataset = tf.data.Dataset.from_tensor_slices(_slices(parts))
        if shuffle:
            dataset = dataset.shuffle(counts.pop(), seed=seed, reshuffle_each_iteration=True)
        dataset = dataset.batch(batch_size or DEFAULT_BATCH_SIZE)
    if getattr(preprocessor, "draws_masks", False):
        # Each batch's seed beside it: the same draws for the same seed, new ones each
        # epoch (a new iterator), whatever order the parallel map runs the batches in.
        seeds = tf.data.Dataset.random(seed=preprocessor.seed, rerandomize_each_iteration=True)
        dataset = tf.data.Dataset.zip((dataset, seeds))
        return dataset.map(_seeded(preprocessor), num_parallel_calls=autotune).prefetch(autotune)
    return dataset.map(_mapped(preprocessor), num_parallel_calls=autotune).prefetch(autotune)


def _mapped(preprocessor):
    """The function `Dataset.map` calls: an element's `(x, y, sample_weight)` through
    the preprocessor (an element of one part is `x` alone, whatever its structure)."""

    def apply(*element):
        if len(element) == 1:
            return preprocessor(element[0])
        return preprocessor(*element)

    return apply


def batch_seeds(seed, batches):
    """The first epoch's mask seeds of `preprocessed`'s first `batches` batches for a
    preprocessor of `seed`: what a hand-made pipeline passes to draw the same masks."""
    seeds = tf.data.Dataset.random(seed=seed, rerandomize_each_iteration=True).take(batches)
    return [_pair(s) for s in seeds]


def _pair(value):
    """One int64 of `Dataset.random` -> the `(2,)` seed of the stateless random ops."""
    return tf.stack([value, tf.constant(0, tf.int64)])


def _seeded(preprocessor):
    """`_mapped` for a preprocessor that draws masks: `(element, seed)` in."""

    def apply(element, seed):
        element = element if isinstance(element, tuple) else (element,)
        return preprocessor(*element, seed=_pair(seed))

    return apply


def split_off(fraction, *parts):
    """Keras's `validation_split`: the last `fraction` of every part (before any
    shuffling), as `(training parts, validation parts)`."""
    if not 0 < fraction < 1:
        raise ValueError(f"Expected `validation_split` in (0, 1). Received: {fraction!r}")
    if isinstance(parts[0], tf.data.Dataset):
        raise ValueError(
            "Expected arrays or lists with `validation_split` (a tf.data.Dataset cannot be "
            "split): give `validation_data`. Received: a tf.data.Dataset"
        )
    present = [part for part in parts if part is not None]
    count = _count(present[0])
    cut = int(count * (1 - fraction))
    if not 0 < cut < count:
        raise ValueError(
            f"validation_split={fraction} leaves no rows on one side of {count} examples"
        )

    def take(part, rows):
        if part is None:
            return None
        return _map_values(
            part, lambda values: (np.asarray(values) if isinstance(values, list) else values)[rows]
        )

    training = tuple(take(part, slice(0, cut)) for part in parts)
    validation = tuple(take(part, slice(cut, None)) for part in parts)
    return training, validation
