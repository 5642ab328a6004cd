"""One BERT pre-training under three strategies: the default, Mirrored and multi-worker.

TensorFlow distributes training by data parallelism: "each replica gets a different
slice of the input data, computes gradients on it, and the gradients are summed
across replicas (all-reduce) before every replica applies the same update" (the
`tf.distribute` guide). Done right, the replicas together compute exactly what one
device computes on the whole batch, so the losses and weights agree with a
single-device run up to floating-point summation order. This example checks that on
the machine you have, with `keras-attn pretrain` unchanged between the runs:

1. `--strategy default`: one device.
2. `--strategy mirrored`: `MirroredStrategy` over two devices. Without GPUs, the CPU is
   split into two logical devices (`tf.config.set_logical_device_configuration`),
   which must happen before TensorFlow starts, hence a process per run.
3. `--strategy multi_worker`: `MultiWorkerMirroredStrategy` with two worker processes
   on 127.0.0.1, each told the cluster and its own index through `TF_CONFIG`, the
   way a cluster manager (Kubernetes, Slurm, Vertex AI) starts them. Only the chief
   (worker 0) writes checkpoints, logs and the model.

What keeps the runs equal (all in `keras_attn.training`): the model, optimizer and
metrics are built inside `strategy.scope()`; `--batch-size` is the *global* batch,
split across the replicas (a batch they cannot split is refused before training);
gradients are clipped after the all-reduce, not per replica; every example's random
choices (sentence pairs, masks) are fixed by its position in the data, not by which
worker reads it. Dropout is off here, because each replica draws its own dropout
masks and that alone would make the runs differ. Keras 3.15's `fit` fails under a
multi-worker strategy (keras#20585); `keras_attn/training/multi_worker.py` holds the
workaround, in one place.

On GPUs or a TPU the command is the same: `--strategy auto` picks a TPU when one
resolves, `MultiWorkerMirroredStrategy` when `TF_CONFIG` names several workers, and
`MirroredStrategy` over all local GPUs when there are several.

Run:  python examples/distributed_training.py [--steps 60] [--smoke]
"""

import argparse
import json
import os
import pathlib
import socket
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def child(cpus, result, keras_attn_args):
    """In a process of its own: split the CPU, run `keras-attn`, save history and weights."""
    import numpy as np
    import tensorflow as tf

    if cpus > 1:
        (cpu,) = tf.config.list_physical_devices("CPU")
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * cpus
        )
    from keras_attn.cli.main import main

    fitted = main(keras_attn_args)
    pathlib.Path(f"{result}.json").write_text(json.dumps(fitted.history))
    np.savez(f"{result}.npz", *fitted.model.get_weights())


def free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


def start(cpus, result, args, tf_config=None):
    env = dict(os.environ)
    env.pop("TF_CONFIG", None)
    if tf_config is not None:
        env["TF_CONFIG"] = json.dumps(tf_config)
    return subprocess.Popen(
        [sys.executable, __file__, "--child", str(cpus), str(result), "--", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(processes, timeout=900):
    for name, process in processes.items():
        output, _ = process.communicate(timeout=timeout)
        if process.returncode != 0:
            raise SystemExit(f"{name} failed:\n{output[-3000:]}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps of each run")
    parser.add_argument("--batch-size", type=int, default=16, help="the global batch")
    parser.add_argument("--chapters", type=int, default=200, help="KJV chapters in the corpus")
    parser.add_argument("--output", default="runs/distributed_training")
    parser.add_argument("--smoke", action="store_true", help="seconds: a small corpus, a few steps")
    parser.add_argument("--child", nargs=2, metavar=("CPUS", "RESULT"), help=argparse.SUPPRESS)
    parser.add_argument("rest", nargs="*", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(int(args.child[0]), args.child[1], args.rest)
    import numpy as np

    from keras_attn.data import kjv_documents

    steps, chapters = (6, 30) if args.smoke else (args.steps, args.chapters)
    output = pathlib.Path(args.output)
    output.mkdir(parents=True, exist_ok=True)
    # The corpus as a text file (one verse per line, a blank line between chapters).
    corpus = output / "corpus.txt"
    corpus.write_text(
        "\n\n".join("\n".join(chapter) for chapter in kjv_documents()[:chapters]) + "\n",
        encoding="utf-8",
    )

    def pretrain(run):
        return [
            "pretrain",
            "--output",
            str(output / run),
            "--no-resume",
            "--corpus",
            str(corpus),
            "--vocabulary-size",
            "1000",
            "--held-out-documents",
            "4",
            "--sequence-length",
            "64",
            "--batch-size",
            str(args.batch_size),
            "--steps",
            str(steps),
            "--steps-per-epoch",
            str(steps // 2),
            "--validation-steps",
            "2",
            "--learning-rate",
            "1e-3",
            "--dropout",
            "0",
            "--clipnorm",
            "1.0",
            "--attention-every",
            "0",
            "--histogram-every",
            "0",
            "--verbose",
            "0",
        ]

    results = pathlib.Path(tempfile.mkdtemp())
    timings = {}
    # 1 and 2: the default strategy, then MirroredStrategy over 2 logical CPU devices.
    for run, cpus in (("default", 1), ("mirrored", 2)):
        began = time.time()
        finish({run: start(cpus, results / run, pretrain(run) + ["--strategy", run])})
        timings[run] = time.time() - began
    # 3: two workers on 127.0.0.1, started together as a cluster manager would.
    cluster = {"worker": [f"127.0.0.1:{port}" for port in free_ports(2)]}
    began = time.time()
    finish(
        {
            f"worker {index}": start(
                1,
                results / f"worker{index}",
                pretrain("multi_worker") + ["--strategy", "multi_worker"],
                tf_config={"cluster": cluster, "task": {"type": "worker", "index": index}},
            )
            for index in range(2)
        }
    )
    timings["multi_worker"] = time.time() - began

    def load(name):
        history = json.loads((results / f"{name}.json").read_text())
        with np.load(results / f"{name}.npz") as weights:
            return history, [
                weights[k] for k in sorted(weights.files, key=lambda k: int(k.split("_")[1]))
            ]

    runs = {name: load(name) for name in ("default", "mirrored", "worker0", "worker1")}
    reference_history, reference_weights = runs["default"]
    print(f"\nBERT-tiny, {steps} steps, global batch {args.batch_size}, {chapters} KJV chapters:")
    print(
        f"{'run':<10} {'replicas':>8} {'loss per epoch':>24} {'max |weight - default|':>24} "
        f"{'seconds':>8}"
    )
    for name, replicas, timing in (
        ("default", 1, "default"),
        ("mirrored", 2, "mirrored"),
        ("worker0", 2, "multi_worker"),
        ("worker1", 2, "multi_worker"),
    ):
        history, weights = runs[name]
        difference = max(
            float(np.abs(a - b).max()) for a, b in zip(weights, reference_weights, strict=True)
        )
        losses = " ".join(f"{loss:.5f}" for loss in history["loss"])
        print(f"{name:<10} {replicas:>8} {losses:>24} {difference:>24.2e} {timings[timing]:>8.1f}")
    workers_equal = all(
        np.array_equal(a, b) for a, b in zip(runs["worker0"][1], runs["worker1"][1], strict=True)
    )

    def relative_gap(name):
        """The largest relative difference from one device, over every logged loss."""
        history = runs[name][0]
        return max(
            float(np.max(np.abs(np.subtract(history[key], reference)) / np.abs(reference)))
            for key, reference in reference_history.items()
            if key.endswith("loss")
        )

    gaps = {name: relative_gap(name) for name in ("mirrored", "worker0")}
    print(
        f"\nThe two workers end with {'bit-identical' if workers_equal else 'DIFFERENT'} weights; "
        f"the losses differ from one device's by at most {gaps['mirrored']:.1e} (mirrored) and "
        f"{gaps['worker0']:.1e} (multi-worker), relative. Runs, logs and the chief's model: "
        f"{output}/"
    )
    if not workers_equal:
        raise SystemExit("the workers disagree: see the table above")
    return {
        "workers_equal": workers_equal,
        "mirrored_relative_loss_gap": gaps["mirrored"],
        "multi_worker_relative_loss_gap": gaps["worker0"],
        "chief_model": (output / "multi_worker" / "model.keras").is_file(),
        "timings": timings,
    }


if __name__ == "__main__":
    main()
