"""ERNIE's typing step on an accelerator, against BERT's of the same depth (the anchor),
float32 and mixed bfloat16, XLA-compiled (JAX), in one process.

ERNIE base (6 T-Encoder blocks, 6 fusion blocks, entity width 100, 82,115 frozen TransE
rows) and BERT base (12 blocks) type the marker of `(32, 128)` batches with one piece in
ten linked; each configuration is compiled and warmed, then timed as the median of
`--repeats` runs of `--steps` steps. Prints one JSON object: the step times, the ratio
ERNIE / BERT per policy, the last losses (finite) and the device.

Run:  KERAS_BACKEND=jax python benchmarks/gpu/knowledge_gpu.py [--steps 20] [--repeats 3]
"""

import argparse
import json
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "jax")

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_attn.models import BertBackbone, EntityTyping, ErnieBackbone  # noqa: E402

ENTITIES, VOCABULARY, CLASSES = 82115, 30522, 26


def batch(batch_size, length, seed=0):
    rng = np.random.default_rng(seed)
    linked = rng.random((batch_size, length)) < 0.1
    x = {
        "token_ids": rng.integers(5, VOCABULARY, (batch_size, length)).astype("int32"),
        "segment_ids": np.zeros((batch_size, length), "int32"),
        "padding_mask": np.ones((batch_size, length), "int32"),
        "entity_ids": np.where(linked, rng.integers(1, ENTITIES + 1, linked.shape), 0).astype(
            "int32"
        ),
        "marker_positions": rng.integers(1, length - 1, (batch_size,)).astype("int32"),
    }
    return x, rng.integers(0, CLASSES, (batch_size,)).astype("int32")


def step_time(kind, policy, args):
    keras.config.set_dtype_policy(policy)
    keras.utils.set_random_seed(0)
    if kind == "ernie":
        backbone = ErnieBackbone.from_size("base", num_entities=ENTITIES)
    else:
        backbone = BertBackbone.from_size("base", vocabulary_size=VOCABULARY)
    model = EntityTyping(backbone, CLASSES)
    model.compile(optimizer=keras.optimizers.AdamW(1e-4), jit_compile=True)
    x, y = batch(args.batch_size, args.length)
    if kind == "bert":
        x = {k: v for k, v in x.items() if k != "entity_ids"}
    start = time.perf_counter()
    for _ in range(3):
        loss = model.train_on_batch(x, y, return_dict=True)["loss"]
    compile_seconds = time.perf_counter() - start
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(args.steps):
            loss = model.train_on_batch(x, y, return_dict=True)["loss"]
        float(np.asarray(loss))  # waits for the device
        times.append((time.perf_counter() - start) / args.steps)
    keras.config.set_dtype_policy("float32")
    return {
        "step_ms": round(1000 * statistics.median(times), 2),
        "first_3_steps_s": round(compile_seconds, 1),
        "last_loss": float(np.asarray(loss)),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--length", type=int, default=128)
    args = parser.parse_args()
    import jax

    results = {"device": str(jax.devices()[0]), "backend": keras.backend.backend()}
    for policy in ("float32", "mixed_bfloat16"):
        for kind in ("bert", "ernie"):
            results[f"{kind}/{policy}"] = step_time(kind, policy, args)
        results[f"ratio/{policy}"] = round(
            results[f"ernie/{policy}"]["step_ms"] / results[f"bert/{policy}"]["step_ms"], 3
        )
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
