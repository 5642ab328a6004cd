"""The one timing loop the benchmarks share: alternate the variants, take medians."""

import os
import statistics
import sys
import time

from keras_attn.cli.main import backend_flag  # imports no Keras: safe before it starts

BACKENDS = ("tensorflow", "jax", "torch")
# What each backend runs: TensorFlow with and without XLA; JAX always compiled (`jax.jit`;
# uncompiled it runs op by op); PyTorch eager (what Keras runs unless told to
# `torch.compile`).
JIT_CHOICES = {"tensorflow": (False, True), "jax": (True,), "torch": (False,)}


def select_backend(script_name):
    """Called before Keras is imported: a benchmark run as a script takes its backend
    from `--backend` (else `KERAS_BACKEND`, else TensorFlow)."""
    requested = backend_flag(sys.argv[1:]) if script_name == "__main__" else None
    if requested:
        os.environ["KERAS_BACKEND"] = requested
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def add_backend_flag(parser):
    parser.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="the Keras backend (read before Keras starts; default: KERAS_BACKEND or tensorflow)",
    )


def check_backend(parser, args):
    """The backend Keras runs on; a parser error if `--backend` asked for another."""
    import keras

    backend = keras.backend.backend()
    if args.backend is not None and args.backend != backend:
        parser.error(f"--backend {args.backend}: Keras already runs on {backend!r} here")
    return backend


def backend_version(backend):
    return __import__(backend).__version__


def alternating_medians(calls, repeats, warmup=1):
    """Median seconds of each call in `calls` (a dict name -> no-argument function).

    Each is first called `warmup` times (compilation, caches); then the calls run in
    turn, `repeats` rounds, so that drifts in machine load hit every variant alike.
    """
    for call in calls.values():
        for _ in range(warmup):
            call()
    times = {name: [] for name in calls}
    for _ in range(repeats):
        for name, call in calls.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in times.items()}
