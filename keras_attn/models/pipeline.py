"""Task models that take strings: `fit`, `evaluate` and `predict` map the model's
preprocessor over the data, as keras-hub's tasks do.

A task model with a `preprocessor` (a `keras_attn.models.Preprocessor`, attached by
`from_preset` or given to the constructor) turns raw text into its inputs inside a
`tf.data` pipeline (`keras_attn.data.string_datasets`): lists, arrays and tensors of
strings, a pair of texts as a tuple `(texts, pairs)`, or a batched `tf.data.Dataset`
of strings. Data that holds no strings (token ids, as before) goes to Keras untouched,
so `preprocessor=None` and token-id inputs keep today's interface. TensorFlow is
imported only when strings arrive (the tokenizers run in its graph); the model itself
trains on any backend.
"""

import keras
import numpy as np


class PipelineMixin:
    """`fit` / `evaluate` / `predict` / `predict_on_batch` on strings through
    `self.preprocessor`; everything else as `keras.Model`'s."""

    preprocessor = None

    def preprocessor_config(self):
        """The config entry of the preprocessor (none without one): `get_config`'s."""
        if self.preprocessor is None:
            return {}
        return {"preprocessor": keras.saving.serialize_keras_object(self.preprocessor)}

    @staticmethod
    def with_preprocessor(config):
        """`config` with its preprocessor entry deserialized: `from_config`'s."""
        config = dict(config)
        if config.get("preprocessor") is not None:
            import keras_attn.models.preprocessors  # noqa: F401  (registers them; TensorFlow)

            config["preprocessor"] = keras.saving.deserialize_keras_object(config["preprocessor"])
        return config

    def label_classes(self):
        """How many classes `fit`'s and `evaluate`'s integer labels range over (`None`:
        labels of another kind, not checked)."""
        return None

    def _check_data(self, x, y=None, method="fit"):
        """A `ValueError` for an empty `x` (Keras fails on one with `KeyError: 'pop from
        an empty set'`), and, where the compiled loss is a sparse one (the tasks'
        default), for labels that are not ids below `label_classes()`: strings, NaN,
        fractions, negatives, ids past the last class, which would reach the loss as
        graph errors or be truncated. Soft or one-hot targets under another loss are
        the user's choice, not checked."""
        if _empty(x):
            raise ValueError(
                f"Expected at least one example in `x` for {method}(). Received: an empty x"
            )
        loss = getattr(self, "loss", None)
        name = (
            loss
            if isinstance(loss, str)
            else getattr(loss, "name", None) or getattr(loss, "__name__", "")
        )
        classes = self.label_classes()
        if y is not None and classes is not None and "sparse" in str(name):
            check_labels(y, classes)

    def _takes_strings(self, x):
        if self.preprocessor is None:
            return False
        from keras_attn.data.string_datasets import holds_strings

        return holds_strings(x)

    def fit(
        self,
        x=None,
        y=None,
        batch_size=None,
        sample_weight=None,
        validation_split=0.0,
        validation_data=None,
        shuffle=True,
        validation_batch_size=None,
        **kwargs,
    ):
        self._check_data(x, y)
        if not self._takes_strings(x):
            return super().fit(
                x,
                y,
                batch_size=batch_size,
                sample_weight=sample_weight,
                validation_split=validation_split,
                validation_data=validation_data,
                shuffle=shuffle,
                validation_batch_size=validation_batch_size,
                **kwargs,
            )
        from keras_attn.data.string_datasets import preprocessed, split_off

        if validation_split:
            if validation_data is not None:
                raise ValueError(
                    "Expected `validation_split` or `validation_data`, not both. Received: "
                    f"validation_split={validation_split} with validation_data"
                )
            (x, y, sample_weight), validation = split_off(validation_split, x, y, sample_weight)
            validation_data = tuple(part for part in validation if part is not None)
        data = preprocessed(self.preprocessor, x, y, sample_weight, batch_size, shuffle=shuffle)
        if validation_data is not None:
            validation_data = self._validation(validation_data, validation_batch_size or batch_size)
        # Shuffled (or not) in the dataset: Keras's `shuffle` does not apply to one.
        return super().fit(data, validation_data=validation_data, shuffle=False, **kwargs)

    def _validation(self, data, batch_size):
        from keras_attn.data.string_datasets import holds_strings, preprocessed

        if isinstance(data, tuple):
            x, y, sample_weight = keras.utils.unpack_x_y_sample_weight(data)
        else:
            x, y, sample_weight = data, None, None
        if not holds_strings(x):
            return data
        batched = hasattr(x, "element_spec")  # a tf.data.Dataset: batched already
        return preprocessed(self.preprocessor, x, y, sample_weight, None if batched else batch_size)

    def evaluate(self, x=None, y=None, batch_size=None, sample_weight=None, **kwargs):
        self._check_data(x, y, "evaluate")
        if not self._takes_strings(x):
            return super().evaluate(
                x, y, batch_size=batch_size, sample_weight=sample_weight, **kwargs
            )
        from keras_attn.data.string_datasets import preprocessed

        data = preprocessed(self.preprocessor, x, y, sample_weight, batch_size)
        return super().evaluate(data, **kwargs)

    def predict(self, x, batch_size=None, **kwargs):
        self._check_data(x, method="predict")
        if not self._takes_strings(x):
            return super().predict(x, batch_size=batch_size, **kwargs)
        from keras_attn.data.string_datasets import preprocessed

        return super().predict(preprocessed(self.preprocessor, x, batch_size=batch_size), **kwargs)

    def predict_on_batch(self, x):
        self._check_data(x, method="predict_on_batch")
        if not self._takes_strings(x):
            return super().predict_on_batch(x)
        inputs, _, _ = keras.utils.unpack_x_y_sample_weight(self.preprocessor(x))
        if keras.config.backend() != "tensorflow":
            inputs = keras.tree.map_structure(lambda t: t.numpy(), inputs)
        return super().predict_on_batch(inputs)

    def export(self, filepath, format=None, **options):
        """With a preprocessor: our raw-text export of `format` (`"saved_model"`, the
        default, `"onnx"`, `"openvino"`, `"litert"`; `keras_attn.export.export_model`),
        its tokenizer inside (`labels=` names a classifier's classes). Without one,
        Keras's `Model.export` (token ids in; its formats, `"tf_saved_model"` by default)."""
        if self.preprocessor is None:
            keras_format = {} if format is None else {"format": format}
            return super().export(filepath, **keras_format, **options)
        from keras_attn.export import export_model

        options = {**self.preprocessor.export_options(self), **options}
        return export_model(
            self, self.preprocessor.tokenizer, filepath, format or "saved_model", **options
        )


def _empty(x):
    """Whether `x` (strings, a pair of them as a tuple, arrays, a dict of arrays) holds
    no example: Keras would fail on it with a `KeyError` from an empty set."""
    if isinstance(x, dict):
        return bool(x) and any(_empty(value) for value in x.values())
    if isinstance(x, tuple) and x and not isinstance(x[0], str | bytes):
        return any(_empty(value) for value in x)
    if isinstance(x, list | tuple):
        return len(x) == 0
    shape = getattr(x, "shape", None)
    return shape is not None and len(shape) > 0 and shape[0] == 0


def _leaves(y):
    """The labels in `y` (an array, a tensor, a list, lists of lists) as one flat array."""
    if hasattr(y, "flat_values"):  # a tf.RaggedTensor
        y = y.flat_values
    if hasattr(y, "numpy"):
        y = y.numpy()
    if isinstance(y, np.ndarray) and y.dtype != object:
        return y.reshape(-1)
    flat = []
    pending = [y]
    while pending:
        value = pending.pop()
        if isinstance(value, list | tuple | np.ndarray):
            pending.extend(reversed(list(value)))
        else:
            flat.append(value)
    return np.asarray(flat, dtype=object)


def check_labels(y, classes):
    """A `TypeError` for labels that are not numbers, a `ValueError` for labels that are
    not integer ids in `[0, classes)` (NaN, fractions Keras's loss would truncate,
    negatives, ids past the last class), naming the first and where it is.

    Example:

    >>> from keras_attn.models.pipeline import check_labels
    >>> check_labels([0, 1, 1], 2)
    >>> check_labels([0, 2], 2)
    Traceback (most recent call last):
    ...
    ValueError: Expected class ids in [0, 2) in `y`. Received: 2 (label 1 of 2)
    """
    if isinstance(y, dict) or hasattr(y, "element_spec"):  # per output, or a dataset
        return
    labels = given = _leaves(y)
    if labels.dtype.kind in "USO":
        for index, label in enumerate(labels.tolist()):
            if isinstance(label, str | bytes) or not isinstance(label, int | float | np.number):
                raise TypeError(
                    f"Expected integer class ids in `y` (0 to {classes - 1}). Received: "
                    f"{label!r:.60} (label {index} of {len(labels)}): map label names to ids "
                    "first"
                )
        labels = labels.astype("float64")
    values = labels.astype("float64", copy=False)
    bad = ~np.isfinite(values) | (values != np.floor(values)) | (values < 0) | (values >= classes)
    if bad.any():
        index = int(np.argmax(bad))
        label = given[index].item() if hasattr(given[index], "item") else given[index]
        raise ValueError(
            f"Expected class ids in [0, {classes}) in `y`. Received: {label!r} "
            f"(label {index} of {len(labels)})"
        )
