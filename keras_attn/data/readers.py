"""Fine-tuning inputs from the files users have: CSV/TSV/JSONL, CoNLL, SQuAD JSON.

Every reader returns the good examples and a `ReadReport` of the bad rows (file and
line, the reason), and logs a one-line summary with the counts: a bad row never
crashes the run and is never dropped without being counted.
"""

import bz2
import collections
import csv
import dataclasses
import gzip
import json
import logging
import lzma
import pathlib

from keras_attn.api_export import keras_attn_export

logger = logging.getLogger("keras_attn.data")

_OPENERS = {".bz2": bz2.open, ".gz": gzip.open, ".xz": lzma.open}
_TABLE_FORMATS = ("csv", "tsv", "jsonl")


def _open_text(path):
    """Opens `path` for reading text, decompressing `.bz2`/`.gz`/`.xz` by suffix."""
    opener = _OPENERS.get(pathlib.Path(path).suffix, open)
    return opener(path, "rt", encoding="utf-8", newline="")


def _table_format(path, format):
    if format is not None:
        if format not in _TABLE_FORMATS:
            raise ValueError(f"Expected `format` in {_TABLE_FORMATS} or None. Received: format={format!r}")
        return format
    suffixes = [s.lstrip(".") for s in pathlib.Path(path).suffixes if s not in _OPENERS]
    found = suffixes[-1].lower() if suffixes else ""
    if found == "json":
        found = "jsonl"
    if found not in _TABLE_FORMATS:
        raise ValueError(
            f"Cannot tell the format of {str(path)!r} from its name; pass format= one of {_TABLE_FORMATS}."
        )
    return found


@dataclasses.dataclass
class Problem:
    """One bad row: where it is and why it was left out."""

    file: str
    line: int
    reason: str

    def __str__(self):
        return f"{self.file}:{self.line}: {self.reason}"


@keras_attn_export("keras_attn.data.ReadReport", serializable=False)
@dataclasses.dataclass
class ReadReport:
    """What a reader kept and what it left out, with file and line of each bad row.

    Args:
        file: the file read.
        num_read: rows (examples) read.
        num_kept: rows that became examples.
        problems: a `Problem` (`file`, `line`, `reason`) per row left out.

    Call arguments:
        None: a record; `summary()` gives the counts by reason, `str()` adds the
            first problems with their `file:line`.

    Example:

    >>> from keras_attn.data.readers import Problem, ReadReport
    >>> report = ReadReport("reviews.csv", num_read=3, num_kept=2,
    ...                     problems=[Problem("reviews.csv", 4, "empty text")])
    >>> report.summary()
    'reviews.csv: kept 2 of 3 rows; left out 1 (empty text: 1)'
    """

    file: str
    num_read: int = 0
    num_kept: int = 0
    problems: list = dataclasses.field(default_factory=list)

    @property
    def num_left_out(self):
        return len(self.problems)

    def counts(self):
        """Rows left out, by reason (the reason's text up to its first colon)."""
        return collections.Counter(p.reason.split(":")[0] for p in self.problems)

    def summary(self):
        text = f"{self.file}: kept {self.num_kept} of {self.num_read} rows"
        if self.problems:
            reasons = ", ".join(f"{reason}: {n}" for reason, n in self.counts().most_common())
            text += f"; left out {self.num_left_out} ({reasons})"
        return text

    def __str__(self, limit=10):
        lines = [self.summary()] + [f"  {p}" for p in self.problems[:limit]]
        if self.num_left_out > limit:
            lines.append(f"  ... and {self.num_left_out - limit} more")
        return "\n".join(lines)

    def log(self):
        (logger.warning if self.problems else logger.info)("%s", self)


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
    >>> data = TextClassificationData(["good", "bad", "fine", "poor"], None, [1, 0, 1, 0], ["neg", "pos"])
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
            [self.labels[i] for i in indices], self.label_names, self.report,
        )

    def split(self, test_fraction=0.2, seed=0):
        """A fixed random split `(train, test)`: the same `seed` gives the same split."""
        import numpy as np

        if not 0.0 < test_fraction < 1.0:
            raise ValueError(f"Expected `test_fraction` in (0, 1). Received: test_fraction={test_fraction!r}")
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
    path, text_column, label_column, text_pair_column=None, labels=None, format=None, log=True
):
    """Reads a CSV, TSV or JSON-lines file of labelled texts (or text pairs).

    Rows with a missing column, an empty text or a label outside `labels` are left
    out and reported with file and line (see `ReadReport`); the rest become
    examples. `.bz2`, `.gz` and `.xz` files are decompressed on the fly.

    Args:
        path: the file (`.csv`, `.tsv`, `.jsonl`/`.json`, optionally compressed).
        text_column: the column (key) holding the text.
        label_column: the column holding the label.
        text_pair_column: the column of the second text, for sentence-pair tasks.
        labels: the label names, in id order; rows with any other label are
            reported and left out. `None`: the sorted labels found in the file.
        format: `"csv"`, `"tsv"` or `"jsonl"`; `None` guesses from the name.
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
    with _open_text(path) as f:
        for line, row in _table_rows(f, format, report, columns):
            report.num_read += 1
            missing = [c for c in columns if row.get(c) is None]
            if missing:
                report.problems.append(Problem(report.file, line, f"missing column: {', '.join(map(str, missing))}"))
                continue
            empty = [c for c in (text_column, text_pair_column) if c is not None and not str(row[c]).strip()]
            if empty:
                report.problems.append(Problem(report.file, line, f"empty text: column {', '.join(empty)}"))
                continue
            pair = None if text_pair_column is None else str(row[text_pair_column])
            rows.append((line, str(row[text_column]), pair, str(row[label_column]).strip()))
    label_names = list(labels) if labels is not None else sorted({r[3] for r in rows})
    ids = {str(name): i for i, name in enumerate(label_names)}  # labels=[0, 1] matches "0", "1"
    texts, pairs, label_ids = [], [], []
    for line, text, pair, label in rows:
        if label not in ids:
            report.problems.append(
                Problem(report.file, line, f"unknown label: {label!r} (expected one of {label_names})"))
            continue
        texts.append(text)
        pairs.append(pair)
        label_ids.append(ids[label])
    report.problems.sort(key=lambda p: p.line)
    report.num_kept = len(texts)
    if log:
        report.log()
    return TextClassificationData(texts, None if text_pair_column is None else pairs, label_ids, label_names, report)


def _table_rows(f, format, report, columns):
    """Yields `(line number, dict)` per row; unreadable rows go to `report`.

    A CSV/TSV header without one of `columns` is a usage error, not a bad row: it
    raises a ValueError naming the column and the header's columns."""
    if format == "jsonl":
        for number, text in enumerate(f, start=1):
            if not text.strip():
                continue
            try:
                row = json.loads(text)
            except json.JSONDecodeError as error:
                report.num_read += 1
                report.problems.append(Problem(report.file, number, f"not JSON: {error.msg}"))
                continue
            if not isinstance(row, dict):
                report.num_read += 1
                report.problems.append(Problem(report.file, number, "not JSON: expected an object"))
                continue
            yield number, row
        return
    reader = csv.DictReader(f, delimiter="," if format == "csv" else "\t")
    header = reader.fieldnames or []  # reads the header
    absent = [c for c in columns if c not in header]
    if absent:
        raise ValueError(f"Expected column(s) {absent} in the header of {report.file}. Found: {header}")
    line = reader.line_num + 1  # the first data row starts after the header
    for row in reader:
        if None in row:  # more fields than the header names
            row = {k: v for k, v in row.items() if k is not None}
        yield line, row
        line = reader.line_num + 1


@keras_attn_export("keras_attn.data.TaggingData", serializable=False)
@dataclasses.dataclass
class TaggingData:
    """Examples for `BertTokenClassifier`: sentences as words, a tag per word.

    Args:
        words: list of sentences, each a list of word strings.
        tags: list of sentences, each a list of int tag ids (one per word).
        tag_names: the tag of each id.
        report: the `ReadReport` of the read.

    Call arguments:
        None: a record; `dataset()` gives a `tf.data.Dataset` of ragged
            `(words, tags)` ready for `keras_attn.data.tagging_inputs`.

    Example:

    >>> from keras_attn.data import TaggingData
    >>> data = TaggingData([["Paris", "is", "big"]], [[1, 0, 0]], ["O", "B-LOC"])
    >>> [[data.tag_names[t] for t in s] for s in data.tags]
    [['B-LOC', 'O', 'O']]
    """

    words: list
    tags: list
    tag_names: list
    report: ReadReport = None

    def __len__(self):
        return len(self.words)

    def dataset(self):
        import tensorflow as tf

        return tf.data.Dataset.from_tensor_slices(
            (tf.ragged.constant(self.words, tf.string), tf.ragged.constant(self.tags, tf.int32))
        )


@keras_attn_export("keras_attn.data.read_conll")
def read_conll(path, tag_column=-1, word_column=0, tags=None, separator=None, log=True):
    """Reads a CoNLL-style file: a token and its tag per line, blank lines between sentences.

    `-DOCSTART-` lines are skipped. A line with too few columns, or (with `tags`
    given) an unknown tag, makes its whole sentence be left out and reported with
    file and line.

    Args:
        path: the file (optionally `.bz2`/`.gz`/`.xz`).
        tag_column: column index of the tag (default: the last, as in CoNLL-2003).
        word_column: column index of the word.
        tags: the tag names in id order; `None`: sorted tags found, `"O"` first.
        separator: column separator (`None`: any whitespace).
        log: log the report's summary.

    Returns:
        A `TaggingData`.

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.data import read_conll
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "train.conll"
    >>> _ = path.write_text("-DOCSTART- -X- O O\\n\\nParis NNP B-NP B-LOC\\nis VBZ B-VP O\\n\\nbad\\n")
    >>> data = read_conll(path, log=False)
    >>> data.words, data.tag_names
    ([['Paris', 'is']], ['O', 'B-LOC'])
    >>> [(p.line, p.reason) for p in data.report.problems]
    [(6, 'too few columns: 1')]
    """
    report = ReadReport(str(path))
    needed = max([2] + [c + 1 for c in (word_column, tag_column) if c >= 0])
    sentences = []  # (first line, [(word, tag)], problem or None)
    current, first_line, problem = [], None, None

    def finish():
        if current or problem:
            sentences.append((first_line, list(current), problem))

    with _open_text(path) as f:
        for number, text in enumerate(f, start=1):
            fields = text.split(separator) if text.strip() else []
            if not fields:
                finish()
                current, first_line, problem = [], None, None
                continue
            if fields[0] == "-DOCSTART-":
                continue
            first_line = first_line or number
            if len(fields) < needed or len(fields) < -min(word_column, tag_column):
                problem = problem or Problem(report.file, number, f"too few columns: {len(fields)}")
            else:
                current.append((fields[word_column], fields[tag_column].strip()))
        finish()
    found = sorted({tag for _, words, _ in sentences for _, tag in words})
    tag_names = list(tags) if tags is not None else (["O"] if "O" in found else []) + [t for t in found if t != "O"]
    ids = {name: i for i, name in enumerate(tag_names)}
    data = TaggingData([], [], tag_names, report)
    for line, words, problem in sentences:
        report.num_read += 1
        unknown = [t for _, t in words if t not in ids]
        if problem is None and unknown:
            problem = Problem(report.file, line, f"unknown tag: {unknown[0]!r}")
        if problem is not None:
            report.problems.append(problem)
            continue
        data.words.append([w for w, _ in words])
        data.tags.append([ids[t] for _, t in words])
    report.num_kept = len(data.words)
    if log:
        report.log()
    return data


@keras_attn_export("keras_attn.data.SpanQAData", serializable=False)
@dataclasses.dataclass
class SpanQAData:
    """Examples for `BertSpanQA`: questions, contexts and answer spans.

    Answer positions are UTF-8 byte offsets into the context (what
    tensorflow-text's offsets count); `answer_starts == -1` marks an unanswerable
    question (SQuAD 2.0).

    Args:
        ids: the question ids.
        questions: list of strings.
        contexts: list of strings.
        answers: the first answer text of each question (`""` if none).
        answer_starts: byte offset of the answer's start in its context.
        answer_ends: byte offset just past the answer's end.
        report: the `ReadReport` of the read.

    Call arguments:
        None: a record; `dataset()` gives a `tf.data.Dataset` of dicts.

    Example:

    >>> from keras_attn.data import SpanQAData
    >>> data = SpanQAData(["q1"], ["Who?"], ["Ann sang."], ["Ann"], [0], [3])
    >>> data.contexts[0].encode()[data.answer_starts[0]:data.answer_ends[0]].decode()
    'Ann'
    """

    ids: list
    questions: list
    contexts: list
    answers: list
    answer_starts: list
    answer_ends: list
    report: ReadReport = None

    def __len__(self):
        return len(self.ids)

    def dataset(self):
        import tensorflow as tf

        return tf.data.Dataset.from_tensor_slices({
            "question": self.questions, "context": self.contexts,
            "answer_start": tf.constant(self.answer_starts, tf.int32),
            "answer_end": tf.constant(self.answer_ends, tf.int32),
        })


@keras_attn_export("keras_attn.data.read_squad")
def read_squad(path, log=True):
    """Reads SQuAD-style JSON (`data` -> `paragraphs` -> `qas`), v1.1 or v2.0.

    Character offsets (`answer_start`) are checked against the context and turned
    into byte offsets. Questions with an empty question text, no answer (unless
    `is_impossible`), or an answer that does not match the context at its offset
    are left out and reported; the "line" of a problem is the 1-based number of the
    question in file order (JSON has no useful line numbers), its id included.

    Args:
        path: the JSON file (optionally `.bz2`/`.gz`/`.xz`).
        log: log the report's summary.

    Returns:
        A `SpanQAData`.

    Example:

    >>> import json, pathlib, tempfile
    >>> from keras_attn.data import read_squad
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "dev.json"
    >>> qas = [{"id": "1", "question": "Who sang?", "answers": [{"text": "Zoë", "answer_start": 0}]},
    ...        {"id": "2", "question": "Who?", "answers": [{"text": "Bob", "answer_start": 0}]}]
    >>> _ = path.write_text(json.dumps({"data": [{"paragraphs": [{"context": "Zoë sang.", "qas": qas}]}]}))
    >>> data = read_squad(path, log=False)
    >>> data.answers, data.answer_ends
    (['Zoë'], [4])
    >>> [(p.line, p.reason) for p in data.report.problems]
    [(2, "answer does not match the context: id '2', 'Bob' at 0")]
    """
    report = ReadReport(str(path))
    with _open_text(path) as f:
        document = json.load(f)
    data = SpanQAData([], [], [], [], [], [], report)
    number = 0
    for article in document.get("data", []):
        for paragraph in article.get("paragraphs", []):
            context = paragraph.get("context", "")
            for qa in paragraph.get("qas", []):
                number += 1
                report.num_read += 1
                qid, question = qa.get("id", f"#{number}"), qa.get("question", "")
                answers = qa.get("answers") or []
                impossible = bool(qa.get("is_impossible", False))
                problem = None
                if not question.strip() or not context.strip():
                    problem = f"empty text: id {qid!r}"
                elif not answers and not impossible:
                    problem = f"no answer: id {qid!r}"
                elif answers:
                    text, start = answers[0].get("text", ""), answers[0].get("answer_start", -1)
                    if not text or not isinstance(start, int) or context[start : start + len(text)] != text:
                        problem = f"answer does not match the context: id {qid!r}, {text!r} at {start}"
                if problem:
                    report.problems.append(Problem(report.file, number, problem))
                    continue
                data.ids.append(qid)
                data.questions.append(question)
                data.contexts.append(context)
                if answers:
                    text, start = answers[0]["text"], answers[0]["answer_start"]
                    byte_start = len(context[:start].encode("utf-8"))
                    data.answers.append(text)
                    data.answer_starts.append(byte_start)
                    data.answer_ends.append(byte_start + len(text.encode("utf-8")))
                else:
                    data.answers.append("")
                    data.answer_starts.append(-1)
                    data.answer_ends.append(-1)
    report.num_kept = len(data.ids)
    if log:
        report.log()
    return data
