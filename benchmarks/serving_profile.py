"""Where a served request's time goes: a SavedModel's `serving_default` run as TF Serving
runs it (the MetaGraph in a Session, Grappler's rewrites at its creation), op by op, at
batch 1 and 32 on the Rotten Tomatoes test split (issue 61; docs/speed.md).

    python benchmarks/serving_profile.py saved_models/reviews/1 [--traces 20]

Prints the p50 of each batch size after a warm-up over many lengths (oneDNN builds its
kernels per shape: a cold server pays that once per length), then from `--traces` calls
traced with `RunMetadata` step stats: the ops that ran, their time summed over the
threads by op type, split into the tokenizer and packing (every node outside the model's
Keras scope) and the model, and the op types of the graph Grappler left. The measuring
runs in a process of its own that imports TensorFlow and TensorFlow Text alone (whose
Python package loads Keras modules; nothing of Keras runs). Environment variables pass
on: `TF_ENABLE_ONEDNN_OPTS=0` profiles the runtime without oneDNN, `TF_XLA_FLAGS` with
auto-clustering.
"""

import argparse
import collections
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

MODEL_SCOPES = ("bert", "classifier", "backbone", "transformer", "embedding", "pooled")


def _op_type(stats):
    label = stats.timeline_label  # "name = Op(inputs)"
    return label.split(" = ", 1)[1].split("(", 1)[0] if " = " in label else stats.node_name


def profile(path, texts, traces, threads, calls=300):
    """Prints the p50s and, per batch size, the traced op time by type and part."""
    import tensorflow as tf
    from serving_worker import saved_model_session  # beside this file

    run = saved_model_session(path, threads)
    for i in range(min(calls, 200)):  # every length the split has, at both batch sizes
        run(texts[i : i + 1])
    for i in range(min(calls, 200) // 10):
        run(texts[i * 32 : (i + 1) * 32])
    for batch, timed in ((1, calls), (32, max(calls // 7, 1))):
        times = []
        for i in range(timed):
            start = (i * batch * 7 + 900) % (len(texts) - batch)
            began = time.perf_counter()
            run(texts[start : start + batch])
            times.append((time.perf_counter() - began) * 1000)
        print(f"batch {batch}: p50 {statistics.median(times):.2f} ms ({timed} calls)")
    options = tf.compat.v1.RunOptions(
        trace_level=tf.compat.v1.RunOptions.FULL_TRACE, output_partition_graphs=True
    )
    for batch in (1, 32):
        by_type, by_part = collections.Counter(), collections.Counter()
        count = collections.Counter()
        for i in range(traces):
            metadata = tf.compat.v1.RunMetadata()
            start = (i * batch * 7 + 300) % (len(texts) - batch)
            run(texts[start : start + batch], options=options, run_metadata=metadata)
            for device in metadata.step_stats.dev_stats:
                for stats in device.node_stats:
                    kind, micros = _op_type(stats), stats.all_end_rel_micros / traces
                    by_type[kind] += micros
                    count[kind] += 1 / traces
                    model = any(s in stats.node_name.lower() for s in MODEL_SCOPES)
                    by_part["model" if model else "tokenizer and packing"] += micros
        kept = collections.Counter(
            node.op for graph in metadata.partition_graphs for node in graph.node
        )
        print(
            f"\nbatch {batch}: {sum(count.values()):.0f} ops ran, "
            f"{sum(by_type.values()) / 1000:.2f} ms of op time over the threads; "
            + ", ".join(f"{part} {ms / 1000:.2f} ms" for part, ms in by_part.items())
        )
        for kind, micros in by_type.most_common(15):
            print(f"  {kind:34} {count[kind]:5.0f} ops {micros / 1000:8.3f} ms")
        print("  graph after Grappler:", dict(kept.most_common(30)))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("saved_model", type=pathlib.Path, help="a SavedModel version folder")
    parser.add_argument("--traces", type=int, default=20, help="traced calls per batch size")
    parser.add_argument("--threads", type=int, default=2, help="intra- and inter-op threads")
    parser.add_argument("--calls", type=int, default=300, help="timed calls at batch 1")
    parser.add_argument("--texts", help=argparse.SUPPRESS)  # the measuring process's input
    args = parser.parse_args(argv)
    if args.texts:  # the measuring process
        texts = json.loads(pathlib.Path(args.texts).read_text(encoding="utf-8"))
        return profile(args.saved_model, texts, args.traces, args.threads, args.calls)
    from keras_attn.data import rotten_tomatoes

    _, test = rotten_tomatoes(log=False).split(0.2, seed=0)
    with tempfile.TemporaryDirectory() as folder:
        texts = pathlib.Path(folder) / "texts.json"
        texts.write_text(json.dumps(test.texts), encoding="utf-8")
        command = [sys.executable, __file__, str(args.saved_model), "--texts", str(texts)]
        command += ["--traces", str(args.traces), "--threads", str(args.threads)]
        command += ["--calls", str(args.calls)]
        env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": os.environ.get("TF_CPP_MIN_LOG_LEVEL", "2")}
        return subprocess.run(command, env=env, check=True).returncode


if __name__ == "__main__":
    main()
