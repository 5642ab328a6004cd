"""`keras-attn predict MODEL --input FILE --output FILE`: one output row per input row,
in order, the served outputs; broken rows named by line, never dropped."""

import csv
import json

import numpy as np
import pytest
import tensorflow as tf

from keras_attn.cli import main as cli
from keras_attn.cli.user_errors import CommandError
from keras_attn.data import WordPieceTokenizer
from keras_attn.export import export_saved_model
from keras_attn.models import BertBackbone, BertClassifier, BertTokenClassifier

# One worker runs this module: its module fixtures are made once (`--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("test_predict_file")

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "new", "york"]


def backbone():
    return BertBackbone.from_size("tiny", vocabulary_size=len(VOCABULARY), max_sequence_length=16)


@pytest.fixture(scope="module")
def classifier(tmp_path_factory):
    path = export_saved_model(
        BertClassifier(backbone(), num_classes=2),
        WordPieceTokenizer(VOCABULARY, sequence_length=16),
        tmp_path_factory.mktemp("models") / "reviews" / "1",
        labels=["rotten", "fresh"],
        warmup=False,
    )
    return path, tf.saved_model.load(str(path)).signatures["serving_default"]


def served(signature, texts):
    outputs = signature(text=tf.constant(texts))
    return {k: v.numpy() for k, v in outputs.items()}


@pytest.mark.slow  # the module's export; make test-fast keeps the row-by-row retry test
def test_a_csv_with_broken_rows_gets_one_output_row_per_input_row(classifier, tmp_path, capsys):
    path, signature = classifier
    source = tmp_path / "reviews.csv"
    good = ["good film", "bad", "", "new york, good", "film film bad"]
    source.write_bytes(
        b"id,review\n"
        b"1,good film\n"
        b"2,bad\n"
        b"3,\n"  # an empty text is predicted like any other
        b'4,"new york, good"\n'
        b"5\n"  # line 6: no review column
        b"6,caf\xe9\n"  # line 7: not UTF-8
        b'7,"film" film\n'  # line 8: text after a closing quote
        b"8,film film bad\n"
    )
    output = tmp_path / "predictions.csv"
    summary = cli.main(
        ["predict", str(path), "--input", str(source), "--output", str(output)]
        + ["--text-column", "review", "--batch-size", "2", "--quiet"]
    )
    printed = capsys.readouterr().out
    assert "5 of 8 rows predicted" in printed and "rows/s" in printed
    assert f"{source}:6: missing column: review" in printed
    assert f"{source}:7: not UTF-8: byte 0xe9 in column review" in printed
    assert f"{source}:8: bad quoting: text after a closing quote" in printed
    assert summary["rows"] == 8 and summary["predicted"] == 5 and summary["rows_per_second"] > 0
    with open(output, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [int(r["line"]) for r in rows] == [2, 3, 4, 5, 6, 7, 8, 9]
    header = ["line", "id", "review", "label_ids", "labels", "probabilities", "error"]
    assert list(rows[0]) == header  # the input's other columns are kept
    assert [r["id"] for r in rows] == ["1", "2", "3", "4", "", "", "", "8"]
    predicted = [r for r in rows if not r["error"]]
    assert [r["review"] for r in predicted] == good
    expected = served(signature, good)
    assert [r["labels"] for r in predicted] == [s.decode() for s in expected["labels"]]
    assert [int(r["label_ids"]) for r in predicted] == expected["label_ids"].tolist()
    np.testing.assert_allclose(
        [json.loads(r["probabilities"]) for r in predicted], expected["probabilities"], atol=1e-5
    )
    broken = [r for r in rows if r["error"]]
    assert [r["error"] for r in broken] == [
        "missing column: review",
        "not UTF-8: byte 0xe9 in column review",
        "bad quoting: text after a closing quote",
    ]
    assert all(r["labels"] == "" and r["probabilities"] == "" for r in broken)


@pytest.mark.slow
def test_jsonl_in_and_out_and_bad_requests(classifier, tmp_path):
    path, signature = classifier
    source = tmp_path / "reviews.jsonl"
    source.write_text('{"text": "good film"}\nnot json\n{"text": 7}\n')
    output = tmp_path / "out.jsonl"
    summary = cli.main(
        ["predict", str(path), "--input", str(source), "--output", str(output), "--quiet"]
    )
    rows = [json.loads(line) for line in output.read_text().splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 3]
    assert rows[1]["error"].startswith("not JSON") and summary["failed"][0][0] == 2
    assert rows[2]["text"] == 7 and rows[2]["error"] == ""  # the input's value as it was
    expected = served(signature, ["good film", "7"])
    np.testing.assert_allclose(
        [rows[0]["probabilities"], rows[2]["probabilities"]], expected["probabilities"], atol=1e-5
    )
    with pytest.raises(CommandError, match="column.*'review'.*Found: \\['text'\\]"):
        (tmp_path / "t.csv").write_text("text\ngood\n")
        cli.main(
            ["predict", str(path), "--input", str(tmp_path / "t.csv"), "--output", str(output)]
            + ["--text-column", "review"]
        )
    with pytest.raises(CommandError, match="--question-column"):
        cli.main(
            ["predict", str(path), "--input", str(source), "--output", str(output)]
            + ["--question-column", "q"]
        )
    with pytest.raises(CommandError, match="expected a .csv, .tsv or .jsonl"):
        cli.main(
            ["predict", str(path), "--input", str(source), "--output", str(tmp_path / "o.txt")]
        )
    with pytest.raises(CommandError, match="leave out \\['--text'\\]"):
        cli.main(
            ["predict", str(path), "--input", str(source), "--output", str(output)]
            + ["--text", "good"]
        )
    with pytest.raises(CommandError, match="overwrite"):
        cli.main(["predict", str(path), "--input", str(source), "--output", str(source)])
    with pytest.raises(CommandError, match="--batch-size 0"):
        cli.main(
            ["predict", str(path), "--input", str(source), "--output", str(output)]
            + ["--batch-size", "0"]
        )


def test_an_existing_output_survives_every_failed_run(classifier, tmp_path, monkeypatch):
    from keras_attn.cli import predict_file

    path, _ = classifier
    precious = tmp_path / "precious.csv"
    precious.write_bytes(b"line,text\n1,kept\n")
    source = tmp_path / "reviews.csv"
    source.write_text("text\ngood film\nbad\n")

    def run(*arguments):
        return cli.main(["predict", str(path), "--output", str(precious), "--quiet", *arguments])

    failures = [
        (["--input", str(source), "--text-column", "review"], "column.*'review'"),
        (["--input", str(tmp_path / "missing.csv")], "--input .*missing.csv: no such file"),
    ]
    for arguments, match in failures:
        with pytest.raises(CommandError, match=match):
            run(*arguments)
        assert precious.read_bytes() == b"line,text\n1,kept\n"
    with pytest.raises(CommandError, match="the folder .*nowhere does not exist"):
        cli.main(
            [
                "predict",
                str(path),
                "--input",
                str(source),
                "--output",
                str(tmp_path / "nowhere" / "o.csv"),
            ]
        )

    def interrupted(self, batch):
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:  # Ctrl-C in the middle of the file: exit 130
        patch.setattr(predict_file._RowPredictor, "predict_rows", interrupted)
        with pytest.raises(SystemExit, match="130"):
            run("--input", str(source))
    assert precious.read_bytes() == b"line,text\n1,kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious.csv", "reviews.csv"]
    run("--input", str(source))  # a run that ends replaces it whole
    assert [row["text"] for row in csv.DictReader(precious.open())] == ["good film", "bad"]


@pytest.mark.slow
def test_a_tagger_gets_its_words_and_tags_per_row(tmp_path):
    path = export_saved_model(
        BertTokenClassifier(backbone(), num_classes=2),
        WordPieceTokenizer(VOCABULARY, sequence_length=16),
        tmp_path / "ner" / "1",
        labels=["O", "LOC"],
        warmup=False,
    )
    source = tmp_path / "sentences.tsv"
    source.write_text('text\nNew York film\n"good"\n')  # TSV: a quote is a character
    output = tmp_path / "tags.tsv"
    cli.main(["predict", str(path), "--input", str(source), "--output", str(output), "--quiet"])
    with open(output, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    assert [json.loads(r["words"]) for r in rows] == [["New", "York", "film"], ['"', "good", '"']]
    tags = [json.loads(r["tags"]) for r in rows]
    assert [len(t) for t in tags] == [3, 3] and {t for row in tags for t in row} <= {"O", "LOC"}
    assert [len(json.loads(r["probabilities"])) for r in rows] == [3, 3]


class _LengthSignature:
    """What a loaded SavedModel's signature offers: keyword inputs, output specs; the
    model refuses the text "boom"."""

    structured_input_signature = ((), {"text": tf.TensorSpec([None], tf.string)})
    structured_outputs = {"length": tf.TensorSpec([None], tf.int32)}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    def serve(text):
        tf.debugging.assert_equal(
            tf.reduce_any(tf.equal(text, "boom")), False, message="a text the model refuses"
        )
        return {"length": tf.strings.length(text)}

    def __call__(self, text):
        return _LengthSignature.serve(text)


@pytest.fixture
def length_model(monkeypatch):
    import keras_attn.export.versions as versions

    class Loaded:
        signatures = {"serving_default": _LengthSignature()}

    monkeypatch.setattr(versions, "load_saved_model", lambda path: Loaded())
    monkeypatch.setattr(versions, "resolve_export", lambda path: path)  # no folder to read


def predict_rows(tmp_path, source, output):
    summary = cli.main(
        ["predict", str(tmp_path), "--input", str(source), "--output", str(output), "--quiet"]
    )
    if output.suffix == ".jsonl":
        return summary, [json.loads(line) for line in output.read_text().splitlines()]
    with open(output, newline="", encoding="utf-8") as f:
        return summary, list(csv.DictReader(f, delimiter="," if output.suffix == ".csv" else "\t"))


def test_a_row_the_model_refuses_costs_only_itself(tmp_path, length_model):
    """The batch is retried row by row: the other rows of the batch are still predicted."""
    source, output = tmp_path / "in.csv", tmp_path / "out.csv"
    source.write_text("text\nab\nboom\nabc\n")
    summary, rows = predict_rows(tmp_path, source, output)
    assert [r["length"] for r in rows] == ["2", "", "3"]
    assert rows[1]["error"].startswith(
        "not predicted: assertion failed: [a text the model refuses]"
    )
    assert summary["failed"] == [(3, rows[1]["error"])] and summary["predicted"] == 2


def test_every_input_column_is_kept_and_none_is_overwritten(tmp_path, length_model):
    source = tmp_path / "in.tsv"
    source.write_text("id\tline\ttext\tlength\n7\ta\tab\t99\n8\tb\tboom\t0\n9\n")
    _, rows = predict_rows(tmp_path, source, tmp_path / "out.tsv")
    assert list(rows[0]) == ["line", "id", "input_line", "text", "input_length", "length", "error"]
    assert [(r["line"], r["id"], r["input_line"], r["input_length"]) for r in rows] == [
        ("2", "7", "a", "99"),
        ("3", "8", "b", "0"),  # refused by the model: its input still kept
        ("4", "", "", ""),  # no text column: nothing read
    ]
    assert [r["length"] for r in rows] == ["2", "", ""]
    source = tmp_path / "in.jsonl"  # JSON lines -> CSV: every key seen, in order
    source.write_text('{"text": "abc", "tags": ["x"]}\n{"id": 2, "text": "a"}\n')
    _, rows = predict_rows(tmp_path, source, tmp_path / "out.csv")
    assert list(rows[0]) == ["line", "text", "tags", "id", "length", "error"]
    assert [(r["tags"], r["id"], r["length"]) for r in rows] == [('["x"]', "", "3"), ("", "2", "1")]
    _, rows = predict_rows(tmp_path, source, tmp_path / "out.jsonl")
    assert rows[1] == {"line": 2, "text": "a", "tags": "", "id": 2, "length": 1, "error": ""}
