"""Training throughput (tokens/s) of our BertPretrainer against keras-hub's BertMaskedLM.

Same sizes, batch, sequence length and masked positions, one run, with and without
`jit_compile`; each model is timed with `train_on_batch` on the same batches, the
two alternating so machine noise hits both alike; median of `--repeats` steps.
keras-hub's task has only the masked-LM head; ours adds the NSP head on the pooled
output (a (hidden x 2) dense layer and its loss: a negligible share of the work).

Model FLOP utilisation (MFU): the step's model FLOPs (`training_flops`: 3x the
forward pass's matrix products, attention scores included, embedding lookups not)
per second, over the float32 matrix-product ceiling measured in the same run (the
median rate of a 2048 x 2048 by 2048 x 2048 `keras.ops.matmul` on the same backend).
`--backend jax` / `torch` runs both models on that backend: JAX compiled (its
`train_on_batch` is always `jax.jit`), PyTorch eager.

    python benchmarks/bert.py                     # the README's figures (TensorFlow)
    python benchmarks/bert.py --backend jax
    python benchmarks/bert.py --preset mini --sequence-length 256
"""

import argparse
import os
import platform
import time

from timing import (  # benchmarks/timing.py
    JIT_CHOICES,
    add_backend_flag,
    alternating_medians,
    backend_version,
    check_backend,
    select_backend,
)

select_backend(__name__)

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402

from keras_attn.layers import gelu_approximate  # noqa: E402
from keras_attn.models import BERT_SIZES, BertBackbone, BertPretrainer  # noqa: E402


def make_batch(args, rng):
    length, predictions = args.sequence_length, args.predictions
    token_ids = rng.integers(5, args.vocabulary_size, (args.batch_size, length)).astype("int32")
    positions = np.sort(
        rng.permuted(np.tile(np.arange(1, length), (args.batch_size, 1)), axis=1)[:, :predictions],
        axis=1,
    )
    labels = np.take_along_axis(token_ids, positions, 1)
    x = {
        "token_ids": token_ids,
        "segment_ids": (np.arange(length) >= length // 2)
        .astype("int32")[None]
        .repeat(args.batch_size, 0),
        "padding_mask": np.ones((args.batch_size, length), "int32"),
    }
    return x, positions.astype("int32"), labels


def training_flops(args):
    """Model FLOPs of one training step: 3x the forward pass's (backward is about 2x)."""
    size = BERT_SIZES[args.preset]
    d, layers, ff = size["hidden_dim"], size["num_layers"], 4 * size["hidden_dim"]
    length, tokens = args.sequence_length, args.batch_size * args.sequence_length
    # Per token and layer: q, k, v, output projections; the feed-forward pair; scores
    # q.k and the weighted sum of values over `length` keys. A multiply-add is 2 FLOPs.
    per_token = layers * (2 * 4 * d * d + 2 * 2 * d * ff + 2 * 2 * length * d)
    # The masked-LM head on the predicted positions: transform, then the vocabulary.
    head = args.batch_size * args.predictions * (2 * d * d + 2 * d * args.vocabulary_size)
    return 3 * (tokens * per_token + head)


def matmul_ceiling(n=2048, repeats=10):
    """This machine's float32 matrix-product rate (FLOP/s): median of `repeats`."""
    a = keras.random.normal((n, n), seed=0)
    keras.ops.convert_to_numpy(keras.ops.matmul(a, a))
    times = []
    for _ in range(repeats):
        began = time.perf_counter()
        keras.ops.convert_to_numpy(keras.ops.matmul(a, a))
        times.append(time.perf_counter() - began)
    return 2 * n**3 / float(np.median(times))


def build(args, jit_compile):
    size = dict(BERT_SIZES[args.preset])
    size["intermediate_dim"] = 4 * size["hidden_dim"]
    common = dict(
        vocabulary_size=args.vocabulary_size, max_sequence_length=args.sequence_length, **size
    )
    keras.utils.set_random_seed(0)
    theirs = keras_hub.models.BertMaskedLM(keras_hub.models.BertBackbone(**common))
    theirs.compile(
        optimizer=keras.optimizers.AdamW(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        weighted_metrics=[keras.metrics.SparseCategoricalAccuracy()],
        jit_compile=jit_compile,
    )
    # keras-hub's BERT uses the tanh GELU; ours is given the same for a like-for-like run.
    ours = BertPretrainer(BertBackbone(activation=gelu_approximate, **common))
    ours.compile(optimizer=keras.optimizers.AdamW(1e-4), jit_compile=jit_compile)
    return ours, theirs


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="mini", choices=sorted(BERT_SIZES))
    parser.add_argument("--vocabulary-size", type=int, default=30522)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--predictions", type=int, default=20, help="masked positions per sequence")
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--warmup", type=int, default=3)
    add_backend_flag(parser)
    args = parser.parse_args(argv)
    backend = check_backend(parser, args)
    print(
        f"Keras {keras.__version__} on {backend} {backend_version(backend)}, keras-hub "
        f"{keras_hub.__version__}, {platform.machine()}, {os.cpu_count()} CPUs"
    )
    print(
        f"BERT-{args.preset}, batch {args.batch_size} x {args.sequence_length} tokens, "
        f"{args.predictions} predictions/sequence, train_on_batch, median of {args.repeats}\n"
    )
    ceiling = matmul_ceiling()
    flops = training_flops(args)
    print(f"float32 matmul ceiling {ceiling / 1e9:.1f} GFLOP/s; {flops / 1e9:.2f} GFLOP per step\n")
    print(
        f"{'jit':>5} {'ours tok/s':>11} {'keras-hub tok/s':>16} {'ours/keras-hub':>15} "
        f"{'ours MFU':>9} {'keras-hub MFU':>14}"
    )
    rng = np.random.default_rng(0)
    x, positions, labels = make_batch(args, rng)
    nsp = rng.integers(0, 2, args.batch_size)
    weights = np.ones_like(labels, "float32")
    tokens = args.batch_size * args.sequence_length
    rows = []
    for jit_compile in JIT_CHOICES[backend]:
        ours, theirs = build(args, jit_compile)
        steps = {
            "ours": lambda ours=ours: ours.train_on_batch(
                {**x, "masked_positions": positions},
                {"mlm_logits": labels, "nsp_logits": nsp},
                sample_weight={
                    "mlm_logits": weights,
                    "nsp_logits": np.ones(args.batch_size, "float32"),
                },
            ),
            "keras-hub": lambda theirs=theirs: theirs.train_on_batch(
                {**x, "mask_positions": positions}, labels, sample_weight=weights
            ),
        }
        medians = alternating_medians(steps, args.repeats, warmup=args.warmup)
        rate = {name: tokens / seconds for name, seconds in medians.items()}
        ratio = rate["ours"] / rate["keras-hub"]
        mfu = {name: flops / seconds / ceiling for name, seconds in medians.items()}
        rows.append((jit_compile, rate["ours"], rate["keras-hub"], ratio, mfu))
        print(
            f"{str(jit_compile):>5} {rate['ours']:>11.0f} {rate['keras-hub']:>16.0f} "
            f"{ratio:>15.3f} {mfu['ours']:>9.1%} {mfu['keras-hub']:>14.1%}",
            flush=True,
        )
    return rows


if __name__ == "__main__":
    main()
