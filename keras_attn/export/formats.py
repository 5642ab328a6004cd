"""`export_model`: one entry point for every export format (the SavedModel, ONNX,
OpenVINO, LiteRT), as `keras-attn export --format` calls it."""

import pathlib

from keras_attn.api_export import keras_attn_export

# format -> the file suffix its export writes (the SavedModel: a folder).
SUFFIXES = {"saved_model": "", "onnx": ".onnx", "openvino": ".xml", "litert": ".tflite"}


def _writers():
    from keras_attn.export.litert_export import export_litert
    from keras_attn.export.onnx_export import export_onnx
    from keras_attn.export.openvino_export import export_openvino
    from keras_attn.export.saved_model import export_saved_model

    return {
        "saved_model": export_saved_model,
        "onnx": export_onnx,
        "openvino": export_openvino,
        "litert": export_litert,
    }


@keras_attn_export("keras_attn.export.export_model")
def export_model(model, tokenizer, path, format="saved_model", **options):
    """Exports `model` with its tokenizer inside, in one of four formats.

    `"saved_model"` (TF Serving; every model: `export_saved_model`), `"onnx"` (ONNX
    Runtime: `export_onnx`), `"openvino"` (`export_openvino`) or `"litert"`
    (`export_litert`); the last three hold classifiers and sentence embeddings
    (LiteRT: span-QA models and taggers too) and refuse what they cannot hold with a
    `ValueError` naming it and why, never a token-ids-only export.

    Args:
        model: the model to serve.
        tokenizer: its tokenizer (the graph's; see each format for the ones it holds).
        path: the SavedModel's version folder, or the file: `.onnx`, `.xml`, `.tflite`.
        format: `"saved_model"`, `"onnx"`, `"openvino"` or `"litert"`.
        **options: the format's own arguments (`labels`, `quantize`, `text_pair`; the
            SavedModel's `generation`, `warmup`, `check`, ...).

    Returns:
        The folder or file written.

    Raises:
        ValueError: an unknown format, a path whose suffix is not the format's, or a
            model the format cannot hold.

    Example:

    >>> import tempfile, pathlib
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.export import export_model
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "film"])
    >>> model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=6), num_classes=2)
    >>> export_model(model, tokenizer, pathlib.Path(tempfile.mkdtemp()) / "m.onnx",
    ...              format="onnx", labels=["bad", "good"]).suffix
    '.onnx'
    """
    if format not in SUFFIXES:
        raise ValueError(f"Expected `format` in {sorted(SUFFIXES)}. Received: format={format!r}")
    path = pathlib.Path(path)
    if SUFFIXES[format] and path.suffix != SUFFIXES[format]:
        raise ValueError(
            f"Expected a path ending in {SUFFIXES[format]} for format={format!r}. Received: "
            f"path={str(path)!r}"
        )
    return _writers()[format](model, tokenizer, path, **options)
