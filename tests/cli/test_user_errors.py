"""Every user error ends in one `error:` line naming the file, key or value, with exit
status 2 and no traceback; bad bytes from a shell are served, not crashed on."""

import subprocess
import sys

import pytest

from keras_attn.cli import predict as predict_cli
from keras_attn.cli import train as train_cli
from keras_attn.cli.user_errors import CommandError
from keras_attn.data import WordPieceTokenizer
from keras_attn.export import export_saved_model
from keras_attn.models import BertBackbone, BertClassifier
from tests.training.runs import ROOT, VOCABULARY, backbone_folder, environment, write_reviews

# One worker runs this module: its module fixtures are made once (`--dist loadgroup`).
pytestmark = pytest.mark.xdist_group("test_user_errors")


def _command(*args, timeout=300):
    """The `keras-attn` console script's entry point in a fresh process."""
    completed = subprocess.run(
        [sys.executable, "-m", "keras_attn.cli.main", *args],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        timeout=timeout,
    )
    return (
        completed.returncode,
        completed.stdout.decode(errors="replace"),
        completed.stderr.decode(errors="replace"),
    )


def _error_line(stderr):
    lines = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in stderr, stderr[-3000:]
    return lines[0]


@pytest.fixture(scope="module")
def sentiment_export(tmp_path_factory):
    model = BertClassifier(
        BertBackbone.from_size("tiny", vocabulary_size=len(VOCABULARY)), num_classes=2
    )
    base = tmp_path_factory.mktemp("exports")
    return export_saved_model(
        model,
        WordPieceTokenizer(VOCABULARY, sequence_length=16),
        base / "sentiment" / "1",
        labels=["neg", "pos"],
        warmup=False,
    )


@pytest.mark.slow
def test_predict_takes_bytes_that_are_not_utf8(sentiment_export):
    code, stdout, stderr = _command(
        "predict", str(sentiment_export), "--text", b"\xff\xfe bad bytes", "--text", "good film"
    )
    assert code == 0, stderr[-3000:]
    rows = stdout.strip().splitlines()
    assert len(rows) == 2 and rows[0].split()[0] in ("neg", "pos") and "\ufffd" in rows[0]


def test_predict_refuses_an_input_the_model_does_not_take(sentiment_export, capsys):
    with pytest.raises(SystemExit) as exit:
        predict_cli.main([str(sentiment_export), "--text", "good", "--text-pair", "bad"])
    assert exit.value.code == 2
    assert "no use for --text-pair" in _error_line(capsys.readouterr().err)


@pytest.mark.slow
def test_finetune_refuses_a_sequence_length_beyond_the_backbone(tmp_path):
    code, _, stderr = _command(
        "finetune",
        "--backbone",
        "minilm",
        "--sequence-length",
        "1000",
        "--steps",
        "2",
        "--output",
        str(tmp_path / "run"),
    )
    assert code == 2
    error = _error_line(stderr)
    assert "model.sequence_length" in error and "512" in error and "1000" in error
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_an_output_that_is_a_file_is_refused_before_anything_is_read(tmp_path):
    (tmp_path / "taken").write_text("not a folder")
    code, _, stderr = _command(
        "finetune",
        "--backbone",
        "minilm",
        "--train",
        str(tmp_path / "missing.csv"),
        "--output",
        str(tmp_path / "taken"),
    )
    assert code == 2
    assert (
        "--output" in _error_line(stderr) and "missing.csv" not in stderr
    )  # checked before the data


@pytest.mark.parametrize("case", ["missing column", "one class", "missing file", "bad vocabulary"])
def test_finetune_data_errors_are_one_line(tmp_path, capsys, case):
    backbone = backbone_folder(tmp_path / "backbone")
    reviews = write_reviews(tmp_path / "reviews.csv")
    flags = [
        "--backbone",
        str(backbone),
        "--train",
        str(reviews),
        "--text-column",
        "review",
        "--label-column",
        "sentiment",
        "--sequence-length",
        "16",
        "--steps",
        "2",
        "--output",
        str(tmp_path / "run"),
        "--verbose",
        "0",
    ]
    expected = {
        "missing column": "stars",
        "one class": "at least two labels",
        "missing file": "nowhere.csv",
        "bad vocabulary": "vocab.txt: not UTF-8",
    }[case]
    if case == "missing column":
        flags += ["--label-column", "stars"]
    elif case == "one class":
        reviews.write_text("review,sentiment\ngood film,pos\nfine,pos\n")
    elif case == "missing file":
        flags += ["--train", str(tmp_path / "nowhere.csv")]
    else:
        (backbone / "vocab.txt").write_bytes((backbone / "vocab.txt").read_bytes() + b"caf\xe9\n")
    with pytest.raises(CommandError) as exit:
        train_cli.main("finetune", flags)
    assert exit.value.code == 2
    assert expected in _error_line(capsys.readouterr().err)


def test_broken_files_are_one_line_too(tmp_path, capsys):
    (tmp_path / "bad.yaml").write_text("training: [unclosed\n")
    with pytest.raises(SystemExit) as exit:  # argparse's own exit for a bad --config
        train_cli.main(
            "pretrain", ["--config", str(tmp_path / "bad.yaml"), "--output", str(tmp_path / "run")]
        )
    assert exit.value.code == 2 and "bad.yaml" in capsys.readouterr().err
    backbone = backbone_folder(tmp_path / "backbone")
    (backbone / "backbone.keras").write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(CommandError, match="backbone.keras"):
        train_cli.main(
            "finetune",
            [
                "--backbone",
                str(backbone),
                "--train",
                str(write_reviews(tmp_path / "r.csv")),
                "--text-column",
                "review",
                "--label-column",
                "sentiment",
                "--sequence-length",
                "16",
                "--output",
                str(tmp_path / "run"),
            ],
        )
    from keras_attn.cli import export as export_cli

    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("model: {}\n")
    (run / "model.keras").write_bytes(b"truncated")
    # Not a zip archive at all: named as damaged (Keras itself says "File not found").
    with pytest.raises(CommandError, match=r"model.keras is not a .keras archive \(truncated"):
        export_cli.main([str(run), "--base", str(tmp_path / "saved")])
    assert "error: " in capsys.readouterr().err


def test_ctrl_c_is_one_line_and_names_the_resume(tmp_path, capsys, monkeypatch):
    from keras_attn.cli import main as cli
    from keras_attn.training import trainer

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(trainer, "train", interrupted)
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["finetune", "--output", str(tmp_path / "run")])
    assert exit_info.value.code == 130
    lines = capsys.readouterr().err.strip().splitlines()
    assert lines == [
        f"error: interrupted: the run in {tmp_path / 'run'} resumes from its last checkpoint "
        "when the same command starts again"
    ]


def test_a_folder_as_train_file_and_a_truncated_model_are_named(tmp_path, capsys):
    from keras_attn.cli import main as cli

    with pytest.raises(CommandError, match=r"data.train.*'.*' is a folder"):
        cli.main(["finetune", "--train", str(tmp_path), "--output", str(tmp_path / "run")])
    run = tmp_path / "export_me"
    run.mkdir()
    (run / "config.yaml").write_text("model: {}\ndata: {}\n")
    (run / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    (run / "model.keras").write_bytes(b"PK\x03\x04 cut short")  # a truncated archive
    with pytest.raises(CommandError, match=r"model.keras is not a .keras archive \(truncated"):
        cli.main(["export", str(run), "--base", str(tmp_path / "saved")])
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("error: ") for line in lines)


@pytest.mark.parametrize(
    "damage", ["no_variables", "truncated_variables", "flipped_variables", "truncated_graph"]
)
def test_predict_names_a_damaged_export(sentiment_export, tmp_path, capsys, damage):
    import shutil

    from keras_attn.cli import main as cli

    version = tmp_path / "sentiment" / "1"
    shutil.copytree(sentiment_export, version)
    if damage == "no_variables":
        shutil.rmtree(version / "variables")
    elif damage == "flipped_variables":  # one bit of a weight: the checksum names it
        (file,) = version.glob("variables/variables.data-*")
        data = bytearray(file.read_bytes())
        data[len(data) // 2] ^= 0x10
        file.write_bytes(bytes(data))
    else:
        (file,) = (
            version.glob("variables/variables.data-*")
            if damage == "truncated_variables"
            else [version / "saved_model.pb"]
        )
        file.write_bytes(file.read_bytes()[: file.stat().st_size // 2])
    with pytest.raises(CommandError, match=rf"{version} is a damaged export"):
        cli.main(["predict", str(version.parent), "--text", "good film"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")


@pytest.mark.slow
def test_export_hints_the_flag_its_model_takes(tmp_path, capsys):
    import keras

    from keras_attn.cli import main as cli
    from keras_attn.models import GPTLanguageModel

    run = tmp_path / "lm"
    run.mkdir()
    keras.utils.set_random_seed(0)
    GPTLanguageModel.from_size("tiny", vocabulary_size=len(VOCABULARY), max_sequence_length=8).save(
        run / "model.keras"
    )
    (run / "vocab.txt").write_text("\n".join(VOCABULARY) + "\n")
    (run / "config.yaml").write_text("model: {}\ndata: {}\n")
    keras.backend.clear_session()
    path = cli.main(["export", str(run), "--base", str(tmp_path / "saved")])
    out = capsys.readouterr().out
    assert f'keras-attn predict {path} --prompt "..."' in out and "tensorflow/serving:2." in out
    # --stop: the served reply ends right after the string, as `generate` ends it.
    cli.main(["predict", str(path), "--prompt", "the"])
    generated = capsys.readouterr().out.strip().split(" -> ", 1)[1][len("the ") :]
    stop = generated[1:4]  # inside the first token, or across two
    assert len(stop) == 3
    stopped = cli.main(["export", str(run), "--base", str(tmp_path / "stop"), "--stop", stop])
    capsys.readouterr()
    cli.main(["predict", str(stopped), "--prompt", "the"])
    end = generated.index(stop) + len(stop)
    assert capsys.readouterr().out.strip() == f"the -> the {generated[:end]}".strip()
    # --strategy sample: drawn in the graph (the same request, the same reply: a test of
    # tests/export/test_saved_model.py), not the greedy reply.
    flags = ["--strategy", "sample", "--temperature", "2", "--top-k", "5", "--seed", "3"]
    sampled = cli.main(["export", str(run), "--base", str(tmp_path / "sample"), *flags])
    capsys.readouterr()
    cli.main(["predict", str(sampled), "--prompt", "the"])
    answer = capsys.readouterr().out.strip()
    assert answer.startswith("the -> the") and answer != f"the -> the {generated}".strip()
    with pytest.raises(CommandError, match="--temperature, --seed sample: give --strategy"):
        cli.main(["export", str(run), "--temperature", "2", "--seed", "1", "--base", "x"])
    import shutil

    classifier = tmp_path / "classifier"
    shutil.copytree(run, classifier)
    backbone = BertBackbone.from_size("tiny", vocabulary_size=len(VOCABULARY))
    BertClassifier(backbone, num_classes=2).save(classifier / "model.keras")
    with pytest.raises(CommandError, match="--stop ends a language model's replies"):
        cli.main(["export", str(classifier), "--stop", "x", "--base", str(tmp_path / "no")])
    assert not (tmp_path / "no").exists()


def test_verbose_shows_the_traceback_above_the_one_error_line(tmp_path, capsys):
    from keras_attn.cli import main as cli

    missing = ["predict", str(tmp_path / "no_model"), "--text", "good"]
    for verbose in (False, True):
        with pytest.raises(CommandError):
            cli.main(["--verbose", *missing] if verbose else missing)
        stderr = capsys.readouterr().err
        assert ("Traceback (most recent call last)" in stderr) is verbose
        assert stderr.splitlines()[-1].startswith("error: ") and "no_model" in stderr
        assert sum(line.startswith("error:") for line in stderr.splitlines()) == 1


@pytest.mark.parametrize(
    ("command", "flags", "expected"),
    [
        ("predict", ["--mention-start", "9" * 4000, "--mention-end", "5"], "expected 0 to"),
        ("predict", ["--mention-start", "0", "--mention-end", "2147483648"], "2147483648"),
        ("predict", ["--mention-start", "9" * 5000, "--mention-end", "5"], "expected an integer"),
        ("predict", ["--mention-start", "-1", "--mention-end", "5"], "expected 0 to 2147483647"),
        ("export", ["--num-beams", "1000000", "--strategy", "beam"], "expected 1 to 64"),
        ("export", ["--stop", "x" * 10**5], "1 to 256 characters"),
        ("export", ["--stop", ""], "1 to 256 characters"),
        ("export", ["--strategy", "sample", "--seed", "2147483648"], "expected 0 to 2147483647"),
        ("export", ["--strategy", "sample", "--temperature", "0"], "expected 0.01 to 100"),
    ],
)
def test_size_flags_are_bounded_at_parsing(tmp_path, capsys, command, flags, expected):
    """The probe's sizes (an int32 mention offset of 4,000 digits or 2^31, a million
    beams), refused as `argument --flag: ...` before any model is loaded."""
    from keras_attn.cli import main as cli

    args = [str(tmp_path / "nothing"), *flags]
    args += ["--text", "The lion passed."] if command == "predict" else []
    with pytest.raises(SystemExit) as exit:
        cli.main([command, *args])
    line = _error_line(capsys.readouterr().err)
    assert exit.value.code == 2 and expected in line and "argument --" in line, line
    assert not (tmp_path / "nothing").exists()
