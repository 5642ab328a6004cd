"""Labelled texts (or text pairs) from CSV, TSV and JSON-lines files."""

import dataclasses
import json
import pathlib

from keras_attn.api_export import keras_attn_export
from keras_attn.data.readers.lines import OPENERS, Lines, csv_records, open_text, text_problem
from keras_attn.data.readers.report import ReadError, ReadReport

TABLE_FORMATS = ("csv", "tsv", "jsonl")


@keras_attn_export("keras_attn.data.TextClassificationData", serializable=False)
@dataclasses.dataclass
class TextClassificationData:
    """Examples for `BertClassifier`: texts, optional second texts, label ids.

    Args:
        texts: list of strings.
        text_pairs: list of strings, or `None` for single-sentence tasks.
        labels: list of int label ids (indices into `label_names`).
        label_names: the label of each id.
        report: the `ReadReport` of the read.

    Call arguments:
        None: a record; `split()` makes a seeded train/test split and `dataset()`
            a `tf.data.Dataset` of `((text[, text_pair]), label)`.

    Example:

    >>> from keras_attn.data import TextClassificationData
    >>> texts = ["good", "bad", "fine", "poor"]
    >>> data = TextClassificationData(texts, None, [1, 0, 1, 0], ["neg", "pos"])
    >>> train, test = data.split(test_fraction=0.25, seed=0)
    >>> len(train.texts), len(test.texts)
    (3, 1)
    """

    texts: list
    text_pairs: list
    labels: list
    label_names: list
    report: ReadReport = None

    def __len__(self):
        return len(self.texts)

    def _subset(self, indices):
        return TextClassificationData(
            [self.texts[i] for i in indices],
            None if self.text_pairs is None else [self.text_pairs[i] for i in indices],
            [self.labels[i] for i in indices],
            self.label_names,
            self.report,
        )

    def split(self, test_fraction=0.2, seed=0):
        """A fixed random split `(train, test)`: the same `seed` gives the same split."""
        import numpy as np

        if not 0.0 < test_fraction < 1.0:
            raise ValueError(
                f"Expected `test_fraction` in (0, 1). Received: test_fraction={test_fraction!r}"
            )
        order = np.random.default_rng(seed).permutation(len(self))
        num_test = int(round(test_fraction * len(self)))
        return self._subset(order[num_test:]), self._subset(order[:num_test])

    def dataset(self):
        """`tf.data.Dataset` of `(text, label)` or `((text, text_pair), label)`."""
        import tensorflow as tf

        features = self.texts if self.text_pairs is None else (self.texts, self.text_pairs)
        return tf.data.Dataset.from_tensor_slices((features, self.labels))


@keras_attn_export("keras_attn.data.read_text_classification")
def read_text_classification(
    path,
    text_column,
    label_column,
    text_pair_column=None,
    labels=None,
    format=None,
    quoted=None,
    log=True,
):
    """Reads a CSV, TSV or JSON-lines file of labelled texts (or text pairs).

    A bad row never stops the read: rows with a missing column, an empty text, a
    label outside `labels`, a byte that is not UTF-8, a field over a million
    characters or broken quoting are left out and reported with file and line (see
    `ReadReport`); the rest become examples. The file may start with a UTF-8
    byte-order mark; `.bz2`, `.gz` and `.xz` files are decompressed on the fly (data
    cut short is reported as a bad row). A file without the named columns in its
    header raises a `ValueError` naming the file and the columns it has.

    Args:
        path: the file (`.csv`, `.tsv`, `.jsonl`/`.json`, optionally compressed).
        text_column: the column (key) holding the text.
        label_column: the column holding the label.
        text_pair_column: the column of the second text, for sentence-pair tasks.
        labels: the label names, in id order; rows with any other label are
            reported and left out. `None`: the sorted labels found in the file.
        format: `"csv"`, `"tsv"` or `"jsonl"`; `None` guesses from the name.
        quoted: whether double quotes delimit fields (a quoted field may hold the
            separator or a newline). `None`: yes for CSV, no for TSV, where a `"`
            is an ordinary character and every line is one row.
        log: log the report's summary (a warning when rows were left out).

    Returns:
        A `TextClassificationData` (its `report` lists the rows left out).

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.data import read_text_classification
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "reviews.csv"
    >>> _ = path.write_text("text,label\\ngreat film,pos\\n,neg\\ndull,neg\\nfun,meh\\n")
    >>> data = read_text_classification(path, "text", "label", labels=["neg", "pos"], log=False)
    >>> data.texts, data.labels
    (['great film', 'dull'], [1, 0])
    >>> [str(p).split(": ", 1)[1] for p in data.report.problems]
    ['empty text: column text', "unknown label: 'meh' (expected one of ['neg', 'pos'])"]
    """
    format = _table_format(path, format)
    report = ReadReport(str(path))
    columns = [c for c in (text_column, text_pair_column, label_column) if c is not None]
    rows = []  # (line, text, pair, label name)
    with open_text(path) as f:
        lines = Lines(f)
        for line, row in _table_rows(lines, format, report, columns, quoted):
            missing = [c for c in columns if row.get(c) is None]
            if missing:
                report.leave_out(line, f"missing column: {', '.join(map(str, missing))}")
                continue
            values = {f"column {c}": str(row[c]) for c in columns}
            problem = text_problem(values)
            if problem:
                report.leave_out(line, problem)
                continue
            empty = [
                c
                for c in (text_column, text_pair_column)
                if c is not None and not str(row[c]).strip()
            ]
            if empty:
                report.leave_out(line, f"empty text: column {', '.join(empty)}")
                continue
            pair = None if text_pair_column is None else str(row[text_pair_column])
            rows.append((line, str(row[text_column]), pair, str(row[label_column]).strip()))
        if lines.failure:
            report.leave_out(*lines.failure)
    label_names = list(labels) if labels is not None else sorted({r[3] for r in rows})
    ids = {str(name): i for i, name in enumerate(label_names)}  # labels=[0, 1] matches "0", "1"
    texts, pairs, label_ids = [], [], []
    for line, text, pair, label in rows:
        if label not in ids:
            report.leave_out(line, f"unknown label: {label!r} (expected one of {label_names})")
            continue
        texts.append(text)
        pairs.append(pair)
        label_ids.append(ids[label])
    report.problems.sort(key=lambda p: p.line)
    report.finish(len(texts), log)
    return TextClassificationData(
        texts, None if text_pair_column is None else pairs, label_ids, label_names, report
    )


def table_rows(path, columns, format=None, quoted=None, all_columns=False):
    """Every row of a CSV, TSV or JSON-lines file, in file order, bad ones included.

    For prediction, where each input row must get an output row: yields `(line,
    {column: value}, None)` for a row whose `columns` are all there and readable
    (empty texts included; a JSON line's values as they are, lists and numbers
    too), and `(line, None, reason)` for one that is not (a missing column, a byte
    that is not UTF-8, a field too long, broken quoting or JSON, compressed data
    cut short), with the same reasons as `read_text_classification`. A header
    without one of `columns` raises a `ReadError` naming the file and the columns
    it has.

    Args:
        path: the file (`.csv`, `.tsv`, `.jsonl`/`.json`, optionally compressed).
        columns: the columns (keys) that must be there and readable.
        format: `"csv"`, `"tsv"` or `"jsonl"`; `None` guesses from the name.
        quoted: as for `read_text_classification`.
        all_columns: if True, a good row's dict holds every field it has (the
            others as read, a short CSV row's absent ones left out), not only
            `columns`.
    """
    format = _table_format(path, format)
    report = ReadReport(str(path))
    reported = 0

    def problems():  # bad records the parser reported before the row it yields next
        nonlocal reported
        for problem in report.problems[reported:]:
            yield problem.line, None, problem.reason
        reported = len(report.problems)

    with open_text(path) as f:
        lines = Lines(f)
        for line, row in _table_rows(lines, format, report, columns, quoted):
            yield from problems()
            missing = [c for c in columns if row.get(c) is None]
            if missing:
                yield line, None, f"missing column: {', '.join(map(str, missing))}"
                continue
            values = {c: row[c] for c in columns}  # JSON lines may hold lists and numbers
            problem = text_problem(
                {f"column {c}": v for c, v in values.items() if isinstance(v, str)}
            )
            if all_columns:
                values = {c: v for c, v in row.items() if v is not None}
            yield (line, None, problem) if problem else (line, values, None)
        yield from problems()
        if lines.failure:
            yield lines.failure[0], None, lines.failure[1]


def table_columns(path, format=None, quoted=None):
    """The columns of a CSV or TSV file's header, or for JSON lines every key of
    the file's objects in the order first seen (one pass over the file); `[]`
    for a file with no header or no objects."""
    format = _table_format(path, format)
    report = ReadReport(str(path))
    with open_text(path) as f:
        lines = Lines(f)
        if format != "jsonl":
            quoted = format == "csv" if quoted is None else quoted
            _, header = next(csv_records(lines, "," if format == "csv" else "\t", quoted), (0, []))
            return header if isinstance(header, list) else []
        keys = {}
        for _, row in _table_rows(lines, format, report, [], quoted):
            keys.update(dict.fromkeys(row))
        return list(keys)


def _table_format(path, format):
    if format is not None:
        if format not in TABLE_FORMATS:
            raise ValueError(
                f"Expected `format` in {TABLE_FORMATS} or None. Received: format={format!r}"
            )
        return format
    suffixes = [s.lstrip(".") for s in pathlib.Path(path).suffixes if s not in OPENERS]
    found = suffixes[-1].lower() if suffixes else ""
    if found == "json":
        found = "jsonl"
    if found not in TABLE_FORMATS:
        raise ReadError(
            f"Cannot tell the format of {str(path)!r} from its name; pass format= one of "
            f"{TABLE_FORMATS}."
        )
    return found


def _table_rows(lines, format, report, columns, quoted):
    """Yields `(line number, {column: value})` per row; rows that cannot be parsed go
    to `report`. A CSV/TSV header without one of `columns` raises a `ReadError`
    naming the column and the header's columns."""
    if format == "jsonl":
        for number, text in lines:
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as error:
                report.leave_out(number, f"not JSON: {error.msg}")
                continue
            if not isinstance(row, dict):
                report.leave_out(number, "not JSON: expected an object")
                continue
            yield number, row
        return
    quoted = format == "csv" if quoted is None else quoted
    records = csv_records(lines, "," if format == "csv" else "\t", quoted)
    _, header = next(records, (0, []))
    if isinstance(header, str):  # the header record itself could not be parsed
        raise ReadError(f"{report.file}: cannot read the header: {header}")
    if not header and lines.failure:
        raise ReadError(f"{report.file}: {lines.failure[1]}")
    absent = [c for c in columns if c not in header]
    if absent:
        raise ReadError(
            f"Expected column(s) {absent} in the header of {report.file}. Found: {header}"
        )
    for number, fields in records:
        if isinstance(fields, str):
            report.leave_out(number, fields)
        elif len(fields) > len(header):  # e.g. a TSV text holding a tab: no silent shift
            report.leave_out(
                number,
                f"{len(fields)} fields, the header has {len(header)} (an unquoted delimiter?)",
            )
        else:
            yield number, dict(zip(header, fields, strict=False))  # short rows: missing columns
