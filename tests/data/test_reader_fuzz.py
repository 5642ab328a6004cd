"""Fuzzing the table readers: whatever the bytes, no exception escapes and the counts add up.

Valid CSV / TSV / JSON-lines files are damaged at random (bytes inserted, quotes
inserted, other encodings, truncation, compression, compressed data cut short).
Damage after the header must never raise; damage anywhere may at most raise the
documented `ReadError` naming the file (a header that no longer names the columns).
Every read satisfies `kept + left out == rows read`; where each line is a row (TSV,
JSON lines, no compression) the rows read are the file's non-blank lines, counted
here independently of the reader.
"""

import bz2
import csv
import gzip
import io
import json
import lzma
import random
import re

import pytest

from keras_attn.data import read_text_classification
from keras_attn.data.readers import ReadError

WORDS = [
    "good",
    "bad",
    "café",
    "naïve",
    "日本語",
    "a,b",
    "x\ty",
    'say "hi"',
    "end.",
    "emoji 🎬",
    "ok",
]
ENCODINGS = ["latin-1", "cp1252", "utf-16", "utf-8-sig", "shift_jis", "utf-8"]
COMPRESSORS = {".gz": gzip.compress, ".bz2": bz2.compress, ".xz": lzma.compress}


def _valid_file(rng, format):
    """`(text, header length in characters)` of a valid file with 5-40 rows."""
    rows = []
    for _ in range(rng.randint(5, 40)):
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6)))
        rows.append((text, rng.choice(["pos", "neg", "mid"])))
    if format == "jsonl":
        return "".join(
            json.dumps({"text": t, "label": y}, ensure_ascii=rng.random() < 0.5) + "\n"
            for t, y in rows
        ), 0
    if format == "tsv":
        header = "text\tlabel\n"
        return header + "".join(f"{t.replace(chr(9), ' ')}\t{y}\n" for t, y in rows), len(header)
    out = io.StringIO()
    writer = csv.writer(out, lineterminator=rng.choice(["\n", "\r\n"]))
    writer.writerow(["text", "label"])
    header = len(out.getvalue())
    writer.writerows(rows)
    return out.getvalue(), header


def _damage(rng, data, start):
    """Random damage to the bytes `data` at positions >= `start`."""
    data = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        kind = rng.choice(["bytes", "quote", "newline", "truncate", "long"])
        at = rng.randint(start, len(data)) if len(data) >= start else start
        if kind == "bytes":
            data[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif kind == "quote":
            data[at:at] = rng.choice([b'"', b'""', b'"\n', b"\r", b"\x00"])
        elif kind == "newline":
            data[at:at] = rng.choice([b"\n", b"\r\n", b"\n\n"])
        elif kind == "truncate":
            del data[at:]
        else:
            data[at:at] = b"z" * rng.choice([10, 200_000, 1_100_000])
    return bytes(data)


def _lines(data):
    """Non-blank lines of `data` as universal newlines split them (after a BOM)."""
    text = data.decode("utf-8", "surrogateescape").removeprefix("\ufeff")
    return sum(1 for line in re.split(r"\r\n|\r|\n", text) if line.strip())


def _check(data, path, format, body_only, line_rows):
    try:
        read = read_text_classification(path, "text", "label", format=format, log=False)
    except ReadError as error:
        assert not body_only, f"damage after the header raised: {error}"
        assert str(path) in str(error)
        return
    report = read.report
    assert report.num_kept + report.num_left_out == report.num_read, report
    assert len(read) == report.num_kept == len(read.labels)
    assert all(0 <= label < len(read.label_names) for label in read.labels)
    assert all(isinstance(t, str) and not re.search("[\udc80-\udcff]", t) for t in read.texts)
    if line_rows:
        header = 0 if format == "jsonl" else 1
        assert report.num_read == _lines(data) - header, (report, data[:300])


@pytest.mark.parametrize("format", ["csv", "tsv", "jsonl"])
def test_damaged_files_never_crash_a_read(tmp_path, format):
    rng = random.Random(f"fuzz-{format}")
    for case in range(250):
        text, header = _valid_file(rng, format)
        body_only = rng.random() < 0.5
        encoding = "utf-8" if body_only or rng.random() < 0.5 else rng.choice(ENCODINGS)
        data = text.encode(encoding, errors="replace")
        start = len(text[:header].encode(encoding, errors="replace")) if body_only else 0
        if rng.random() < 0.8:
            data = _damage(rng, data, start)
        suffix = rng.choice([""] * 3 + list(COMPRESSORS))
        path = tmp_path / f"case{case}.{format}{suffix}"
        stored = COMPRESSORS[suffix](data) if suffix else data
        if suffix and not body_only and rng.random() < 0.5:
            stored = stored[: rng.randint(0, len(stored))]  # compressed data cut short
        path.write_bytes(stored)
        line_rows = (
            not suffix
            and format != "csv"
            and (body_only or data.startswith(text[:header].encode()))
        )
        _check(data, path, format, body_only, line_rows and header_intact(data, format))


def header_intact(data, format):
    return format == "jsonl" or data.decode("utf-8", "surrogateescape").removeprefix(
        "\ufeff"
    ).startswith("text\tlabel\n")
