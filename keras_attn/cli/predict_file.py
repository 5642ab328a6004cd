"""Batch prediction: `keras-attn predict SAVED_MODEL --input FILE --output FILE`.

Reads a CSV, TSV or JSON-lines file as the training readers do (compressed too),
calls the export's `serving_default` (or an exported `model.onnx` / `.xml` / `.tflite` on
ONNX Runtime / OpenVINO / LiteRT) on
batches of rows, and writes one output row
per input row, in order, to a CSV, TSV or JSON-lines file (by its name): the input's
line number, every column of the input as read (one named like an output, `line` or
`error` as `input_<name>`), every output of the signature (a list as JSON in
CSV/TSV; per-word outputs cut to the row's words) and `error`. A row that cannot be
read (a missing column, a byte that is not UTF-8, broken quoting) gets its reason in
`error` and empty outputs, and is listed with its line at the end: nothing is
dropped.
"""

import csv
import json
import pathlib
import sys
import time

from keras_attn.errors import UserInputError

# The signature's inputs and the column each is read from by default.
INPUT_COLUMNS = (
    "text", "text_pair", "question", "context", "choices", "prompt", "source",
    "mention_start", "mention_end",
)  # fmt: skip
# Inputs that are numbers (an entity typing model's mention span, in characters).
INTEGER_INPUTS = ("mention_start", "mention_end")
OUTPUT_FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl"}


def output_format(path):
    found = OUTPUT_FORMATS.get(pathlib.Path(path).suffix.lower())
    if found is None:
        raise UserInputError(
            f"--output {path}: expected a .csv, .tsv or .jsonl file (the format follows the name)"
        )
    return found


def predict_file(
    saved_model, input_path, output_path, columns=None, batch_size=64, format=None, progress=True
):
    """Predicts every row of `input_path` with `saved_model`'s `serving_default` and
    writes `output_path`; returns a summary dict (`rows`, `predicted`, `failed`
    `[(line, reason)]`, `seconds`, `rows_per_second`).

    `columns`: `{signature input: column}` for inputs not read from the column of
    their own name (`{"text": "review"}`). Multiple choice: `choices` is a JSON list
    or a `|`-separated string."""
    from tqdm import tqdm

    from keras_attn.atomic_files import replaced_on_success
    from keras_attn.data.readers.labelled_texts import table_columns, table_rows

    if batch_size < 1:
        raise UserInputError(f"--batch-size {batch_size}: expected 1 or more")
    kind = output_format(output_path)
    input_path, output_path = pathlib.Path(input_path), pathlib.Path(output_path)
    if not input_path.is_file():
        raise UserInputError(f"--input {input_path}: no such file")
    if not output_path.parent.is_dir():
        raise UserInputError(
            f"--output {output_path}: the folder {output_path.parent} does not exist"
        )
    signature, inputs, output_names = serving_default(saved_model, announce=progress)
    given, columns = columns or {}, {name: (columns or {}).get(name, name) for name in inputs}
    unused = sorted(set(given) - set(inputs))
    if unused:
        raise UserInputError(
            f"this model's serving_default takes {inputs}; it has no use for "
            + ", ".join(f"--{name.replace('_', '-')}-column" for name in unused)
        )
    kept = _kept_columns(table_columns(input_path, format), columns.values(), output_names)
    rows = table_rows(input_path, list(columns.values()), format=format, all_columns=True)
    predictor = _RowPredictor(signature, columns)
    failed, predicted, pending, started = [], 0, [], time.perf_counter()

    def flush(table):
        nonlocal predicted
        results = iter(predictor.predict_rows([row for _, row, _ in pending if row is not None]))
        for line, row, problem in pending:
            record = {"line": line, **{name: "" for name in kept.values()}}
            outputs = None
            if row is not None:  # the input's fields as read, under their kept names
                record.update({kept.get(c, c): v for c, v in row.items()})
                outputs, problem = next(results)
            if outputs is not None:
                record.update(outputs)
                predicted += 1
            else:
                record.update(dict.fromkeys(output_names, ""))
                failed.append((line, problem))
            record["error"] = problem or ""
            table.write(record)
        pending.clear()

    # Written beside the output and renamed at the end: an existing file survives any failure.
    with (
        replaced_on_success(output_path) as partial,
        open(partial, "w", encoding="utf-8", newline="") as f,
    ):
        table = _OutputTable(f, kind, ["line", *kept.values(), *output_names, "error"])
        with tqdm(
            desc="predict", unit=" rows", disable=not progress, file=sys.stderr, mininterval=1
        ) as bar:
            for line, row, problem in rows:
                pending.append((line, row, problem))
                if sum(r is not None for _, r, _ in pending) == batch_size:
                    bar.update(len(pending))
                    flush(table)
            bar.update(len(pending))
            flush(table)
    seconds = time.perf_counter() - started
    total = predicted + len(failed)
    return {
        "rows": total,
        "predicted": predicted,
        "failed": failed,
        "seconds": seconds,
        "rows_per_second": predicted / seconds if seconds else 0.0,
    }


def serving_default(path, announce=False):
    """`(call, inputs, output names)` of a SavedModel's `serving_default`, or of an ONNX
    (`.onnx`), OpenVINO (`.xml`) or LiteRT (`.tflite`) export run by its runtime
    (`keras_attn.cli.runtimes`);
    `call(**{input: list of bytes})` gives `{output: numpy array}`, strings as bytes.
    `path` names the export as `resolve_export` reads it; `announce`: say on stderr
    which export that was, once loaded (a model folder's newest version, ...)."""
    from keras_attn.export.versions import export_kind, resolve_export

    path = resolve_export(path)  # a model, format or version folder -> the export in it
    loaded = _loaded_export(path)
    if announce:
        print(f"reading {path} ({export_kind(path)})", file=sys.stderr)
    return loaded


def _loaded_export(path):
    from keras_attn.export_formats import format_of_file

    record = format_of_file(path)
    if record is not None:  # a one-file export, on its runtime
        return record.load(path, _reason)
    import tensorflow as tf

    from keras_attn.export.versions import load_saved_model

    signature = load_saved_model(path).signatures["serving_default"]

    def call(**given):
        outputs = signature(**{name: tf.constant(values) for name, values in given.items()})
        return {k: v.numpy() for k, v in outputs.items()}

    inputs = sorted(signature.structured_input_signature[1])
    return call, inputs, sorted(signature.structured_outputs)


class _RowPredictor:
    """Calls `serving_default` on batches of rows read from `columns` (`{input: column}`)."""

    def __init__(self, signature, columns):
        self.signature, self.columns = signature, columns

    def value(self, row, name):
        """The row's value for the signature input `name` (`choices`: a list)."""
        given = row[self.columns[name]]
        if name in INTEGER_INPUTS:
            return whole_number(given, self.columns[name])
        if name == "choices":
            return given if isinstance(given, list) else str(given).split("|")
        return given if isinstance(given, str) else json.dumps(given)

    def call(self, batch):
        import numpy as np

        from keras_attn.cli.command_line_text import as_bytes

        given = {
            name: [
                self.value(r, name) if name in INTEGER_INPUTS else as_bytes(self.value(r, name))
                for r in batch
            ]
            for name in self.columns
        }
        outputs = self.signature(**given)
        return [_row_outputs(outputs, i, np) for i in range(len(batch))]

    def predict_rows(self, batch):
        """`[(outputs or None, error or None)]`; a batch the model refuses is retried row
        by row, so one bad row (e.g. a different number of choices) costs only itself."""
        refused = _refusals()
        try:
            return [(out, None) for out in self.call(batch)]
        except refused:
            results = []
            for row in batch:
                try:
                    results.append((self.call([row])[0], None))
                except refused as error:
                    results.append((None, f"not predicted: {_reason(error)}"))
            return results


def whole_number(value, column):
    """A field's whole number (a JSON int, or a string of digits) that an int32 input
    holds; anything else is a ValueError naming the column (the row is not predicted)."""
    number = None
    if isinstance(value, int) and not isinstance(value, bool):
        number = value
    elif isinstance(value, str):
        digits = value.strip().removeprefix("-")
        if digits.isascii() and digits.isdigit() and len(digits) <= 10:
            number = int(value)
    if number is None or abs(number) >= 2**31:
        raise ValueError(
            f"column {column}: expected a whole number of characters, got {str(value)[:20]!r}"
        )
    return number


def _refusals():
    """The errors a runtime raises for inputs it refuses (TensorFlow's, ONNX Runtime's)."""
    errors = [ValueError]
    if "tensorflow" in sys.modules:
        errors.append(sys.modules["tensorflow"].errors.InvalidArgumentError)
    if "onnxruntime" in sys.modules:
        from onnxruntime.capi.onnxruntime_pybind11_state import Fail, InvalidArgument

        errors += [Fail, InvalidArgument]
    if {"openvino", "ai_edge_litert"} & set(sys.modules):  # RuntimeError for refusals
        errors.append(RuntimeError)
    return tuple(errors)


def _kept_columns(input_columns, read_columns, output_names):
    """`{input column: its name in the output}` for every column of the input, in its
    order (then any read column it lacks): a column named like an output, `line` or
    `error` is kept as `input_<name>`."""
    taken = {"line", "error", *output_names}
    kept = {}
    for column in [*input_columns, *(c for c in read_columns if c not in input_columns)]:
        name = column
        while name in taken:
            name = f"input_{name}"
        taken.add(name)
        kept[column] = name
    return kept


class _OutputTable:
    """Records as JSON lines, or as CSV/TSV rows under `header` (written at once)."""

    def __init__(self, file, kind, header):
        self.file, self.kind, self.table = file, kind, None
        if kind != "jsonl":
            self.table = csv.DictWriter(
                file, header, delimiter="," if kind == "csv" else "\t", extrasaction="ignore"
            )
            self.table.writeheader()

    def write(self, record):
        if self.kind == "jsonl":
            self.file.write(json.dumps(record, ensure_ascii=False) + "\n")
            return
        self.table.writerow(
            {k: v if isinstance(v, (str, int, float)) else json.dumps(v) for k, v in record.items()}
        )


def _reason(error, limit=300):
    """The line of a TensorFlow error that says what went wrong (not where it was traced)."""
    message = str(getattr(error, "message", error))
    lines = [
        line
        for line in message.splitlines()
        if line.strip()
        and not line.startswith((" ", "\t", "Graph execution error", "Detected at node"))
    ]
    return (lines[0] if lines else message.strip())[:limit]


def _row_outputs(outputs, i, np):
    """Row `i` of every output, as JSON-able values; per-word outputs (a tagger's)
    cut to the row's words."""
    words = None
    if "words" in outputs:
        words = int(np.sum(outputs["words"][i] != b""))
    row = {}
    for name, batch in outputs.items():
        value = batch[i]
        if words is not None and value.ndim >= 1 and batch.shape[1] == outputs["words"].shape[1]:
            value = value[:words]
        row[name] = _plain(value, np)
    return row


def _plain(value, np):
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray):
        return [_plain(v, np) for v in value]
    if isinstance(value, np.floating):
        return round(float(value), 6)
    if isinstance(value, np.integer):
        return int(value)
    return value


def summary_text(summary, input_path, output_path, limit=10):
    """The end-of-run lines: counts, throughput, and each row that failed with its line."""
    lines = [
        f"{input_path} -> {output_path}: {summary['predicted']} of {summary['rows']} rows "
        f"predicted in {summary['seconds']:.1f} s ({summary['rows_per_second']:.1f} rows/s)"
    ]
    failed = summary["failed"]
    if failed:
        lines.append(
            f"{len(failed)} row(s) could not be read or predicted (their 'error' column says why):"
        )
        lines += [f"  {input_path}:{line}: {reason}" for line, reason in failed[:limit]]
        if len(failed) > limit:
            lines.append(f"  ... and {len(failed) - limit} more")
    return "\n".join(lines)
