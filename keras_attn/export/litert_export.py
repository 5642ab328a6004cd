"""LiteRT (TensorFlow Lite) exports that take raw text: the tokenizer as TensorFlow Text's
TFLite custom operators (`FastBertNormalize`, `FastWordpieceTokenizeWithOffsets`,
`RaggedTensorToTensor`), the packing and the model as LiteRT's builtins, in one
`model.tflite` (TensorFlow, tensorflow-text; imported when first used). `litert_runner`
runs it with `ai-edge-litert`'s interpreter and TensorFlow Text's operator library,
without importing TensorFlow."""

import pathlib

import numpy as np  # noqa: F401  (the examples' np)

from keras_attn.api_export import keras_attn_export

# TensorFlow Text's registrars of the custom operators a LiteRT export uses.
CUSTOM_OPS = ("AddFastBertNormalize", "AddFastWordpieceTokenize", "AddRaggedTensorToTensor")


def serving_module(model, tokenizer, labels):
    """A `tf.Module` whose `serve(text)` is the SavedModel's `serving_default` for single
    texts written in operators LiteRT has: the tokenizer's own `FastBertTokenizer`
    (pieces cut to `sequence_length - 2`), `[CLS] pieces [SEP]` and the padding as
    dense arithmetic, the batch cut to its longest text."""
    import tensorflow as tf

    length = tokenizer.sequence_length
    names = tf.constant(labels)
    pad, cls, sep = tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id

    class Serving(tf.Module):
        def __init__(self):
            super().__init__()
            self.model, self.tokenizer = model, tokenizer._tokenizer
            # The converter freezes the variables the module tracks; Keras 3 tracks its
            # own, so the model's TensorFlow variables are listed here.
            self.weights = [weight.value for weight in model.weights]

        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            # An empty request is read as one empty text (the delegate cannot shape a
            # batch of none), the answers cut back to the rows asked for.
            asked = tf.shape(text)[:1]
            text = tf.cond(asked[0] > 0, lambda: text, lambda: tf.constant([""]))
            pieces = self.tokenizer.tokenize(text)  # (batch, pieces), ragged
            body = pieces.to_tensor(default_value=pad, shape=[None, length - 2])
            kept = tf.cast(tf.minimum(pieces.row_lengths(), length - 2), tf.int32)
            rows = tf.shape(text)[:1]
            edge = tf.fill(tf.concat([rows, [1]], 0), cls)
            ids = tf.concat([edge, body, tf.fill(tf.concat([rows, [1]], 0), pad)], axis=1)
            positions = tf.range(length)[None, :]
            ids = tf.where(positions == kept[:, None] + 1, sep, ids)
            mask = tf.cast(positions < kept[:, None] + 2, tf.int32)
            longest = tf.reduce_max(kept) + 2
            inputs = {
                "token_ids": ids[:, :longest],
                "segment_ids": tf.zeros_like(ids[:, :longest]),
                "padding_mask": mask[:, :longest],
            }
            logits = tf.cast(self.model(inputs, training=False), tf.float32)
            probabilities = tf.nn.softmax(logits)
            label_ids = tf.argmax(probabilities, axis=-1)
            label_ids = label_ids[: asked[0]]
            return {
                "probabilities": probabilities[: asked[0]],
                "label_ids": label_ids,
                "labels": tf.gather(names, label_ids),
            }

    return Serving()


@keras_attn_export("keras_attn.export.export_litert")
def export_litert(model, tokenizer, path, labels=None, quantize=None, text_pair=False):
    """Writes a classifier as one LiteRT (`.tflite`) model that takes raw text.

    Signature `serving_default`: input `text` (strings, `(batch,)`); outputs as the
    SavedModel's: `probabilities` `(batch, classes)`, `label_ids` and `labels`
    `(batch,)`. The tokenizer is the model's own `FastBertTokenizer` as TensorFlow Text's
    TFLite custom operators (register them with the interpreter:
    `keras_attn.export.litert_runner`, or TensorFlow Text's op library on a device), so
    the pieces are exactly the SavedModel's; everything else is LiteRT builtins.

    Args:
        model: a classifier whose family serves it with `"classifier"` signatures.
        tokenizer: its `WordPieceTokenizer`.
        path: the `.tflite` file to write.
        labels: the class names (default `"0"`, `"1"`, ...).
        quantize: `None`, or `"int8"`: LiteRT's dynamic-range quantization (int8
            weights, float activations; `tf.lite.Optimize.DEFAULT`).
        text_pair: must be False: pairs are refused so far.

    Returns:
        The path written.

    Raises:
        ValueError: for a model or tokenizer the LiteRT export cannot hold, named.

    Example:

    >>> import tempfile, pathlib
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.export import export_litert, litert_runner
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> tokenizer = WordPieceTokenizer(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "film"], sequence_length=8)
    >>> model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=7), num_classes=2)
    >>> path = export_litert(model, tokenizer, pathlib.Path(tempfile.mkdtemp()) / "m.tflite",
    ...                      labels=["bad", "good"])
    >>> answer = litert_runner(path)(text=np.array(["good film", "film"], dtype=object))
    >>> sorted(answer), answer["probabilities"].shape
    (['label_ids', 'labels', 'probabilities'], (2, 2))
    """
    import tensorflow as tf

    from keras_attn.export.file_checks import classifier_label_names

    names = classifier_label_names(
        model,
        tokenizer,
        labels,
        "LiteRT",
        "(TensorFlow Text's TFLite operators) ",
        quantize,
        text_pair=text_pair,
        pairs="the LiteRT export packs one text per row so far",
    )
    module = serving_module(model, tokenizer, names)
    serve = module.serve.get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([serve], module)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True  # TensorFlow Text's, registered when loading
    if quantize == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    flat = converter.convert()
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(flat)
    return path


def _text_operators():
    """TensorFlow Text's TFLite operator registrars, loaded without importing
    TensorFlow (its framework library is loaded as a shared library, which TensorFlow
    Text's kernels link against); in a process that imported TensorFlow, the ones
    `tensorflow_text` loaded (a second copy of the library crashed at exit)."""
    import ctypes
    import importlib.machinery
    import importlib.util
    import sys

    if "tensorflow" in sys.modules:  # loaded already: the registrar TensorFlow Text has
        from tensorflow_text.core.pybinds import tflite_registrar

        return [getattr(tflite_registrar, name) for name in CUSTOM_OPS]
    found = {name: importlib.util.find_spec(name) for name in ("tensorflow", "tensorflow_text")}
    missing = [name for name, spec in found.items() if spec is None]
    if missing:
        raise ImportError(
            f"a LiteRT export's tokenizer needs TensorFlow Text's operators: install "
            f"{' and '.join(n.replace('_', '-') for n in missing)}"
        )
    framework = pathlib.Path(found["tensorflow"].submodule_search_locations[0])
    ctypes.CDLL(str(framework / "libtensorflow_framework.so.2"), mode=ctypes.RTLD_GLOBAL)
    text = pathlib.Path(found["tensorflow_text"].submodule_search_locations[0])
    library = text / "core" / "pybinds" / "tflite_registrar.so"
    loader = importlib.machinery.ExtensionFileLoader("tflite_registrar", str(library))
    registrar = importlib.util.module_from_spec(
        importlib.util.spec_from_loader("tflite_registrar", loader)
    )
    loader.exec_module(registrar)
    return [getattr(registrar, name) for name in CUSTOM_OPS]


@keras_attn_export("keras_attn.export.litert_runner")
def litert_runner(path, threads=None):
    """The `serving_default` signature runner of a LiteRT export, on `ai-edge-litert`'s
    interpreter with TensorFlow Text's operators registered (loaded from
    tensorflow-text's library without importing TensorFlow or keras).

    Args:
        path: the `.tflite` file.
        threads: the interpreter's threads (default: its own choice).

    Returns:
        A callable: `runner(text=np.array([...], dtype=object))` -> `{output: array}`.

    Example:

    >>> import tempfile, pathlib
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.export import export_litert, litert_runner
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "film"])
    >>> model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=6), num_classes=3)
    >>> path = export_litert(model, tokenizer, pathlib.Path(tempfile.mkdtemp()) / "m.tflite")
    >>> litert_runner(path, threads=1)(text=np.array(["Film"], dtype=object))["labels"].shape
    (1,)
    """
    from ai_edge_litert import interpreter

    loaded = interpreter.InterpreterWithCustomOps(
        model_path=str(path),
        custom_op_registerers=_text_operators(),
        num_threads=int(threads) if threads else None,
    )
    return loaded.get_signature_runner("serving_default")
