"""Typed mentions (a text, a character span in it, the span's type) from CSV, TSV and
JSON-lines files: the data of `keras-attn finetune` with `data.task: entity_typing`."""

import dataclasses
import unicodedata

from keras_attn.api_export import keras_attn_export
from keras_attn.data.readers.labelled_texts import table_rows
from keras_attn.data.readers.report import ReadReport

# What BERT's text cleaning drops before word pieces (and spaces): a span of only
# these covers no piece.
_UNSEEN = {"Cc", "Cf", "Zs", "Zl", "Zp"}


@keras_attn_export("keras_attn.data.MentionTypingData", serializable=False)
@dataclasses.dataclass
class MentionTypingData:
    """Examples for `EntityTyping`: texts, the mention to type in each, its type.

    Args:
        texts: list of strings.
        mention_starts: the first character of each mention (Unicode code points, as
            Python's `str` counts them).
        mention_ends: the character just past each mention's end.
        labels: list of int label ids (indices into `label_names`).
        label_names: the label of each id.
        report: the `ReadReport` of the read.

    Call arguments:
        None: a record (`len()` is its number of examples).

    Example:

    >>> from keras_attn.data import MentionTypingData
    >>> data = MentionTypingData(["The geese flew."], [4], [9], [0], ["noun.animal"])
    >>> data.texts[0][data.mention_starts[0]:data.mention_ends[0]]
    'geese'
    """

    texts: list
    mention_starts: list
    mention_ends: list
    labels: list
    label_names: list
    report: ReadReport = None

    def __len__(self):
        return len(self.texts)


def _offset(value):
    """A character offset read from a field (an int, or a string of digits), or None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().isascii() and value.strip().lstrip("-").isdigit():
        digits = value.strip()
        return int(digits) if len(digits) <= 18 else None  # no crafted 4,000-digit number
    return None


def _span_problem(text, start, end, columns):
    """Why `(start, end)` cannot be typed in `text`, or None."""
    if start is None or end is None:
        bad = columns[0] if start is None else columns[1]
        return f"bad offset: column {bad} (expected a whole number of characters)"
    if not 0 <= start < end <= len(text):
        return (
            f"span outside its text: ({start}, {end}) (expected 0 <= {columns[0]} < "
            f"{columns[1]} <= {len(text)}, the text's characters)"
        )
    if all(unicodedata.category(c) in _UNSEEN for c in text[start:end]):
        return f"blank mention: ({start}, {end}) holds {text[start:end]!r}"
    return None


@keras_attn_export("keras_attn.data.read_mention_typing")
def read_mention_typing(
    path,
    text_column="text",
    label_column="label",
    start_column="mention_start",
    end_column="mention_end",
    labels=None,
    format=None,
    quoted=None,
    log=True,
):
    """Reads a CSV, TSV or JSON-lines file of typed mentions: a text, the character
    span of the mention in it (start inclusive, end exclusive) and its type.

    A bad row never stops the read: rows with a missing column, an offset that is not
    a whole number, a span outside its text (negative, reversed, past its end), a
    span of spaces or invisible characters only, an empty text, a label outside
    `labels`, a byte that is not UTF-8, a field over a million characters or broken
    quoting are left out and reported with file and line (see `ReadReport`); the rest
    become examples. Offsets count characters (Unicode code points), so `text[start:
    end]` is the mention in Python; the export's `mention_start` and `mention_end`
    count the same. A file without the named columns raises a `ValueError` naming it
    and the columns it has.

    Args:
        path: the file (`.csv`, `.tsv`, `.jsonl`/`.json`, optionally compressed).
        text_column: the column (key) holding the text.
        label_column: the column holding the mention's type.
        start_column, end_column: the columns holding the span's characters.
        labels: the label names, in id order; rows with any other label are
            reported and left out. `None`: the sorted labels found in the file.
        format: `"csv"`, `"tsv"` or `"jsonl"`; `None` guesses from the name.
        quoted: as for `read_text_classification`.
        log: log the report's summary (a warning when rows were left out).

    Returns:
        A `MentionTypingData` (its `report` lists the rows left out).

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.data import read_mention_typing
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "mentions.csv"
    >>> _ = path.write_text("text,mention_start,mention_end,label\\n"
    ...                     "The geese flew.,4,9,noun.animal\\n"
    ...                     "A cedar fell.,2,7,noun.plant\\n"
    ...                     "A cedar fell.,7,2,noun.plant\\n"
    ...                     "Oak.,0,x,noun.plant\\n")
    >>> data = read_mention_typing(path, log=False)
    >>> data.texts, data.mention_starts, data.labels, data.label_names
    (['The geese flew.', 'A cedar fell.'], [4, 2], [0, 1], ['noun.animal', 'noun.plant'])
    >>> [str(p).split(": ", 1)[1][:21] for p in data.report.problems]
    ['span outside its text', 'bad offset: column me']
    """
    report = ReadReport(str(path))
    offsets = (start_column, end_column)
    columns = [text_column, *offsets, label_column]
    rows = []  # (line, text, start, end, label name)
    for line, row, problem in table_rows(path, columns, format=format, quoted=quoted):
        if problem is None:
            text, label = row[text_column], str(row[label_column]).strip()
            if not isinstance(text, str) or not text.strip():
                problem = f"empty text: column {text_column}"
            elif not label:
                problem = f"empty label: column {label_column}"
            else:
                start, end = (_offset(row[c]) for c in offsets)
                problem = _span_problem(text, start, end, offsets)
        if problem is not None:
            report.leave_out(line, problem)
            continue
        rows.append((line, text, start, end, label))
    label_names = list(labels) if labels is not None else sorted({r[4] for r in rows})
    ids = {str(name): i for i, name in enumerate(label_names)}
    kept = MentionTypingData([], [], [], [], label_names, report)
    for line, text, start, end, label in rows:
        if label not in ids:
            report.leave_out(line, f"unknown label: {label!r} (expected one of {label_names})")
            continue
        kept.texts.append(text)
        kept.mention_starts.append(start)
        kept.mention_ends.append(end)
        kept.labels.append(ids[label])
    report.problems.sort(key=lambda p: p.line)
    report.finish(len(kept), log)
    return kept
