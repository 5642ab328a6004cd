"""`export_model`: one entry point for every export format (the SavedModel, ONNX,
OpenVINO, LiteRT: `keras_attn.export_formats`), as `keras-attn export --format` calls it."""

import pathlib

from keras_attn.api_export import keras_attn_export
from keras_attn.export_formats import export_format


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
        format: `"saved_model"`, `"onnx"`, `"openvino"` or `"litert"` (or a format added
            with `keras_attn.export_formats.add_export_format`).
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
    record = export_format(format)
    path = pathlib.Path(path)
    if record.suffix and path.suffix != record.suffix:
        raise ValueError(
            f"Expected a path ending in {record.suffix} for format={format!r}. Received: "
            f"path={str(path)!r}"
        )
    return record.write(model, tokenizer, path, **options)
