"""Tagged sentences from CoNLL-style files: a token and its tag per line."""

import dataclasses

from keras_attn.api_export import keras_attn_export
from keras_attn.data.readers.lines import Lines, open_text, text_problem
from keras_attn.data.readers.report import Problem, ReadReport


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

    `-DOCSTART-` lines are skipped. A line with too few columns, a byte that is not
    UTF-8, an over-long field or (with `tags` given) an unknown tag makes its whole
    sentence be left out and reported with file and line; so does a compressed
    file's last sentence when the data is cut short.

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
    >>> lines = ["-DOCSTART- -X- O O", "", "Paris NNP B-NP B-LOC", "is VBZ B-VP O", "", "bad"]
    >>> _ = path.write_text("\\n".join(lines) + "\\n")
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

    def end_sentence():
        if current or problem:
            sentences.append((first_line, list(current), problem))

    with open_text(path) as f:
        lines = Lines(f)
        for number, text in lines:
            fields = text.split(separator) if text.strip() else []
            if not fields:
                end_sentence()
                current, first_line, problem = [], None, None
                continue
            if fields[0] == "-DOCSTART-":
                continue
            first_line = first_line or number
            bad_text = text_problem({"the line": text})
            if bad_text:
                problem = problem or Problem(report.file, number, bad_text)
            elif len(fields) < needed or len(fields) < -min(word_column, tag_column):
                problem = problem or Problem(report.file, number, f"too few columns: {len(fields)}")
            else:
                current.append((fields[word_column], fields[tag_column].strip()))
        if lines.failure:  # the sentence being read is cut short
            first_line = first_line or lines.failure[0]
            problem = problem or Problem(report.file, lines.failure[0], lines.failure[1])
        end_sentence()
    found = sorted({tag for _, words, problem in sentences if problem is None for _, tag in words})
    tag_names = (
        list(tags)
        if tags is not None
        else (["O"] if "O" in found else []) + [t for t in found if t != "O"]
    )
    ids = {name: i for i, name in enumerate(tag_names)}
    data = TaggingData([], [], tag_names, report)
    for line, words, problem in sentences:
        unknown = [t for _, t in words if t not in ids]
        if problem is None and unknown:
            problem = Problem(report.file, line, f"unknown tag: {unknown[0]!r}")
        if problem is not None:
            report.leave_out(problem.line, problem.reason)
            continue
        data.words.append([w for w, _ in words])
        data.tags.append([ids[t] for _, t in words])
    report.finish(len(data.words), log)
    return data
