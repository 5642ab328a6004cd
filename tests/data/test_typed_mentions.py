"""`read_mention_typing`: typed mentions from CSV, TSV and JSON lines; every hostile row
(a span outside its text, reversed, blank, an offset that is not a whole number or is
4,000 digits long, an unknown label) reported with its line, never typed; offsets count
characters, as Python's `str` and the export's inputs do."""

import json

import pytest

from keras_attn.data import MentionTypingData, read_mention_typing
from keras_attn.data.readers import ReadError


def _csv(tmp_path, rows, header="text,mention_start,mention_end,label"):
    path = tmp_path / "mentions.csv"
    path.write_text(header + "\n" + "\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_good_rows_are_kept_with_character_offsets(tmp_path):
    path = _csv(tmp_path, [
        '"The café\'s geese flew.",11,16,noun.animal',  # after a non-ASCII character
        "A cedar fell.,2,7,noun.plant",
        "A cedar fell., 2 , 7 ,noun.plant",  # spaces around numbers
    ])  # fmt: skip
    data = read_mention_typing(path, log=False)
    assert isinstance(data, MentionTypingData) and len(data) == 3
    spans = [
        t[s:e] for t, s, e in zip(data.texts, data.mention_starts, data.mention_ends, strict=True)
    ]
    assert spans == ["geese", "cedar", "cedar"]
    assert (data.labels, data.label_names) == ([0, 1, 1], ["noun.animal", "noun.plant"])
    assert data.report.num_kept == 3 and not data.report.problems


def test_every_hostile_row_is_reported_and_left_out(tmp_path):
    rows = [
        "A cedar fell.,2,7,noun.plant",  # line 2: kept
        "A cedar fell.,7,2,noun.plant",  # reversed
        "A cedar fell.,-1,3,noun.plant",  # negative
        "A cedar fell.,2,99,noun.plant",  # past the end
        "A cedar fell.,2,2,noun.plant",  # empty
        "A cedar fell.,x,7,noun.plant",  # not a number
        "A cedar fell.,2.0,7,noun.plant",  # not a whole number
        "A cedar fell.,2," + "9" * 4000 + ",noun.plant",  # a crafted size
        '"A \u200b\u200b cedar",2,4,noun.plant',  # invisible characters only
        ",0,1,noun.plant",  # no text
        "A cedar fell.,2,7,",  # no label
        "A cedar fell.,2,7",  # a missing column
        "A cedar fell.,2,7,noun.person",  # a label outside `labels`
    ]
    data = read_mention_typing(_csv(tmp_path, rows), labels=["noun.plant"], log=False)
    assert data.texts == ["A cedar fell."]
    reasons = [p.reason.split(":")[0] for p in data.report.problems]
    assert [p.line for p in data.report.problems] == list(range(3, 15))
    assert reasons == ["span outside its text"] * 4 + ["bad offset"] * 3 + [
        "blank mention", "empty text", "empty label", "missing column", "unknown label",
    ]  # fmt: skip
    assert data.report.num_read == 13 and data.report.num_kept == 1


def test_json_lines_tsv_and_named_columns(tmp_path):
    path = tmp_path / "mentions.jsonl"
    records = [
        {"sentence": "The geese flew.", "s": 4, "e": 9, "type": "noun.animal"},
        {"sentence": "The geese flew.", "s": True, "e": 9, "type": "noun.animal"},  # a bool
        {"sentence": "The geese flew.", "s": 4.0, "e": 9, "type": "noun.animal"},
        {"sentence": 42, "s": 0, "e": 1, "type": "noun.animal"},  # not a text
    ]
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n")
    data = read_mention_typing(path, "sentence", "type", "s", "e", log=False)
    assert (data.texts, data.mention_starts) == (["The geese flew."], [4])
    assert [p.reason.split(":")[0] for p in data.report.problems] == [
        "bad offset", "bad offset", "empty text",
    ]  # fmt: skip
    tsv = tmp_path / "mentions.tsv"
    tsv.write_text('text\tmention_start\tmention_end\tlabel\nA "cedar" fell.\t3\t8\tnoun.plant\n')
    assert read_mention_typing(tsv, log=False).texts == ['A "cedar" fell.']
    with pytest.raises(ReadError, match="mention_start"):
        read_mention_typing(_csv(tmp_path, ["x,1"], header="text,label"), log=False)
