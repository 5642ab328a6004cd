"""`keras-attn lm --base FILE.gguf`: a trained decoder read from a GGUF file goes on
training on a corpus (LoRA or every weight) with its own tokenizer, reports its held-out
metrics before and after, is saved with that tokenizer where `evaluate` and `export`
read it, and resumes only from the same file."""

import json

import keras
import numpy as np
import pytest

from keras_attn.cli.main import main
from keras_attn.training.config import ConfigError
from tests.models.llama.gguf_files import byte_level_bpe_metadata, write_llama_gguf
from tests.training.runs import write_corpus

FLAGS = dict(held_out_documents=4, sequence_length=16, batch_size=4, steps=12,
             steps_per_epoch=6, validation_steps=2, learning_rate=0.01, histogram_every=0,
             samples_every=6, verbose=0)  # fmt: skip


def _flags(**overrides):
    return [
        item
        for key, value in {**FLAGS, **overrides}.items()
        for item in (f"--{key}".replace("_", "-"), str(value))
    ]


def _write_base(path, seed=0):
    metadata, reference = byte_level_bpe_metadata()
    write_llama_gguf(path, vocabulary=len(metadata["token_list"]), tokenizer=metadata, seed=seed)
    return reference


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("base")
    reference = _write_base(folder / "tiny.gguf")
    return folder / "tiny.gguf", write_corpus(folder / "corpus.txt"), reference


@pytest.fixture(scope="module")
def lora_run(files, tmp_path_factory):
    base, corpus, _ = files
    output = tmp_path_factory.mktemp("run") / "run"
    result = main(["lm", "--base", str(base), "--corpus", str(corpus), "--lora-rank", "4",
                   *_flags(), "--output", str(output)])  # fmt: skip
    return result, output


def _weights(model):
    return {w.path: keras.ops.convert_to_numpy(w) for w in model.weights}


@pytest.mark.slow  # a training run: over 10 s, left out of `make test-fast`
def test_a_gguf_decoder_trains_with_lora_and_reports_before_and_after(files, lora_run):
    from keras_attn.models import from_gguf

    base, _, _ = files
    result, output = lora_run
    metrics = json.loads((output / "metrics.json").read_text())
    assert {"before_val_loss", "before_val_accuracy", "val_loss"} <= set(metrics)
    assert metrics["val_loss"] < metrics["before_val_loss"] - 0.1, metrics
    assert (
        json.loads((output / "metrics_before.json").read_text())["before_val_loss"]
        == (metrics["before_val_loss"])
    )
    assert result.model.lora_rank == 4
    # Only the adapted projections moved in the merged model.keras; it keeps the file's
    # tokenizer (in the .keras file, and beside it for `evaluate` and `export`).
    saved = keras.saving.load_model(output / "model.keras", compile=False)
    before, after = _weights(from_gguf(base)), _weights(saved)
    assert before.keys() == after.keys()
    moved = {p for p in before if not np.array_equal(before[p], after[p])}
    assert moved and {p.split("/")[-2] for p in moved} == {"query", "value"}, moved
    assert type(saved.preprocessor.tokenizer).__name__ == "ByteLevelBPETokenizer"
    assert isinstance(saved.generate("the king", max_length=12), str)
    for name in ("vocab.json", "merges.txt", "byte_level_bpe.json", "adapters.lora.h5"):
        assert (output / name).is_file(), name
    assert not list(output.glob(".*tmp*")), list(output.iterdir())


@pytest.mark.slow  # a training run: over 10 s, left out of `make test-fast`
def test_the_run_folder_evaluates_as_a_language_model(files, lora_run):
    from keras_attn.cli.evaluate import load_language_model

    _, _, reference = files
    model, tokenize = load_language_model(lora_run[1])
    assert tokenize(["the theme 12"]) == [reference.encode("the theme 12").ids]
    assert model.lora_rank is None  # merged


def test_windows_hold_the_ids_of_the_documents_text_with_newlines(files):
    from keras_attn.data import language_model_windows
    from keras_attn.models.gguf import tokenizers as gguf_tokenizers
    from keras_attn.models.gguf.reader import GGUFFile

    base, _, reference = files
    tokenizer = gguf_tokenizers.tokenizer(GGUFFile(base))
    newline = reference.encode("\n").ids
    assert len(newline) == 1
    documents = [["the theme", "then there 12"], ["them the"]]
    windows = language_model_windows(documents, tokenizer, 63, newline[0], pad_id=-1)
    assert windows.shape == (2, 64)  # a window each, padded
    kept = [[i for i in row if i != -1] for row in windows.tolist()]
    assert kept == [reference.encode("the theme\nthen there 12\n").ids,
                    reference.encode("them the\n").ids]  # fmt: skip
    # Cut shorter, a document's windows overlap by one token: every token a label once.
    short = language_model_windows(documents[:1], tokenizer, 4, newline[0], pad_id=-1)
    joined = short[0].tolist() + [i for row in short[1:].tolist() for i in row[1:]]
    assert [i for i in joined if i != -1] == kept[0]


def test_a_model_read_with_a_start_token_gets_one_at_every_window(tmp_path):
    """Gemma's files say `add_bos_token`: each window is that token, then the text."""
    from keras_attn.data import language_model_windows
    from keras_attn.training.tasks.language_model import BaseDecoder
    from tests.models.llama.gguf_files import sentencepiece_metadata

    metadata = sentencepiece_metadata()
    write_llama_gguf(tmp_path / "sp.gguf", vocabulary=len(metadata["token_list"]),
                     tokenizer=metadata)  # fmt: skip
    base = BaseDecoder(str(tmp_path / "sp.gguf"))
    assert base.start_id == metadata["bos_token_id"]
    sentence = "the theme then there 12 the them the theme"
    ids = [*map(int, base.tokenizer([sentence])[0]), base.separator_id]
    windows = language_model_windows(
        [[sentence]], base.tokenizer, 4, base.separator_id, -1, start_id=base.start_id
    )
    # The start token, then 4 tokens of the text: each token a label once, no overlap.
    expected = [[base.start_id, *ids[k : k + 4]] for k in range(0, len(ids), 4)]
    expected[-1] += [-1] * (5 - len(expected[-1]))
    assert windows.tolist() == expected


@pytest.mark.slow  # a training run: over 10 s, left out of `make test-fast`
def test_samples_start_as_the_model_reads_and_show_the_text_alone(files, tmp_path):
    """TensorBoard's samples: the prompt after the start token where the file asks for
    one, the start token left out of the text shown."""
    from keras_attn.training import TrainingConfig, load_config
    from keras_attn.training.tasks import LanguageModelTask
    from tests.models.llama.gguf_files import sentencepiece_metadata

    _, corpus, _ = files
    metadata = sentencepiece_metadata()
    write_llama_gguf(tmp_path / "sp.gguf", vocabulary=len(metadata["token_list"]),
                     tokenizer=metadata)  # fmt: skip
    task = LanguageModelTask()
    overrides = {"model.base": str(tmp_path / "sp.gguf"), "data.corpus": str(corpus),
                 "data.held_out_documents": 4, "data.prompts": "the theme|then"}  # fmt: skip
    task.prepare(load_config({**task.sections, "training": TrainingConfig}, overrides=overrides))
    model = task.build_model(task.run)
    given = []
    generate = model.generate

    def spy(ids, *args, **kwargs):
        given.extend(ids)
        return generate(ids, *args, **kwargs)

    model.generate = spy
    samples = task.samples()
    bos = metadata["bos_token_id"]
    assert [row[0] for row in given] == [bos, bos]
    assert [row[1:] for row in given] == [
        list(map(int, r)) for r in task.tokenizer(["the theme", "then"])
    ]
    for (prompt, text), expected in zip(samples, ("the theme", "then"), strict=True):
        assert prompt == expected and text.lstrip().startswith(expected), text
        assert "<s>" not in text, text


@pytest.mark.slow  # 4 s on the 2 busy cores: out of `make test-fast`
def test_a_resumed_run_must_start_from_the_same_file(files, tmp_path):
    base, corpus, _ = files
    copy = tmp_path / "base.gguf"
    copy.write_bytes(base.read_bytes())
    args = ["lm", "--base", str(copy), "--corpus", str(corpus), "--lora-rank", "4",
            "--output", str(tmp_path / "run")]  # fmt: skip
    main([*args, *_flags(steps=2, steps_per_epoch=2, samples_every=0)])
    _write_base(copy, seed=1)  # other weights under the same name
    with pytest.raises(SystemExit, match="base"):
        main([*args, *_flags(steps=4, steps_per_epoch=2, samples_every=0)])


def test_the_architecture_comes_from_the_file_and_bad_files_are_named(files, tmp_path, capsys):
    from keras_attn.training.task_configs import LanguageModelConfig

    assert LanguageModelConfig().dropout == 0.1
    assert LanguageModelConfig(base="x.gguf").dropout == 0.0  # trained without
    assert LanguageModelConfig(base="x.gguf", dropout=0.05).dropout == 0.05
    with pytest.raises(ConfigError, match="model.num_layers.*its default"):
        LanguageModelConfig(base="x.gguf", num_layers=2)
    base, corpus, _ = files
    not_gguf = tmp_path / "model.gguf"
    not_gguf.write_bytes(b"GGUF" + b"\0" * 12)
    deep = tmp_path / "deep.gguf"  # a size the tensors contradict: never built
    metadata, _ = byte_level_bpe_metadata()
    write_llama_gguf(deep, vocabulary=len(metadata["token_list"]), tokenizer=metadata,
                     metadata={"llama.block_count": 100_000})  # fmt: skip
    nan = tmp_path / "nan.gguf"  # every logit NaN: trained on, then the sampler fails
    write_llama_gguf(nan, vocabulary=len(metadata["token_list"]), tokenizer=metadata,
                     metadata={"llama.rope.freq_base": float("nan")})  # fmt: skip
    for path, expected in (
        (tmp_path / "missing.gguf", "model.base"),
        (not_gguf, "model.base"),
        (deep, "num_hidden_layers 100000"),
        (nan, "finite positive number for llama.rope.freq_base"),
        (base, "data.vocabulary_size"),
    ):
        extra = ["--vocabulary-size", "100"] if path == base else []
        with pytest.raises(SystemExit):
            main(["lm", "--base", str(path), "--corpus", str(corpus), *extra,
                  "--held-out-documents", "4", "--output", str(tmp_path / "bad")])  # fmt: skip
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert error.startswith("error:") and expected in error, error


@pytest.mark.slow  # 4 s on the 2 busy cores: out of `make test-fast`
def test_size_flags_past_what_the_model_holds_are_one_error_line(files, tmp_path, capsys):
    """The probe's sizes: a LoRA rank of a million (9.4 GB of adapters), a sequence of a
    million tokens over a 128-position model (a 10^12-cell mask); each refused before a
    weight is made, in seconds."""
    import time

    base, corpus, _ = files
    for extra, expected in (
        (["--lora-rank", "1000000"], "training.lora_rank.*rank` <= 8"),
        (["--sequence-length", "1000000"], "model.sequence_length.*at most 128, the base"),
    ):
        start = time.monotonic()
        with pytest.raises(SystemExit) as exit:
            main(["lm", "--base", str(base), "--corpus", str(corpus), *extra,
                  "--held-out-documents", "4", "--steps", "2",
                  "--output", str(tmp_path / "big")])  # fmt: skip
        error = capsys.readouterr().err.strip().splitlines()[-1]
        assert exit.value.code == 2 and error.startswith("error:"), error
        assert __import__("re").search(expected, error), error
        assert time.monotonic() - start < 30
        assert not (tmp_path / "big" / "checkpoints").exists()
