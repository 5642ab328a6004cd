"""DeBERTa-v3 vs BERT in miniature: the same size, tokenizer, data, recipe and steps.

"DeBERTa ... improves the BERT and RoBERTa models using two novel techniques. The first
is the disentangled attention mechanism, where each word is represented using two
vectors that encode its content and position ... The second is an enhanced mask
decoder" (He et al., 2020). Here the architectures alone are compared: a tiny
`BertBackbone` (learned absolute positions, scaled dot-product attention) and a tiny
`DebertaV3Backbone` (no absolute positions; content-to-position and position-to-content
terms over log-bucketed relative distances, v3's shared projections), both L=2, H=128,
A=2, intermediate 512, randomly initialised (no pre-training: the question is what each
attention learns from the task's data alone), each with its family's classifier head
(BERT's tanh pooler, DeBERTa's GELU context pooler) on Rotten Tomatoes (10,246 / 2,562
split, seed 0, the split `keras-attn finetune` makes), one WordPiece vocabulary learned
from the training split for both, the same batches in the same order, AdamW with warm-up
and linear decay, scored on the whole held-out split. The table goes to stdout and
`--output`/results.json.

Run:  python examples/deberta_vs_bert.py [--steps 1500] [--seeds 0 1 2] [--smoke]
"""

import argparse
import json
import os
import pathlib
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_attn.cache_dir import default_cache_dir  # noqa: E402
from keras_attn.data import (  # noqa: E402
    WordPieceTokenizer,
    rotten_tomatoes,
    train_wordpiece_vocabulary,
)
from keras_attn.models import (  # noqa: E402
    BertBackbone,
    BertClassifier,
    DebertaV3Backbone,
    DebertaV3Classifier,
)
from keras_attn.training import TrainingConfig, build_optimizer  # noqa: E402

SIZE = dict(num_layers=2, num_heads=2, hidden_dim=128, intermediate_dim=512, dropout=0.1)
MODELS = ("bert", "deberta")


def split(data, fraction=0.2, seed=0):
    """`keras-attn finetune`'s split of one labelled set: (train, held out) indices."""
    order = np.random.default_rng(seed).permutation(len(data))
    held_out = int(round(fraction * len(data)))
    return order[held_out:], order[:held_out]


def build(name, vocabulary_size, length, seed):
    keras.utils.set_random_seed(seed)
    if name == "bert":
        backbone = BertBackbone(vocabulary_size, **SIZE, max_sequence_length=length)
        return BertClassifier(backbone, num_classes=2)
    backbone = DebertaV3Backbone(
        vocabulary_size, **SIZE, max_sequence_length=length, position_buckets=32
    )
    return DebertaV3Classifier(backbone, num_classes=2)


def run(name, seed, steps, batches, held_out, vocabulary_size, length, learning_rate, xla):
    model = build(name, vocabulary_size, length, seed)
    config = TrainingConfig(steps=steps, learning_rate=learning_rate, warmup=0.1)
    model.compile(optimizer=build_optimizer(config), jit_compile=xla)
    start = time.perf_counter()
    model.fit(batches.take(steps), epochs=1, verbose=0, shuffle=False)
    minutes = (time.perf_counter() - start) / 60
    _, accuracy = model.evaluate(held_out, verbose=0)
    keras.backend.clear_session()
    return {
        "model": name,
        "seed": seed,
        "steps": steps,
        "parameters": None,
        "minutes": round(minutes, 2),
        "rotten_tomatoes_accuracy": round(float(accuracy), 4),
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=64)
    parser.add_argument("--learning-rate", type=float, default=5e-4)
    parser.add_argument("--vocabulary-size", type=int, default=8000)
    parser.add_argument("--output", default="runs/deberta_vs_bert")
    parser.add_argument("--smoke", action="store_true", help="seconds: a few steps, one seed")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.seeds, args.vocabulary_size = 4, args.seeds[:1], 500

    data = rotten_tomatoes(log=False)
    train, held_out = split(data)
    texts = np.asarray(data.texts, dtype=object)
    labels = np.asarray(data.labels, "int32")
    if args.smoke:
        train, held_out = train[:256], held_out[:64]
    vocabulary = train_wordpiece_vocabulary(
        tf.data.Dataset.from_tensor_slices(list(texts[train])),
        args.vocabulary_size,
        cache_dir=default_cache_dir(),
    )
    tokenizer = WordPieceTokenizer(vocabulary, sequence_length=args.sequence_length)

    def dataset(indices, shuffle_seed=None):
        x = tokenizer(tf.constant(list(texts[indices])))
        ds = tf.data.Dataset.from_tensor_slices(({k: v for k, v in x.items()}, labels[indices]))
        if shuffle_seed is not None:
            ds = ds.repeat().shuffle(len(indices), seed=shuffle_seed)
        return ds.batch(args.batch_size).prefetch(2)

    rows = []
    for seed in args.seeds:
        for name in MODELS:
            batches = dataset(train, shuffle_seed=seed)  # the same batches for both
            row = run(
                name,
                seed,
                args.steps,
                batches,
                dataset(held_out),
                len(vocabulary),
                args.sequence_length,
                args.learning_rate,
                xla=not args.smoke,  # a smoke's few steps: XLA's compile is most of them
            )
            row["parameters"] = build(name, len(vocabulary), args.sequence_length, 0).count_params()
            keras.backend.clear_session()
            rows.append(row)
            print(json.dumps(row), flush=True)
    root = pathlib.Path(args.output)
    root.mkdir(parents=True, exist_ok=True)
    (root / "results.json").write_text(json.dumps(rows, indent=2))
    print(f"\n{args.steps} steps of {args.batch_size}, held out: {len(held_out)} snippets")
    print("model     parameters  minutes  Rotten Tomatoes accuracy (mean, min-max)")
    for name in MODELS:
        mine = [r for r in rows if r["model"] == name]
        accuracy = [r["rotten_tomatoes_accuracy"] for r in mine]
        print(
            f"{name:<8}  {mine[0]['parameters']:10,}  "
            f"{statistics.mean(r['minutes'] for r in mine):7.1f}  "
            f"{statistics.mean(accuracy):.3f} ({min(accuracy):.3f}-{max(accuracy):.3f})"
        )


if __name__ == "__main__":
    main()
