"""`keras-attn evaluate`: a Hugging Face GPT-2 folder answers as `transformers` scores it
(zero-shot, every query), a `keras-attn lm`-shaped run folder with its WordPiece
vocabulary runs K shots, and mistakes are one `error:` line."""

import json
import re

import numpy as np
import pytest
import torch

from keras_attn.cli import main as cli
from keras_attn.models import GPTLanguageModel
from tests.evaluation.test_few_shot import _reference
from tests.model_harness import tiny_bert

TEXTS = [
    ("the film is a joy", "fresh"),
    ("a dull and tired plot", "rotten"),
    ("warm, funny and wise", "fresh"),
    ("the jokes fall flat", "rotten"),
    ("a moving story", "fresh"),
    ("too long and too loud", "rotten"),
    ("a fine cast", "fresh"),
    ("nothing works", "rotten"),
]


def _reviews(path):
    path.write_text("text,label\n" + "".join(f'"{t}",{label}\n' for t, label in TEXTS))
    return path


def _gpt2_folder(folder):
    """A random GPT-2 with a byte-level BPE trained on the reviews, saved as HF does."""
    import transformers
    from tokenizers import ByteLevelBPETokenizer

    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(
        [t for t, _ in TEXTS] * 3 + ["Answer: fresh rotten\n"] * 3,
        vocab_size=300,
        min_frequency=1,
        special_tokens=["<|endoftext|>"],
    )
    folder.mkdir()
    trainer.save_model(str(folder))
    size = trainer.get_vocab_size()
    config = transformers.GPT2Config(
        vocab_size=size, n_positions=64, n_embd=32, n_layer=2, n_head=4
    )
    torch.manual_seed(0)
    model = transformers.GPT2LMHeadModel(config)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(0.3 * torch.randn_like(parameter))
    model.eval().save_pretrained(folder)
    return (
        folder,
        model,
        transformers.GPT2Tokenizer(str(folder / "vocab.json"), str(folder / "merges.txt")),
    )


def _their_answer(model, tokenizer, text, words):
    """The label `transformers` scores best after the default template's context."""
    context = tokenizer.encode(f"{text}\nAnswer:")
    scores = [_reference(model, context, tokenizer.encode(word), max_length=64) for word in words]
    return int(np.argmax(scores))


def test_a_gpt2_folder_answers_as_transformers_scores_it(tmp_path, capsys):
    folder, theirs, tokenizer = _gpt2_folder(tmp_path / "gpt2")
    data = _reviews(tmp_path / "reviews.csv")
    out = tmp_path / "results.json"
    queries = 5
    cli.main(
        ["evaluate", "--model", str(folder), "--data", str(data), "--queries", str(queries),
         "--shots", "0", "2", "--output", str(out)]
    )  # fmt: skip
    lines = capsys.readouterr().out.strip().splitlines()
    assert [line.split()[0] for line in lines] == ["0", "2"]
    found = json.loads(out.read_text())
    assert found["labels"] == ["fresh", "rotten"]  # sorted, as the reader names them
    zero, two = found["results"]
    assert (zero["shots"], two["shots"], zero["queries"], zero["truncated"]) == (0, 2, 5, 0)
    # The queries: the file in the order the seed draws (0), the first five.
    order = np.random.default_rng(0).permutation(len(TEXTS))[:queries]
    labels = ["fresh", "rotten"]
    answers = [_their_answer(theirs, tokenizer, TEXTS[i][0], [" fresh", " rotten"]) for i in order]
    assert zero["answers"] == answers
    expected = np.mean([answers[k] == labels.index(TEXTS[i][1]) for k, i in enumerate(order)])
    assert zero["accuracy"] == pytest.approx(expected)


def test_an_lm_run_folder_with_wordpiece_runs_k_shots(tmp_path, capsys, recwarn):
    from keras_attn.data.wordpiece_tokenizer import write_vocabulary

    words = sorted({w for t, _ in TEXTS for w in t.replace(",", " ").split()} | {"answer", ":"})
    vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words, "fresh", "rotten"]
    run = tmp_path / "run"
    run.mkdir()
    model = GPTLanguageModel(len(vocabulary), 1, 2, 16, 32, max_sequence_length=24)
    model.save(run / "model.keras")
    write_vocabulary(vocabulary, run / "vocab.txt")
    results = cli.main(
        ["evaluate", "--model", str(run), "--data", str(_reviews(tmp_path / "r.csv")),
         "--queries", "4", "--shots", "0", "1", "4", "--label-words", "fresh= fresh,rotten= rotten",
         "--normalization", "length"]
    )  # fmt: skip
    assert [r["shots"] for r in results] == [0, 1, 4]
    assert all(0 <= r["accuracy"] <= 1 and 0.5 <= r["majority_class"] <= 1 for r in results)
    assert results[2]["truncated"] > 0  # four demonstrations do not fit in 24 positions
    captured = capsys.readouterr()
    assert "  1 shot: accuracy" in captured.out  # one shot, not "1 shots"
    assert "answered as the last example shown: " in captured.out  # the recency diagnostic
    assert results[0]["last_shown"] is None and 0 <= results[1]["last_shown"] <= 1
    truncated = results[2]["truncated"]
    assert f"{truncated} of 4 prompts cut from the left to fit the model" in captured.out
    assert not [w for w in recwarn if "pairs were longer" in str(w.message)]  # once, per query


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--template", "{text}"], "--template: Expected a `template` with one {text}"),
        (["--shots", "9"], "--shots: at most the 4 texts left after the 4 queries"),
        (["--label-words", "good= yes"], "--label-words: expected LABEL=WORD with LABEL in"),
        (["--data", "no_such.csv"], "--data: expected rotten_tomatoes, kjv_testaments or a file"),
    ],
)
def test_mistakes_are_one_error_line(tmp_path, capsys, flags, message):
    run = tmp_path / "run"
    run.mkdir()
    GPTLanguageModel(40, 1, 2, 16, 32, max_sequence_length=24).save(run / "model.keras")
    (run / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a"]))
    args = ["evaluate", "--model", str(run), "--data", str(_reviews(tmp_path / "r.csv")),
            "--queries", "4", *flags]  # fmt: skip
    with pytest.raises(SystemExit) as exit_info:
        cli.main(args)
    assert exit_info.value.code == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0], lines


def test_the_command_offers_the_libraries_normalizations():
    from keras_attn.cli import evaluate
    from keras_attn.evaluation import few_shot

    assert evaluate.NORMALIZATIONS == few_shot.NORMALIZATIONS


def test_the_packaged_testament_task_runs_k_shots(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    GPTLanguageModel(40, 1, 2, 16, 32, max_sequence_length=64).save(run / "model.keras")
    words = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "old", "new"]
    (run / "vocab.txt").write_text("\n".join(words))
    results = cli.main(
        ["evaluate", "--model", str(run), "--data", "kjv_testaments", "--queries", "6",
         "--shots", "0", "1", "--template", "{text}\nTestament:{label}"]
    )  # fmt: skip
    assert [r["shots"] for r in results] == [0, 1]
    assert all(0 <= r["accuracy"] <= 1 and 0.5 <= r["majority_class"] <= 1 for r in results)
    assert "0 shots: accuracy" in capsys.readouterr().out


def test_a_folder_without_a_language_model_is_named(tmp_path, capsys):
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--model", str(tmp_path)])
    line = capsys.readouterr().err.strip()
    assert line.startswith("error: ") and "expected a `keras-attn lm` run" in line
    tiny_bert().save(tmp_path / "model.keras")
    with pytest.raises(SystemExit):
        cli.main(["evaluate", "--model", str(tmp_path)])
    line = capsys.readouterr().err.strip()
    assert line.startswith("error: ") and "expected a causal language model" in line


def test_files_it_cannot_answer_and_a_vocabulary_past_the_embedding(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    GPTLanguageModel(40, 1, 2, 16, 32, max_sequence_length=24).save(run / "model.keras")
    pieces = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + [f"w{i}" for i in range(45)]
    (run / "vocab.txt").write_text("\n".join(pieces[:6]))
    (tmp_path / "header.csv").write_text("text,label\n")
    (tmp_path / "one.csv").write_text("text,label\n" + "a film,fresh\n" * 6)
    cases = [
        ("header.csv", r"header.csv: expected labelled texts .* found 0 texts of 0 labels"),
        ("one.csv", r"one.csv: expected labelled texts of at least two .* 6 texts of 1 labels"),
    ]
    (run.parent / "big").mkdir()
    GPTLanguageModel(40, 1, 2, 16, 32, max_sequence_length=24).save(
        run.parent / "big" / "model.keras"
    )
    (run.parent / "big" / "vocab.txt").write_text("\n".join(pieces))  # 50 pieces, 40 rows
    for model, data, message in [(run, *cases[0]), (run, *cases[1])] + [
        (run.parent / "big", "header.csv", r"50 pieces, but the model's embedding has 40 rows")
    ]:
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["evaluate", "--model", str(model), "--data", str(tmp_path / data)])
        lines = capsys.readouterr().err.strip().splitlines()
        assert exit_info.value.code == 2 and len(lines) == 1, lines
        assert re.search(message, lines[0]) and lines[0].startswith("error: "), lines


def _gguf_evaluated(tmp_path, metadata, queries=4):
    """A random Llama GGUF file with `metadata`'s tokenizer, evaluated zero-shot by the
    command on `queries` reviews: `(results, transformers' model of the same file, its
    encoding of a text without special tokens, the queries' rows of TEXTS)`."""
    import transformers

    from tests.models.llama.gguf_files import write_llama_gguf

    path = tmp_path / "model.gguf"
    write_llama_gguf(path, vocabulary=len(metadata["token_list"]), tokenizer=metadata)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        tmp_path, gguf_file=path.name, dtype=torch.float32
    ).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path, gguf_file=path.name)
    results = cli.main(
        ["evaluate", "--model", str(path), "--data", str(_reviews(tmp_path / "r.csv")),
         "--queries", str(queries), "--shots", "0"]
    )  # fmt: skip
    order = np.random.default_rng(0).permutation(len(TEXTS))[:queries]

    def encode(text):
        return tokenizer.encode(text, add_special_tokens=False)

    return results, theirs, encode, order


def test_a_gguf_file_answers_as_transformers_scores_it(tmp_path, capsys):
    """A random Llama GGUF file with its byte-level BPE: the model and tokenizer the
    file carries answer as `transformers`' reading of the same file scores."""
    from tests.models.llama.gguf_files import byte_level_bpe_metadata

    metadata, _ = byte_level_bpe_metadata()
    results, theirs, encode, order = _gguf_evaluated(tmp_path, metadata)
    answers = []
    for i in order:
        context = encode(f"{TEXTS[i][0]}\nAnswer:")
        scores = [_reference(theirs, context, encode(w), 128) for w in (" fresh", " rotten")]
        answers.append(int(np.argmax(scores)))
    assert results[0]["answers"] == answers
    assert "0 shots: accuracy" in capsys.readouterr().out


def test_a_gguf_file_that_asks_for_a_start_token_is_scored_after_it(tmp_path):
    """A SentencePiece GGUF file saying `add_bos_token` (as Gemma's do): every prompt is
    scored after `<bos>`, as `transformers` scores the same text with it."""
    from tests.models.llama.gguf_files import sentencepiece_metadata

    metadata = sentencepiece_metadata()
    results, theirs, encode, order = _gguf_evaluated(tmp_path, metadata)
    bos = metadata["bos_token_id"]
    answers, with_start, without = [], [], []
    for i in order:
        context = encode(f"{TEXTS[i][0]}\nAnswer:")
        words = [encode(w) for w in (" fresh", " rotten")]
        with_start.append([_reference(theirs, [bos, *context], w, 128) for w in words])
        without.append([_reference(theirs, context, w, 128) for w in words])
        answers.append(int(np.argmax(with_start[-1])))
    assert results[0]["answers"] == answers
    assert not np.allclose(with_start, without)  # the start token matters to the scores
