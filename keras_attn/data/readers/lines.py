"""Lines and records of the files users have, whatever their bytes.

Files are read as UTF-8 with or without a byte-order mark (what spreadsheet programs
write); a byte that is not UTF-8 is kept as a stand-in character
(`surrogateescape`), so one bad byte makes one bad row, found by `text_problem`,
instead of ending the read. Compressed files (`.bz2`, `.gz`, `.xz`) are read through;
data that is corrupt or ends early stops the lines and is reported as one bad row.
CSV records may span lines (quoted newlines); a record that cannot be parsed (an
unclosed quote, text after a closing quote, a field over `MAX_FIELD_CHARS`) is
reported on its first line and reading goes on at the line after it.
"""

import bz2
import collections
import contextlib
import csv
import gzip
import lzma
import pathlib
import re
import zlib

OPENERS = {".bz2": bz2.open, ".gz": gzip.open, ".xz": lzma.open}
# One field (a text, a label) longer than this is reported and its row left out; the
# tokenizers keep at most a few thousand characters of a text anyway.
MAX_FIELD_CHARS = 1 << 20
# `surrogateescape` turns each byte that is not UTF-8 into one of these.
_UNDECODED = re.compile("[\udc80-\udcff]")
_READ_ERRORS = (OSError, EOFError, zlib.error, lzma.LZMAError)


def open_text(path):
    """Opens `path` for reading text, decompressing `.bz2`/`.gz`/`.xz` by suffix."""
    opener = OPENERS.get(pathlib.Path(path).suffix, open)
    return opener(path, "rt", encoding="utf-8-sig", errors="surrogateescape", newline="")


def read_all(path):
    """The whole text of `path` (for JSON documents); `(text, failure reason or None)`."""
    with open_text(path) as f:
        try:
            return f.read(), None
        except _READ_ERRORS as error:
            return "", _unreadable(error)


def _unreadable(error):
    return (
        f"unreadable: {type(error).__name__}: {error} "
        "(the file is corrupt or ends early; the rest was not read)"
    )


class Lines:
    """`(line number, text)` of an open text file, numbered from 1.

    A read that fails part-way (compressed data corrupt or cut short) ends the
    lines; `failure` then holds `(line number, reason)` for the caller to report.
    """

    def __init__(self, f):
        self.f = f
        self.number = 0
        self.failure = None

    def __iter__(self):
        while True:
            try:
                text = self.f.readline()
            except _READ_ERRORS as error:
                self.failure = (self.number + 1, _unreadable(error))
                return
            if not text:
                return
            self.number += 1
            yield self.number, text


def text_problem(values):
    """Why `{column: text}` cannot be used (a byte that is not UTF-8, a field over
    `MAX_FIELD_CHARS`), or `None`."""
    for column, value in values.items():
        undecoded = _UNDECODED.search(value)
        if undecoded:
            byte = ord(undecoded.group()) - 0xDC00
            return f"not UTF-8: byte 0x{byte:02x} in {column}"
        if len(value) > MAX_FIELD_CHARS:
            return (
                f"field too long: {column} has {len(value):,} characters "
                f"(at most {MAX_FIELD_CHARS:,})"
            )
    return None


def csv_records(lines, delimiter, quoted):
    """Yields `(first line number, fields)` or `(first line number, reason)` (a str) per
    record of `lines` (a `Lines`); blank lines are skipped.

    `quoted`: double quotes delimit fields (CSV's convention); without it every
    line is one record and a `"` is an ordinary character (what TSV files mean).
    A record that cannot be parsed is reported on its first line and the lines
    after that one are parsed again, so one stray quote costs one row.
    """
    pending = collections.deque()  # lines to parse again after a bad record
    consumed = []  # (number, text) of the record being parsed
    source = iter(lines)

    def feed():
        while True:
            item = pending.popleft() if pending else next(source, None)
            if item is None:
                return
            consumed.append(item)
            yield item[1]

    def reader():
        return csv.reader(
            feed(),
            delimiter=delimiter,
            strict=True,
            quoting=csv.QUOTE_MINIMAL if quoted else csv.QUOTE_NONE,
        )

    with _field_size_limit(MAX_FIELD_CHARS):
        records = reader()
        while True:
            consumed.clear()
            try:
                fields = next(records)
            except StopIteration:
                return
            except csv.Error as error:
                if not consumed:
                    return
                yield consumed[0][0], _record_problem(str(error), consumed[-1][0] - consumed[0][0])
                pending.extendleft(reversed(consumed[1:]))
                records = reader()  # a fresh parser: the bad record's state is dropped
                continue
            if fields:
                yield consumed[0][0], fields


def _record_problem(message, extra_lines):
    if "field limit" in message:
        return f"field too long: more than {MAX_FIELD_CHARS:,} characters"
    if "end of data" in message:
        return "bad quoting: a quoted field opened here is never closed"
    if extra_lines:  # a quote opened here ran on into later rows
        return f"bad quoting: a quoted field opened here ran on for {extra_lines} more line(s)"
    if "expected after" in message:
        return "bad quoting: text after a closing quote"
    return f"bad record: {message}"


@contextlib.contextmanager
def _field_size_limit(limit):
    """csv's field limit is process-wide: set for this read, then put back."""
    previous = csv.field_size_limit(limit)
    try:
        yield
    finally:
        csv.field_size_limit(previous)
