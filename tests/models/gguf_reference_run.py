"""A real GGUF file read by us, against what `transformers` read of the same file: what the
tests of SmolLM2-135M-Instruct and Gemma 3 270M compare.

`transformers`' reading is recorded once, with the file's SHA-256 and the versions that
made it, in `tests/models/gguf_references/NAME.json` and `NAME.npz` (`record`); each
test run computes ours (`run`, in a process of its own) and compares. Recording took
110-150 s of a test's 200 on 2 cores: `transformers` parses the file's metadata three
times (15-25 s each for Gemma 3's 262,144 tokens) and loads a second copy of the model.

Usage:
    python -m tests.models.gguf_reference_run record smollm2|gemma3 [FILE]
    python -m tests.models.gguf_reference_run ours smollm2|gemma3 FILE

The logits kept of each probe position (a whole row is 49,152 or 262,144 numbers): the
64 largest, 1,024 columns drawn once at random, and the row's log-sum-exp, sum and sum of
squares over every column (the mean and root mean square compared). `ours` prints one JSON
line: our side of each recorded field, and the logits' largest difference over what was
kept.
"""

import hashlib
import json
import pathlib
import subprocess
import sys

import numpy as np

from tests.models.llama.test_gguf_tokenizer import PROBES

REFERENCES = pathlib.Path(__file__).parent / "gguf_references"
TOP, RANDOM = 64, 1024


def sha256(path):
    with open(path, "rb") as file:
        return hashlib.file_digest(file, "sha256").hexdigest()


# What each check feeds both readings.
SMOLLM2 = dict(
    # "<|im_start|>user\nHéllo wörld 🤗 你好 def f(x):" in SmolLM2's ids.
    ids=[[1, 4093, 198, 56, 2756, 31394, 267, 29989, 400, 15107, 114, 241, 216]],
    probes=PROBES,
    messages=[{"role": "user", "content": "Write a short story about a lighthouse keeper."}],
    new_tokens=64,
)
GEMMA3 = dict(
    ids=[[2, 818, 5279, 529, 7001, 563, 236761, 108, 3689, 1089]],
    probes=PROBES + ["<start_of_turn>user\nHi<end_of_turn>\n", "</div> [multimodal]"],
    prompt="The capital of France is",
    new_tokens=32,
)
INPUTS = {"smollm2": SMOLLM2, "gemma3": GEMMA3}


def _row_statistics(logits):
    """Each row's log-sum-exp, sum and sum of squares over every column."""
    peak = logits.max(-1, keepdims=True)
    return {
        "logsumexp": peak[:, 0] + np.log(np.exp(logits - peak).sum(-1)),
        "sum": logits.sum(-1),
        "squares": (logits**2).sum(-1),
    }


def _row_summary(logits):
    """What is kept of `(positions, vocabulary)` logits: the columns, their values and
    each row's statistics over every column."""
    logits = np.asarray(logits, "float64")
    drawn = np.random.default_rng(0).choice(logits.shape[-1], RANDOM, replace=False)
    top = np.argsort(-logits, axis=-1)[:, :TOP]
    columns = np.concatenate([top, np.broadcast_to(drawn, (len(logits), RANDOM))], axis=-1)
    return {
        "columns": columns.astype("int32"),
        "values": np.take_along_axis(logits, columns, -1).astype("float32"),
        **_row_statistics(logits),
    }


def logits_differences(logits, kept):
    """The largest difference of `logits` from the kept values, and of each row's
    log-sum-exp, mean and root mean square."""
    logits = np.asarray(logits, "float64")
    columns = logits.shape[-1]

    def compared(summary):
        return {
            "logsumexp": summary["logsumexp"],
            "mean": summary["sum"] / columns,
            "rms": np.sqrt(summary["squares"] / columns),
        }

    ours = {"values": np.take_along_axis(logits, kept["columns"], -1)}
    ours.update(compared(_row_statistics(logits)))
    theirs = {"values": kept["values"], **compared(kept)}
    return {key: float(np.abs(ours[key] - theirs[key]).max()) for key in ours}


def record(check, path):
    """`transformers`' reading of the file at `path`: the JSON fields and the logits kept."""
    import torch
    import transformers

    _parse_once()
    inputs = INPUTS[check]
    theirs = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    tokenizer = transformers.AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name)
    found = {
        "file": {"name": path.name, "sha256": sha256(path)},
        "made_by": {"transformers": transformers.__version__, "torch": torch.__version__},
        "ids": [tokenizer(text, add_special_tokens=False).input_ids for text in inputs["probes"]],
    }
    if check == "smollm2":
        found["prompt"] = tokenizer.apply_chat_template(
            inputs["messages"], add_generation_prompt=True, tokenize=False
        )
        prompt_ids = tokenizer(found["prompt"], return_tensors="pt", add_special_tokens=False)
    else:
        prompt_ids = tokenizer(inputs["prompt"], return_tensors="pt")  # <bos> first
        found["prompt_ids"] = prompt_ids.input_ids[0].tolist()
    with torch.no_grad():
        logits = theirs(torch.tensor(inputs["ids"])).logits.numpy()[0]
        generated = theirs.generate(
            prompt_ids.input_ids, max_new_tokens=inputs["new_tokens"], do_sample=False
        )
    if check == "smollm2":
        new = generated[0, prompt_ids.input_ids.shape[1] :]
        found["new_tokens"] = len(new)
        found["reply"] = tokenizer.decode(new, skip_special_tokens=True)
    else:
        found["reply"] = tokenizer.decode(generated[0], skip_special_tokens=True)
    return found, _row_summary(logits)


def ours(check, path):
    """Our reading of the file at `path`, each field as `record` names it."""
    from keras_attn.models import from_gguf

    inputs, model = INPUTS[check], from_gguf(path)
    tokenizer = model.preprocessor.tokenizer
    found = {
        "file": {"name": path.name, "sha256": sha256(path)},
        "ids": [[int(i) for i in row] for row in tokenizer(inputs["probes"])],
        "logits": np.asarray(model(np.array(inputs["ids"])))[0],
    }
    if check == "smollm2":
        found["shape"] = [model.num_layers, model.num_heads, model.num_key_value_heads]
        found["tied"] = model.tie_word_embeddings
        found["rope_max_wavelength"] = model.rope_max_wavelength
        found["prompt"] = tokenizer.apply_chat_template(inputs["messages"])
        found["reply"] = model.chat(inputs["messages"], max_new_tokens=inputs["new_tokens"])
    else:
        found["shape"] = [model.num_layers, model.head_dim, model.window, model.global_every]
        prompt_ids = model.preprocessor.generate_preprocess([inputs["prompt"]])[0]
        found["prompt_ids"] = [int(i) for i in prompt_ids]
        found["reply"] = model.generate(
            inputs["prompt"],
            max_length=len(found["prompt_ids"]) + inputs["new_tokens"],
            strategy="greedy",
        )
    return found


def _parse_once():
    """`gguf.GGUFReader` kept per file for this process: `transformers` opens the file three
    times (configuration, tokenizer, weights), and each parse of Gemma 3's 262,144-token
    metadata takes 15-25 s (ours reads its own header: `keras_attn.models.gguf.header`)."""
    import functools
    import os

    import gguf

    parse = functools.lru_cache(maxsize=None)(gguf.GGUFReader)
    gguf.GGUFReader = lambda path, mode="r": parse(os.path.realpath(path), mode)


def reference(check):
    """The recorded reading: `(JSON fields, {kept logits' arrays})`."""
    found = json.loads((REFERENCES / f"{check}.json").read_text(encoding="utf-8"))
    with np.load(REFERENCES / f"{check}.npz") as kept:
        return found, dict(kept)


def run(check, path, timeout=900):
    """`ours` on `path` for `check` in a fresh process (the test worker's environment, its
    thread counts included; our copy of a model and its vocabulary took gigabytes that a
    worker's heap would keep to the end of the suite): its JSON, the logits replaced by
    their differences from the recorded ones."""
    from tests.training.runs import ROOT, environment

    completed = subprocess.run(
        [sys.executable, "-m", "tests.models.gguf_reference_run", "ours", check, str(path)],
        cwd=ROOT,
        env=environment(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def main(argv):
    command, check = argv[0], argv[1]
    if command == "record":
        from keras_attn.models.gguf.reader import packaged_gguf

        path = pathlib.Path(argv[2] if len(argv) > 2 else packaged_gguf(check))
        found, kept = record(check, path)
        REFERENCES.mkdir(exist_ok=True)
        text = json.dumps(found, ensure_ascii=False, indent=1) + "\n"
        (REFERENCES / f"{check}.json").write_text(text, encoding="utf-8")
        np.savez_compressed(REFERENCES / f"{check}.npz", **kept)
        print(f"recorded {REFERENCES / check}.json and .npz")
        return
    found = ours(check, pathlib.Path(argv[2]))
    found["logits"] = logits_differences(found["logits"], reference(check)[1])
    print(json.dumps(found, ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv[1:])
