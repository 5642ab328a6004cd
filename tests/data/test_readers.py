"""Readers: CSV/TSV/JSONL (compressed too), CoNLL and SQuAD; bad rows reported with file:line."""

import bz2
import gzip
import json
import logging
import lzma

import pytest

from keras_attn.data import (
    CorpusData,
    ReadReport,
    SpanQAData,
    TaggingData,
    TextClassificationData,
    read_conll,
    read_corpus,
    read_squad,
    read_text_classification,
    read_text_pairs,
)
from keras_attn.data.readers import Problem


def test_csv_with_pairs_and_every_kind_of_bad_row(tmp_path, caplog):
    path = tmp_path / "pairs.csv"
    path.write_text(
        "premise,hypothesis,label\n"
        'a man sleeps,"a person, resting",entail\n'  # line 2: good (quoted comma)
        "a dog runs,,neutral\n"  # line 3: empty second text
        '"two\nlines",x,contradict\n'  # line 4-5: good, spans two lines
        "cats,dogs,maybe\n"  # line 6: unknown label
        "short row\n"  # line 7: missing columns
    )
    with caplog.at_level(logging.WARNING, logger="keras_attn.data"):
        data = read_text_classification(
            path,
            "premise",
            "label",
            text_pair_column="hypothesis",
            labels=["entail", "neutral", "contradict"],
        )
    assert isinstance(data, TextClassificationData)
    assert data.texts == ["a man sleeps", "two\nlines"]
    assert data.text_pairs == ["a person, resting", "x"]
    assert data.labels == [0, 2]
    report = data.report
    assert (report.num_read, report.num_kept, report.num_left_out) == (5, 2, 3)
    assert [(p.line, p.reason.split(":")[0]) for p in report.problems] == [
        (3, "empty text"),
        (6, "unknown label"),
        (7, "missing column"),
    ]
    assert f"{path}:6: unknown label: 'maybe'" in caplog.text
    assert report.counts() == {"empty text": 1, "unknown label": 1, "missing column": 1}


def test_tsv_and_labels_found_in_the_file(tmp_path):
    path = tmp_path / "train.tsv"
    path.write_text("sentence\tlabel\n\t1\nawful\t0\ngood\t1\n")
    data = read_text_classification(path, "sentence", "label", log=False)
    assert data.label_names == ["0", "1"] and data.labels == [0, 1] and data.text_pairs is None
    assert [(p.line, p.reason) for p in data.report.problems] == [
        (2, "empty text: column sentence")
    ]


@pytest.mark.parametrize("opener, suffix", [(bz2.open, ".bz2"), (gzip.open, ".gz")])
def test_compressed_jsonl_with_a_broken_line(tmp_path, opener, suffix):
    path = tmp_path / f"reviews.jsonl{suffix}"
    with opener(path, "wt") as f:
        f.write(json.dumps({"text": "loved it", "stars": "pos"}) + "\n")
        f.write("{not json\n")
        f.write("\n")
        f.write(json.dumps(["a list"]) + "\n")
        f.write(json.dumps({"text": "meh", "stars": "neg"}) + "\n")
    data = read_text_classification(path, "text", "stars", labels=["neg", "pos"], log=False)
    assert data.texts == ["loved it", "meh"] and data.labels == [1, 0]
    assert [(p.line, p.reason.split(":")[0]) for p in data.report.problems] == [
        (2, "not JSON"),
        (4, "not JSON"),
    ]
    assert data.report.num_read == 4


def test_split_is_fixed_by_the_seed_and_dataset_yields_pairs(tmp_path):
    data = TextClassificationData(
        [f"t{i}" for i in range(10)],
        [f"p{i}" for i in range(10)],
        [i % 2 for i in range(10)],
        ["a", "b"],
    )
    train, test = data.split(test_fraction=0.2, seed=3)
    again, _ = data.split(test_fraction=0.2, seed=3)
    assert train.texts == again.texts and len(test) == 2
    assert sorted(train.texts + test.texts) == sorted(data.texts)
    (text, pair), label = next(iter(test.dataset()))
    assert text.numpy().decode()[1:] == pair.numpy().decode()[1:]
    with pytest.raises(ValueError, match="test_fraction=1.5"):
        data.split(test_fraction=1.5)


def test_bad_arguments(tmp_path):
    path = tmp_path / "data.txt"
    path.write_text("x")
    with pytest.raises(ValueError, match="Cannot tell the format"):
        read_text_classification(path, "text", "label")
    with pytest.raises(ValueError, match="format='xml'"):
        read_text_classification(path, "text", "label", format="xml")
    header = tmp_path / "data.csv"
    header.write_text("sentence,label\nfine,1\n")
    with pytest.raises(
        ValueError,
        match=r"Expected column\(s\) \['text'\] in the header .* Found: \['sentence', 'label'\]",
    ):
        read_text_classification(header, "text", "label")


def test_integer_labels_in_json(tmp_path):
    path = tmp_path / "ints.jsonl"
    path.write_text('{"t": "good", "y": 1}\n{"t": "bad", "y": 0}\n{"t": "odd", "y": 2}\n')
    data = read_text_classification(path, "t", "y", labels=[0, 1], log=False)
    assert data.labels == [1, 0] and data.report.problems[0].line == 3


def test_conll_sentences_tags_and_problems(tmp_path):
    path = tmp_path / "ner.conll.gz"
    with gzip.open(path, "wt") as f:
        f.write(
            "-DOCSTART- -X- -X- O\n\n"
            "EU NNP B-NP B-ORG\nrejects VBZ B-VP O\n\n"  # lines 3-4
            "Peter NNP B-NP B-PER\nBlackburn\n\n"  # lines 6-7: too few columns
            "BRUSSELS NNP B-NP B-LOC\n\n\n"  # line 9
            "Only NN B-NP B-MISC\n"
        )  # line 12: unknown tag, no final blank
    data = read_conll(path, tags=["O", "B-ORG", "B-PER", "B-LOC"], log=False)
    assert isinstance(data, TaggingData)
    assert data.words == [["EU", "rejects"], ["BRUSSELS"]] and data.tags == [[1, 0], [3]]
    assert [(p.line, p.reason) for p in data.report.problems] == [
        (7, "too few columns: 1"),
        (12, "unknown tag: 'B-MISC'"),
    ]
    words, tags = next(iter(data.dataset()))
    assert words.numpy().tolist() == [b"EU", b"rejects"] and tags.numpy().tolist() == [1, 0]


def test_conll_tag_names_found_put_o_first(tmp_path):
    path = tmp_path / "pos.tsv"
    path.write_text("the\tDET\ncat\tNOUN\n\nO\tO\n")
    data = read_conll(path, separator="\t", log=False)
    assert data.tag_names == ["O", "DET", "NOUN"] and data.tags == [[1, 2], [0]]


def test_squad_v2_byte_offsets_and_problems(tmp_path):
    context = "Zoë met Émile in Paris."
    qas = [
        {"id": "a", "question": "Where?", "answers": [{"text": "Paris", "answer_start": 17}]},
        {"id": "b", "question": "Who met Zoë?", "answers": [{"text": "Émile", "answer_start": 8}]},
        {"id": "c", "question": "When?", "answers": [], "is_impossible": True},
        {"id": "d", "question": "Why?", "answers": []},  # no answer
        {
            "id": "e",
            "question": " ",
            "answers": [{"text": "Zoë", "answer_start": 0}],
        },  # empty question
        {
            "id": "f",
            "question": "Who?",
            "answers": [{"text": "Zoe", "answer_start": 0}],
        },  # mismatch
    ]
    path = tmp_path / "dev-v2.0.json"
    path.write_text(
        json.dumps(
            {"version": "v2.0", "data": [{"paragraphs": [{"context": context, "qas": qas}]}]}
        )
    )
    data = read_squad(path, log=False)
    assert isinstance(data, SpanQAData)
    assert data.ids == ["a", "b", "c"] and data.answers == ["Paris", "Émile", ""]
    encoded = context.encode()
    assert encoded[data.answer_starts[0] : data.answer_ends[0]].decode() == "Paris"
    assert encoded[data.answer_starts[1] : data.answer_ends[1]].decode() == "Émile"
    assert (data.answer_starts[2], data.answer_ends[2]) == (-1, -1)
    assert [(p.line, p.reason.split(":")[0]) for p in data.report.problems] == [
        (4, "no answer"),
        (5, "empty text"),
        (6, "answer does not match the context"),
    ]
    example = next(iter(data.dataset()))
    assert int(example["answer_start"]) == data.answer_starts[0]


def test_report_text_lists_the_first_problems():
    report = ReadReport(
        "f.csv",
        num_read=15,
        num_kept=3,
        problems=[Problem("f.csv", i, "empty text: column t") for i in range(11)]
        + [Problem("f.csv", 11, "unknown label: 'plot'")],
    )
    text = str(report)
    assert text.splitlines()[0] == (
        "f.csv: kept 3 of 15 rows; left out 12 (empty text: 11, unknown label: 1)"
    )
    # One line per distinct reason, not the same reason ten times (the main job's noise).
    assert text.splitlines()[1:] == [
        "  f.csv:0: empty text: column t (11 rows: lines 0, 1, 2, ...)",
        "  f.csv:11: unknown label: 'plot'",
    ]
    many = ReadReport("g.csv", 12, 0, [Problem("g.csv", i, f"reason {i}") for i in range(12)])
    assert str(many).splitlines()[-1] == "  ... and 2 other reasons"


# Real-world files (issue 19): what spreadsheets write, stray bytes, huge cells, stray quotes.


def test_a_byte_order_mark_is_not_part_of_the_first_column(tmp_path):
    path = tmp_path / "excel.csv"
    path.write_text("text,label\ngood,pos\nbad,neg\n", encoding="utf-8-sig")
    data = read_text_classification(path, "text", "label", log=False)
    assert data.texts == ["good", "bad"] and not data.report.problems


def test_a_byte_that_is_not_utf8_costs_its_row_only(tmp_path):
    path = tmp_path / "mixed.csv"
    path.write_bytes(b"text,label\ngood,pos\ncaf\xe9 au lait,neg\nbad,neg\n")
    data = read_text_classification(path, "text", "label", log=False)
    assert data.texts == ["good", "bad"]
    assert [str(p) for p in data.report.problems] == [
        f"{path}:3: not UTF-8: byte 0xe9 in column text"
    ]
    jsonl = tmp_path / "mixed.jsonl"
    jsonl.write_bytes(b'{"t": "ok", "y": "a"}\n{"t": "\xff", "y": "b"}\n')
    data = read_text_classification(jsonl, "t", "y", log=False)
    assert data.texts == ["ok"] and data.report.problems[0].line == 2


def test_long_cells_are_kept_and_over_long_ones_reported(tmp_path):
    from keras_attn.data.readers.lines import MAX_FIELD_CHARS

    path = tmp_path / "long.csv"
    long_text, too_long = (
        "word " * 40_000,
        "x" * (MAX_FIELD_CHARS + 1),
    )  # 200,000 characters is fine
    path.write_text(f"text,label\n{long_text},pos\n{too_long},neg\nafter,neg\n")
    data = read_text_classification(path, "text", "label", log=False)
    assert data.texts == [long_text, "after"]
    assert [(p.line, p.reason.split(":")[0]) for p in data.report.problems] == [
        (3, "field too long")
    ]
    import csv

    assert csv.field_size_limit() == 131072  # the process-wide limit is put back


def test_tsv_quotes_are_characters_and_rows_match_lines(tmp_path):
    path = tmp_path / "quotes.tsv"
    rows = ['"unclosed quote\tpos'] + [
        f"review {i}\t{'pos' if i % 2 else 'neg'}" for i in range(14)
    ]
    path.write_text("text\tlabel\n" + "\n".join(rows) + "\n")
    data = read_text_classification(path, "text", "label", log=False)
    assert data.report.num_read == 15 and len(data) == 15 and data.texts[0] == '"unclosed quote'
    assert data.label_names == ["neg", "pos"]
    # Asked for, quotes delimit TSV fields too.
    quoted = tmp_path / "quoted.tsv"
    quoted.write_text('text\tlabel\n"a\ttab"\tpos\nplain\tneg\n')
    data = read_text_classification(quoted, "text", "label", quoted=True, log=False)
    assert data.texts == ["a\ttab", "plain"]
    # Not asked for, the tab splits the text: a row of too many fields is reported, never
    # read as text `"a` labelled `tab"` (a third class).
    data = read_text_classification(quoted, "text", "label", log=False)
    assert data.texts == ["plain"] and data.label_names == ["neg"]
    (problem,) = data.report.problems
    assert problem.line == 2 and problem.reason.startswith("3 fields, the header has 2")


def test_rows_with_more_fields_than_the_header_are_reported_in_csv_and_predict(tmp_path):
    from keras_attn.data.readers.labelled_texts import table_rows

    path = tmp_path / "extra.csv"
    path.write_text("text,label\ngood,pos\nbad,neg,surplus\n")
    data = read_text_classification(path, "text", "label", log=False)
    assert data.texts == ["good"] and data.report.problems[0].line == 3
    rows = list(table_rows(path, ["text"]))
    assert rows[0] == (2, {"text": "good"}, None)
    assert rows[1][0] == 3 and rows[1][1] is None and "3 fields" in rows[1][2]


def test_a_csv_quote_that_is_never_closed_costs_one_row(tmp_path):
    path = tmp_path / "unclosed.csv"
    path.write_text(
        'text,label\ngood,pos\n"not closed,neg\nfine,pos\nbad,neg\n"x"y,pos\nlast,neg\n"never,pos\n'
    )
    data = read_text_classification(path, "text", "label", log=False)
    assert data.texts == ["good", "fine", "bad", "last"]
    assert [(p.line, p.reason) for p in data.report.problems] == [
        (3, "bad quoting: a quoted field opened here ran on for 3 more line(s)"),
        (6, "bad quoting: text after a closing quote"),
        (8, "bad quoting: a quoted field opened here is never closed"),
    ]
    assert data.report.num_read == 7


@pytest.mark.parametrize("opener, suffix", [(gzip.open, ".gz"), (lzma.open, ".xz")])
def test_compressed_data_cut_short_is_reported(tmp_path, opener, suffix):
    whole = tmp_path / f"whole.csv{suffix}"
    with opener(whole, "wt") as f:
        f.write(
            "text,label\n"
            + "".join(f"review number {i} {'x' * (i % 50)},pos\n" for i in range(3000))
        )
    cut = tmp_path / f"cut.csv{suffix}"
    cut.write_bytes(whole.read_bytes()[: whole.stat().st_size // 2])
    data = read_text_classification(cut, "text", "label", log=False)
    report = data.report
    assert 0 < len(data) < 3000 and report.num_kept + report.num_left_out == report.num_read
    assert report.problems[-1].reason.startswith("unreadable: ")
    with pytest.raises(ValueError, match="garbage.csv.gz"):
        (tmp_path / "garbage.csv.gz").write_bytes(b"not gzip at all")
        read_text_classification(tmp_path / "garbage.csv.gz", "text", "label")


def test_squad_that_is_not_json_names_the_file(tmp_path):
    path = tmp_path / "train.json"
    path.write_text('{"data": [{"paragraphs": [')
    with pytest.raises(ValueError, match=r"train.json: not JSON: .*line 1"):
        read_squad(path)
    path.write_bytes(
        json.dumps(
            {
                "data": [
                    {
                        "paragraphs": [
                            {
                                "context": "Ann sang.",
                                "qas": [
                                    {
                                        "id": "1",
                                        "question": "Who?",
                                        "answers": [{"text": "Ann", "answer_start": 0}],
                                    },
                                    7,
                                ],
                            }
                        ]
                    },
                    "x",
                ]
            }
        ).encode()
    )
    data = read_squad(path, log=False)
    assert data.ids == ["1"] and data.report.counts() == {"not SQuAD": 2}


def test_corpus_and_pairs_readers(tmp_path):
    corpus = tmp_path / "corpus.txt"
    corpus.write_bytes(b"\xef\xbb\xbfFirst.\n  Second.  \n\n\nThird \x80.\nFourth.\n")
    data = read_corpus(corpus, log=False)
    assert isinstance(data, CorpusData) and data.documents == [["First.", "Second."], ["Fourth."]]
    assert len(data) == 2 and len(CorpusData([["One."]])) == 1
    assert (data.report.num_read, data.report.num_kept, data.report.problems[0].line) == (4, 3, 5)
    pairs = tmp_path / "pairs.tsv"
    pairs.write_bytes(
        b'1\tHallo\tx\tHello\n1\tHallo\tx\t"Hi\n2\t\tx\tEmpty\n3\tDanke\n4\tBitte\tx\tPlease \xff\n'
    )
    data = read_text_pairs(pairs, source_column=1, target_column=3, group_column=0, log=False)
    assert data.targets == ["Hello", '"Hi'] and data.groups == ["1", "1"]
    assert [p.reason.split(":")[0] for p in data.report.problems] == [
        "empty text",
        "too few columns",
        "not UTF-8",
    ]
