"""Sliding-window (`window=128`) against full self-attention: time and peak memory
as the sequence grows (1k, 4k, 16k tokens).

Each (variant, length) runs in a fresh process, so that its peak resident memory is
its own: the layer (2 heads of 32, width 64, batch 1, causal, no XLA) is built and
traced on a short input first, then the forward pass is timed `--repeats` times
(median); "memory" is the peak resident set over what the process held before the
first long call. Full attention holds `heads x L x L` scores (and the softmax's
copies): quadratic; the windowed form holds `L x 3B` per head (`B = max(W, 64)`):
linear. Full attention is skipped where it would need more than half of this
machine's memory.

    python benchmarks/windowed_attention.py                 # the README's figures
    python benchmarks/windowed_attention.py --lengths 512 2048 --repeats 2
"""

import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

HEADS, KEY_DIM, WIDTH = 2, 32, 64


def _peak_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def worker(variant, length, window, repeats):
    """One variant at one length: `{"seconds", "memory_mib"}` as JSON on stdout."""
    import numpy as np
    import tensorflow as tf

    from keras_attn.layers import MultiHeadAttention

    layer = MultiHeadAttention(HEADS, KEY_DIM, window=window if variant == "window" else None)
    forward = tf.function(lambda x: layer(x, x, use_causal_mask=True))
    forward(tf.zeros((1, 128, WIDTH)))  # build; the long input traces once more below
    x = tf.constant(np.random.default_rng(0).normal(size=(1, length, WIDTH)), "float32")
    before = _peak_mib()
    forward(x).numpy()  # trace and warm up at this length
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        forward(x).numpy()
        times.append(time.perf_counter() - start)
    return {"seconds": statistics.median(times), "memory_mib": max(0.0, _peak_mib() - before)}


def full_fits(length):
    """Whether full attention's scores (~4 float32 copies of heads x L x L) fit in half
    of this machine's memory."""
    needed = 4 * HEADS * length * length * 4
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return needed < total / 2, needed / 2**30


def measure(variant, length, window, repeats):
    command = [sys.executable, __file__, "--worker", variant, str(length)]
    command += ["--window", str(window), "--repeats", str(repeats)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--lengths", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--window", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--worker", nargs=2, metavar=("VARIANT", "LENGTH"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        variant, length = args.worker
        print(json.dumps(worker(variant, int(length), args.window, args.repeats)))
        return None

    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; window "
        f"{args.window}, {HEADS} heads of {KEY_DIM}, batch 1, causal, forward, no XLA"
    )
    print(f"{'tokens':>7}  {'window s':>9}  {'full s':>9}  {'window MiB':>10}  {'full MiB':>9}")
    rows = []
    for length in args.lengths:
        row = {"length": length, "window": measure("window", length, args.window, args.repeats)}
        fits, gib = full_fits(length)
        row["full"] = measure("full", length, args.window, args.repeats) if fits else None
        rows.append(row)
        full = row["full"]
        print(
            f"{length:>7}  {row['window']['seconds']:>9.4f}  "
            + (f"{full['seconds']:>9.4f}" if full else f"{'(skipped)':>9}")
            + f"  {row['window']['memory_mib']:>10.1f}  "
            + (f"{full['memory_mib']:>9.1f}" if full else f"  needs ~{gib:.0f} GiB"),
            flush=True,
        )
    for previous, row in zip(rows, rows[1:], strict=False):
        factor = row["length"] / previous["length"]
        grows = row["window"]["seconds"] / previous["window"]["seconds"]
        print(
            f"{previous['length']} -> {row['length']} tokens (x{factor:g}): "
            f"window time x{grows:.1f}"
            + (
                f", full time x{row['full']['seconds'] / previous['full']['seconds']:.1f}"
                if row["full"] and previous["full"]
                else ""
            )
        )
    return rows


if __name__ == "__main__":
    main()
