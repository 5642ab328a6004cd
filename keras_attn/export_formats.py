"""The export formats, one record each: what `export_model`, `keras-attn export`,
`keras-attn predict` and the version folders (`keras_attn.export.versions`) know of a
format. Importing it loads neither TensorFlow nor Keras (the CLI's `--help` reads it).

A format is added with `add_export_format(ExportFormat(...))`: its writer, its file's
suffix, the runtime that reads it and that runtime's loader for `predict`.
"""

import dataclasses
import importlib
import pathlib


@dataclasses.dataclass(frozen=True)
class ExportFormat:
    """One export format.

    Args:
        name: `export_model(format=...)` and `keras-attn export --format`.
        suffix: the file's suffix (`".onnx"`); `""`: a folder (the SavedModel).
        writer: `"module:function"`, `function(model, tokenizer, path, **options)`
            writing the export and returning its path.
        runtime: the runtime's name in messages (`"ONNX"`); `""` for the SavedModel.
        runtime_long: its name in a sentence (`"ONNX Runtime"`).
        packages: what a user installs to run the file (the CLI's hint after export).
        loader: `"module:function"`, `function(path, reason)` -> `(call, inputs, output
            names)` for `keras-attn predict` (`keras_attn.cli.runtimes`); `""` for the
            SavedModel, which TensorFlow loads.
        tokenizer_limits: `{tokenizer class name: why the format cannot hold it}`.
    """

    name: str
    suffix: str
    writer: str
    runtime: str = ""
    runtime_long: str = ""
    packages: str = ""
    loader: str = ""
    tokenizer_limits: dict = dataclasses.field(default_factory=dict)

    @property
    def file_name(self):
        """The file in a version folder (`model.onnx`); `None` for a folder format."""
        return f"model{self.suffix}" if self.suffix else None

    def write(self, model, tokenizer, path, **options):
        return _resolved(self.writer)(model, tokenizer, path, **options)

    def load(self, path, reason):
        return _resolved(self.loader)(path, reason)


def _resolved(reference):
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


# name -> record, in the order the CLI lists them.
EXPORT_FORMATS = {}


def add_export_format(record):
    """Adds `record` (an `ExportFormat`) to the formats every export path reads; a name
    or a file suffix already taken is refused."""
    if not isinstance(record, ExportFormat):
        raise TypeError(f"Expected an ExportFormat. Received: {type(record).__name__}")
    taken = [
        other.name
        for other in EXPORT_FORMATS.values()
        if other.name == record.name or (record.suffix and other.suffix == record.suffix)
    ]
    if taken:
        raise ValueError(f"Expected a new format name and suffix; {taken[0]!r} has them")
    if record.suffix and not (record.runtime and record.loader):
        raise ValueError(f"Expected a runtime and a loader for the file format {record.name!r}")
    EXPORT_FORMATS[record.name] = record
    return record


def export_format(name):
    """The record of format `name`; a `ValueError` names the formats there are."""
    if name not in EXPORT_FORMATS:
        raise ValueError(
            f"Expected `format` in {sorted(EXPORT_FORMATS)}. Received: format={name!r}"
        )
    return EXPORT_FORMATS[name]


def file_formats():
    """The formats that write one file (every one but the SavedModel)."""
    return [record for record in EXPORT_FORMATS.values() if record.suffix]


def format_of_file(path):
    """The file format whose suffix `path` has (case aside); `None` (a folder)."""
    suffix = pathlib.Path(path).suffix.lower()
    return next((record for record in file_formats() if record.suffix == suffix), None)


def format_of_runtime(runtime):
    """The file format `runtime` (`"ONNX"`) reads."""
    return next(record for record in file_formats() if record.runtime == runtime)


add_export_format(
    ExportFormat(
        "saved_model", "", "keras_attn.export.saved_model:export_saved_model", "", "TF Serving"
    )
)
add_export_format(
    ExportFormat(
        "onnx",
        ".onnx",
        "keras_attn.export.onnx_export:export_onnx",
        "ONNX",
        "ONNX Runtime",
        "onnxruntime and onnxruntime-extensions",
        "keras_attn.cli.runtimes:onnx_call",
        {
            "DebertaV3Tokenizer": "DeBERTa-v3's SentencePiece tokenizer is not built for it "
            "yet (onnxruntime-extensions' HfJsonTokenizer reads unigram models one text at a "
            "time)"
        },
    )
)
add_export_format(
    ExportFormat(
        "openvino",
        ".xml",
        "keras_attn.export.openvino_export:export_openvino",
        "OpenVINO",
        "OpenVINO",
        "openvino and openvino-tokenizers",
        "keras_attn.cli.runtimes:openvino_call",
    )
)
add_export_format(
    ExportFormat(
        "litert",
        ".tflite",
        "keras_attn.export.litert_export:export_litert",
        "LiteRT",
        "the LiteRT interpreter",
        "ai-edge-litert and TensorFlow Text's operators",
        "keras_attn.cli.runtimes:litert_call",
        {
            "DebertaV3Tokenizer": "TensorFlow Text's SentencepieceTokenizer, which "
            "DeBERTa-v3's tokenizer runs, has no TFLite kernel",
            "RobertaTokenizer": "TensorFlow Text has no TFLite byte-level BPE kernel",
        },
    )
)
