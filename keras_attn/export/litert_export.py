"""LiteRT (TensorFlow Lite) exports that take raw text: the tokenizer as TensorFlow Text's
TFLite custom operators (`FastBertNormalize`, `FastWordpieceTokenizeWithOffsets`,
`RaggedTensorToTensor`, `ByteSplit`, `ByteSplitByOffsets`), the packing and the model
as LiteRT's builtins (`litert_serving`), in one `model.tflite` (TensorFlow,
tensorflow-text; imported when first used). `litert_runner` runs it with
`ai-edge-litert`'s interpreter and TensorFlow Text's operator library, without
importing TensorFlow."""

import pathlib

import numpy as np  # noqa: F401  (the examples' np)

from keras_attn.api_export import keras_attn_export
from keras_attn.export.one_file import claimed_file, verify_checksum
from keras_attn.native_logs import native_stderr_held

# TensorFlow Text's registrars of the custom operators a LiteRT export uses.
CUSTOM_OPS = (
    "AddFastBertNormalize",
    "AddFastWordpieceTokenize",
    "AddRaggedTensorToTensor",
    "AddByteSplitByOffsets",
    "AddByteSplit",
)


@keras_attn_export("keras_attn.export.export_litert")
def export_litert(
    model,
    tokenizer,
    path,
    labels=None,
    quantize=None,
    text_pair=False,
    max_question_length=64,
    max_answer_length=30,
):
    """Writes a classifier, a span-QA model, a tagger or a backbone's sentence embeddings
    as one LiteRT (`.tflite`) model that takes raw text.

    Signature `serving_default`, with the SavedModel's inputs and outputs: a
    classifier takes `text` (strings, `(batch,)`; and `text_pair` for pairs) and
    answers `probabilities` `(batch, classes)`, `label_ids` and `labels` `(batch,)`;
    a span-QA model takes `question` and `context` and answers `answer`,
    `answer_start`, `answer_end` (UTF-8 bytes of the context; -1 when the context has
    no piece) and `score`; a tagger takes `text` and answers `words`, `word_starts`,
    `word_ends`, `tag_ids`, `tags`, `scores` and `probabilities` per word (the words
    found from the text's bytes, `litert_serving.words_with_offsets`). The
    tokenizer is the model's own `FastBertTokenizer` as TensorFlow Text's TFLite
    custom operators (register them with the interpreter:
    `keras_attn.export.litert_runner`, or TensorFlow Text's op library on a device),
    so the pieces and their offsets are exactly the SavedModel's; everything else is
    LiteRT builtins. Text that is not UTF-8 is read as it is (the SavedModel replaces
    bad bytes first).

    Args:
        model: a classifier, span-QA model, tagger or backbone (sentence
            embeddings) whose family serves it with `"classifier"`, `"span_qa"`,
            `"tagger"` or `"encoder"` signatures.
        tokenizer: its `WordPieceTokenizer`.
        path: the `.tflite` file to write.
        labels: a classifier's class names or a tagger's tag names (default `"0"`,
            `"1"`, ...).
        quantize: `None`, or `"int8"`: LiteRT's dynamic-range quantization (int8
            weights, float activations; `tf.lite.Optimize.DEFAULT`).
        text_pair: a classifier of text pairs: inputs `text` and `text_pair`, each
            tokenised alone, trimmed round-robin and packed as `WordPieceTokenizer`
            packs them.
        max_question_length: span QA: the question's pieces kept.
        max_answer_length: span QA: the longest answer, in pieces.

    Returns:
        The path written.

    Raises:
        ValueError: for a model or tokenizer the LiteRT export cannot hold (RoBERTa's
            and DeBERTa's tokenizers), named with the reason.

    Example:

    >>> import tempfile, pathlib
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.export import export_litert, litert_runner
    >>> from keras_attn.models import BertBackbone, BertClassifier, BertSpanQA
    >>> tokenizer = WordPieceTokenizer(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "film"], sequence_length=8)
    >>> model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=7), num_classes=2)
    >>> path = export_litert(model, tokenizer, pathlib.Path(tempfile.mkdtemp()) / "m.tflite",
    ...                      labels=["bad", "good"])
    >>> answer = litert_runner(path)(text=np.array(["good film", "film"], dtype=object))
    >>> sorted(answer), answer["probabilities"].shape
    (['label_ids', 'labels', 'probabilities'], (2, 2))
    >>> qa = BertSpanQA(BertBackbone.from_size("tiny", vocabulary_size=7))
    >>> path = export_litert(qa, tokenizer, pathlib.Path(tempfile.mkdtemp()) / "qa.tflite")
    >>> answer = litert_runner(path)(question=np.array(["film?"], dtype=object),
    ...                              context=np.array(["good film"], dtype=object))
    >>> sorted(answer), answer["answer"][0] in (b"good", b"film", b"good film")
    (['answer', 'answer_end', 'answer_start', 'score'], True)
    """
    import tensorflow as tf

    from keras_attn.export import litert_serving
    from keras_attn.export.file_checks import checked_labels

    kind, names = checked_labels(
        model,
        tokenizer,
        labels,
        "LiteRT",
        "as TensorFlow Text's TFLite operators ",
        quantize,
        text_pair=text_pair,
        kinds=("classifier", "span_qa", "tagger", "encoder"),
    )
    if kind == "encoder":
        module = litert_serving.encoder_module(model, tokenizer)
    elif kind == "tagger":
        module = litert_serving.tagger_module(model, tokenizer, names)
    elif kind == "span_qa":
        module = litert_serving.span_qa_module(
            model, tokenizer, max_question_length, max_answer_length
        )
    else:
        module = litert_serving.classifier_module(model, tokenizer, names, text_pair)
    serve = module.serve.get_concrete_function()
    converter = tf.lite.TFLiteConverter.from_concrete_functions([serve], module)
    converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
    converter.allow_custom_ops = True  # TensorFlow Text's, registered when loading
    if quantize == "int8":
        converter.optimizations = [tf.lite.Optimize.DEFAULT]
    flat = converter.convert()
    path = pathlib.Path(path)
    with claimed_file(path) as partial:  # whole or not at all, with its checksum
        partial.write_bytes(flat)
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

    verify_checksum(path)  # a file changed since export is refused, not served
    loaded = interpreter.InterpreterWithCustomOps(
        model_path=str(path),
        custom_op_registerers=_text_operators(),
        num_threads=int(threads) if threads else None,
    )
    return _QuietFirstCall(loaded.get_signature_runner("serving_default"))


class _QuietFirstCall:
    """A LiteRT signature runner whose first call holds stderr back: it applies the
    XNNPACK delegate, which prints "INFO: Created TensorFlow Lite XNNPACK delegate for
    CPU." (held as TensorFlow's start-up lines are: `keras_attn.native_logs`; anything
    else passed on). Everything else is the runner's (`get_input_details`, ...)."""

    def __init__(self, runner):
        self._runner, self._first = runner, True

    def __call__(self, **inputs):
        hold, self._first = self._first, False
        with native_stderr_held(hold=hold):
            return self._runner(**inputs)

    def __getattr__(self, name):
        return getattr(self._runner, name)
