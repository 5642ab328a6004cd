"""The results tables (README's, and docs/results.md's with every run): every figure
marked "(test)" is recomputed here (or by the named test), every command exists, so
the tables cannot drift from what the code does."""

import importlib.util
import pathlib
import re

import numpy as np
import pytest

ROOT = pathlib.Path(__file__).parents[1]
TESTS = pathlib.Path(__file__).parent


# Where the Results tables live: the README's (latest figures), docs/results.md (every run).
TABLES = ("README.md", "docs/results.md")


def results_table(document="README.md"):
    """`{first cell: (figure cell, command cell)}` of a document's Results table."""
    text = (ROOT / document).read_text(encoding="utf-8")
    section = text.split("## Results", 1)[1].split("\n## ", 1)[0]
    rows = [
        line
        for line in section.splitlines()
        if line.startswith("| ") and not line.startswith("| ---")
    ]
    table = {}
    for row in rows[1:]:
        what, figure, command = (cell.strip() for cell in row.strip("|").split(" | "))
        table[what] = (figure, command)
    return table


def row(prefix):
    """The full table's row (docs/results.md) whose first cell starts with `prefix`."""
    table = results_table("docs/results.md")
    (match,) = [(what, cells) for what, cells in table.items() if what.startswith(prefix)]
    return match


def number(text, before):
    """The number just before `before` in `text` (commas allowed)."""
    found = re.search(r"([\d,.]+)\s*" + re.escape(before), text)
    assert found, (text, before)
    return float(found.group(1).replace(",", ""))


def load_example(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The "(test)" figures that other tests check: the test functions that do it.
CHECKED_ELSEWHERE = {
    "`MultiHeadAttention` vs `torch.nn.MultiheadAttention`": (
        "layers/test_multi_head_attention.py",
        "torch",
    ),
    "encoder/decoder blocks vs `torch.nn.Transformer*Layer`": (
        "layers/test_transformer_blocks.py",
        "torch",
    ),
    "`BertBackbone.from_pretrained` vs `transformers`": ("models/bert", "sentence_transformers"),
    "ELECTRA / ALBERT / DistilBERT checkpoints": (
        "models/bert/test_encoder_checkpoints.py",
        "transformers",
    ),
    "GPT-2 checkpoints": ("models/gpt/test_gpt2_checkpoint.py", "GPT2Tokenizer"),
    "Llama and Mistral": ("models/llama/test_llama_checkpoints.py", "MistralForCausalLM"),
    "Gemma 3 in": ("models/gemma/test_gemma_checkpoints.py", "Gemma3ForCausalLM"),
    "`MultiHeadAttention(num_key_value_heads=K)`": (
        "layers/test_grouped_query_attention.py",
        "LlamaAttention",
    ),
    "XLNet checkpoints": ("models/xlnet/test_xlnet.py", "XLNetForSequenceClassification"),
    "RoBERTa checkpoints": ("models/roberta/test_roberta", "RobertaModel"),
    "DeBERTa-v3 checkpoints": ("models/deberta/test_deberta", "DebertaV2Model"),
    "keras-hub's BERT presets": ("models/bert/test_keras_hub_presets.py", "BertTextClassifier"),
}


@pytest.mark.parametrize("document", TABLES)
def test_every_row_names_a_command_that_exists(document):
    table = results_table(document)
    # The README shows headline rows of docs/results.md's full table, figures as there.
    assert len(results_table("docs/results.md")) >= 15
    assert table.keys() <= results_table("docs/results.md").keys()
    for what, (figure, command) in table.items():
        assert figure and "TBD" not in figure and not figure.isupper(), what
        command = command.strip("`")
        if command.startswith("python "):
            script = ROOT / command.split()[1]
            assert script.is_file(), command
            text = script.read_text()
            for flag in (word for word in command.split()[2:] if word.startswith("--")):
                from_budget_flags = (
                    flag in ("--minutes", "--steps") and "BudgetFlags(parser" in text
                )
                assert f'"{flag}"' in text or from_budget_flags, (
                    f"{command}: the script has no {flag}"
                )
        else:
            assert command in ("make test", "make run"), command


@pytest.mark.parametrize("document", TABLES)
def test_figures_checked_by_other_tests_are(document):
    for prefix, (where, reference) in CHECKED_ELSEWHERE.items():
        rows = [cells for what, cells in results_table(document).items() if what.startswith(prefix)]
        assert rows or document == "README.md", prefix  # the full table has every one
        if not rows:
            continue
        (figure, _) = rows[0]
        assert "≤ 1e-5 (test)" in figure
        sources = "\n".join(
            p.read_text()
            for p in (TESTS / where).parent.rglob("*.py")
            if str(p).startswith(str(TESTS / where))
        )
        assert reference in sources and "1e-5" in sources, where
    marked = [
        what
        for what, (figure, _) in results_table(document).items()
        if "(test)" in figure or "(test)" in what
    ]
    handled = set(CHECKED_ELSEWHERE) | {
        "MiniLM fine-tuned",
        "MiniLM NER",
        "GPT (4 layers",
        "Transformer zh→en",
        "Show, Attend and Tell",
    }
    for what in marked:
        assert any(what.startswith(prefix) for prefix in handled), (
            f"no test for the README's {what!r}"
        )


def test_rotten_tomatoes_split():
    from keras_attn.data import rotten_tomatoes

    what, _ = row("MiniLM fine-tuned")
    train, test = rotten_tomatoes(log=False).split(test_fraction=0.2, seed=0)
    assert (len(train), len(test)) == (number(what, "/"), number(what, "split (test)"))


def test_ner_split():
    what, _ = row("MiniLM NER")
    example = load_example("bert_ner")
    from keras_attn.data import read_conll

    data = read_conll(example.ner_file(), log=False)
    assert len(data) == number(what, "tagged tweets")
    train = int(0.8 * len(data))
    assert (train, len(data) - train) == (number(what, "/"), number(what, "(test)"))


def test_digit_canvas_split():
    what, _ = row("Show, Attend and Tell")
    (train, _), (test, _) = load_example("show_attend_tell").digit_split(seed=0)
    assert (len(train), len(test)) == (number(what, "training"), number(what, "held-out images"))


def test_tatoeba_test_set():
    from keras_attn.data import tatoeba_zh_en

    what, _ = row("Transformer zh→en")
    _, test = tatoeba_zh_en().split(test_groups=1000, seed=0)
    sources, references = test.references()
    assert len(sources) == number(what, "held-out sentences")
    assert sum(map(len, references)) == number(what, "references (test)")


@pytest.mark.slow
def test_gpt_unigram_baseline():
    what, _ = row("GPT (4 layers")
    example = load_example("gpt_generate")
    tokenizer, train, test = example.kjv_language_model_data(8000, 64, 32)
    baseline = example.unigram_perplexity(train, test, tokenizer.vocabulary_size, tokenizer.pad_id)
    np.testing.assert_allclose(baseline, number(what, "(test)"), atol=0.05)
