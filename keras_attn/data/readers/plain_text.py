"""Plain-text corpora (a sentence per line) and tab-separated sentence pairs."""

import dataclasses

from keras_attn.api_export import keras_attn_export
from keras_attn.data.readers.lines import Lines, csv_records, open_text, text_problem
from keras_attn.data.readers.report import ReadReport


@keras_attn_export("keras_attn.data.CorpusData", serializable=False)
@dataclasses.dataclass
class CorpusData:
    """Documents of sentences, for pre-training and language models.

    Args:
        documents: a list of documents, each a list of sentence strings.
        report: the `ReadReport` of the read (a row is a sentence).

    Call arguments:
        None: a record; `len()` is the number of documents.

    Example:

    >>> from keras_attn.data import CorpusData
    >>> len(CorpusData([["In the beginning.", "And the earth."], ["Amen."]]))
    2
    """

    documents: list
    report: ReadReport = None

    def __len__(self):
        return len(self.documents)


@keras_attn_export("keras_attn.data.read_corpus")
def read_corpus(path, log=True):
    """Reads a text file of documents: one sentence per line, blank lines between documents.

    Surrounding whitespace is stripped. A line with a byte that is not UTF-8 or over
    a million characters is left out and reported with its line number (the rest of
    its document is kept); the file may start with a UTF-8 byte-order mark and be
    `.bz2`/`.gz`/`.xz`-compressed.

    Args:
        path: the text file.
        log: log the report's summary.

    Returns:
        A `CorpusData` (a row of its report is a sentence).

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.data import read_corpus
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "corpus.txt"
    >>> _ = path.write_bytes(b"In the beginning.\\nAnd the earth.\\n\\nAmen.\\nNot \\xff UTF-8.\\n")
    >>> corpus = read_corpus(path, log=False)
    >>> corpus.documents
    [['In the beginning.', 'And the earth.'], ['Amen.']]
    >>> [(p.line, p.reason) for p in corpus.report.problems]
    [(5, 'not UTF-8: byte 0xff in the line')]
    """
    report = ReadReport(str(path))
    documents, current = [], []
    with open_text(path) as f:
        lines = Lines(f)
        for number, text in lines:
            text = text.strip()
            if not text:
                if current:
                    documents.append(current)
                current = []
                continue
            problem = text_problem({"the line": text})
            if problem:
                report.leave_out(number, problem)
            else:
                current.append(text)
        if lines.failure:
            report.leave_out(*lines.failure)
    if current:
        documents.append(current)
    report.finish(sum(len(d) for d in documents), log)
    return CorpusData(documents, report)


@keras_attn_export("keras_attn.data.read_text_pairs")
def read_text_pairs(path, source_column=0, target_column=1, group_column=None, log=True):
    """Reads sentence pairs from a tab-separated file, a pair per line.

    Quotes are ordinary characters (every line is one pair). Rows with too few
    columns, an empty side, a byte that is not UTF-8 or an over-long field are left
    out and reported with file and line. Fields are stripped of surrounding spaces.

    Args:
        path: the TSV file (optionally `.bz2`/`.gz`/`.xz`).
        source_column: column index of the source sentence.
        target_column: column index of the target sentence.
        group_column: column index of a source-sentence id that ties together the
            translations of one sentence (`None`: the source text itself).
        log: log the report's summary.

    Returns:
        A `ParallelTextData`.

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.data import read_text_pairs
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "pairs.tsv"
    >>> _ = path.write_text('Hallo\\tHello\\nHallo\\tHi "there"\\nDanke\\n')
    >>> pairs = read_text_pairs(path, log=False)
    >>> pairs.targets, pairs.groups
    (['Hello', 'Hi "there"'], ['Hallo', 'Hallo'])
    >>> str(pairs.report.problems[0])  # doctest: +ELLIPSIS
    '...pairs.tsv:3: too few columns: 1 (expected at least 2)'
    """
    from keras_attn.data.parallel_text import ParallelTextData

    needed = max(c for c in (source_column, target_column, group_column) if c is not None) + 1
    report = ReadReport(str(path))
    sources, targets, groups = [], [], []
    with open_text(path) as f:
        lines = Lines(f)
        for number, fields in csv_records(lines, "\t", quoted=False):
            if isinstance(fields, str):
                report.leave_out(number, fields)
                continue
            if len(fields) < needed:
                report.leave_out(
                    number, f"too few columns: {len(fields)} (expected at least {needed})"
                )
                continue
            source, target = fields[source_column].strip(), fields[target_column].strip()
            problem = text_problem({"the source": source, "the target": target})
            if problem or not source or not target:
                report.leave_out(number, problem or "empty text")
                continue
            sources.append(source)
            targets.append(target)
            groups.append(source if group_column is None else fields[group_column].strip())
        if lines.failure:
            report.leave_out(*lines.failure)
    report.finish(len(sources), log)
    return ParallelTextData(sources, targets, groups, report)
