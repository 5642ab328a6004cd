"""A real GGUF file read by us and by `transformers`, in a process of its own: what the
tests of SmolLM2-135M-Instruct and Gemma 3 270M compare.

Usage: python -m tests.models.gguf_reference_run smollm2|gemma3 FILE

Prints one JSON line: the model's shape, the largest logit difference on a probe prompt,
each probe text's token ids by both tokenizers, and a greedy continuation by both. Run
apart from the test worker: the two copies of a model and their vocabularies took 3-7 GB
that the worker's heap kept to the end of the suite (the processes other tests start
then ran short of memory on the 24 GB machine).
"""

import json
import pathlib
import subprocess
import sys

import numpy as np
import torch
import transformers

from keras_attn.models import from_gguf
from tests.models.llama.test_gguf_tokenizer import PROBES


def _logits_difference(ours, theirs, ids):
    with torch.no_grad():
        expected = theirs(torch.tensor(ids)).logits.numpy()
    return float(np.abs(np.asarray(ours(ids)) - expected).max())


def _ids(ours, theirs_tokenizer, probes):
    return [
        [[int(i) for i in row], theirs_tokenizer(text, add_special_tokens=False).input_ids]
        for text, row in zip(probes, ours.preprocessor.tokenizer(probes), strict=True)
    ]


def smollm2(ours, theirs, tokenizer):
    """A chat prompt's 64 greedy tokens, the probes' ids, logits on 13 ids."""
    # "<|im_start|>user\nHéllo wörld 🤗 你好 def f(x):" in SmolLM2's ids.
    ids = np.array([[1, 4093, 198, 56, 2756, 31394, 267, 29989, 400, 15107, 114, 241, 216]])
    messages = [{"role": "user", "content": "Write a short story about a lighthouse keeper."}]
    prompt = ours.preprocessor.tokenizer.apply_chat_template(messages)
    prompt_ids = tokenizer(prompt, return_tensors="pt", add_special_tokens=False).input_ids
    with torch.no_grad():
        expected = theirs.generate(prompt_ids, max_new_tokens=64, do_sample=False)
    expected = expected[0, prompt_ids.shape[1] :]
    return {
        "shape": [ours.num_layers, ours.num_heads, ours.num_key_value_heads],
        "tied": ours.tie_word_embeddings,
        "rope_max_wavelength": ours.rope_max_wavelength,
        "logits": _logits_difference(ours, theirs, ids),
        "ids": _ids(ours, tokenizer, PROBES),
        "prompts": [
            prompt,
            tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False),
        ],
        "new_tokens": len(expected),
        "replies": [
            ours.chat(messages, max_new_tokens=64),
            tokenizer.decode(expected, skip_special_tokens=True),
        ],
    }


def gemma3(ours, theirs, tokenizer):
    """A plain prompt's 32 greedy tokens, the probes' ids (and Gemma's turn markers and
    space runs), logits on 10 ids."""
    ids = np.array([[2, 818, 5279, 529, 7001, 563, 236761, 108, 3689, 1089]])
    probes = PROBES + ["<start_of_turn>user\nHi<end_of_turn>\n", "</div> [multimodal]"]
    prompt = "The capital of France is"
    prompt_ids = tokenizer(prompt, return_tensors="pt").input_ids  # <bos> first
    with torch.no_grad():
        expected = theirs.generate(prompt_ids, max_new_tokens=32, do_sample=False)
    return {
        "shape": [ours.num_layers, ours.head_dim, ours.window, ours.global_every],
        "logits": _logits_difference(ours, theirs, ids),
        "ids": _ids(ours, tokenizer, probes),
        "prompt_ids": [
            [int(i) for i in ours.preprocessor.generate_preprocess([prompt])[0]],
            prompt_ids[0].tolist(),
        ],
        "replies": [
            ours.generate(prompt, max_length=prompt_ids.shape[1] + 32, strategy="greedy"),
            tokenizer.decode(expected[0], skip_special_tokens=True),
        ],
    }


def run(check, path, timeout=900):
    """This script run on `path` for `check` (`"smollm2"`, `"gemma3"`) in a fresh process
    (the test worker's environment, its thread counts included): its JSON."""
    from tests.training.runs import ROOT, environment

    completed = subprocess.run(
        [sys.executable, "-m", "tests.models.gguf_reference_run", check, str(path)],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _parse_once():
    """`gguf.GGUFReader` kept per file for this process: `transformers` opens the file three
    times (configuration, tokenizer, weights), and each parse of Gemma 3's 262,144-token
    metadata takes 15-23 s (ours reads its own header: `keras_attn.models.gguf.header`)."""
    import functools
    import os

    import gguf

    parse = functools.lru_cache(maxsize=None)(gguf.GGUFReader)
    gguf.GGUFReader = lambda path, mode="r": parse(os.path.realpath(path), mode)


def main(argv):
    check, path = {"smollm2": smollm2, "gemma3": gemma3}[argv[0]], pathlib.Path(argv[1])
    _parse_once()
    ours = from_gguf(path)
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    print(json.dumps(check(ours, theirs, tokenizer), ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1:])
