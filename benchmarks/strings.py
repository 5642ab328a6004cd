"""`fit` on a `tf.data` of strings against `fit` on token ids: steps per second.

The packaged all-MiniLM-L6-v2 as a sentiment classifier (`BertClassifier.from_preset`,
mean pooling, 2 classes, its `TextClassifierPreprocessor` attached), Rotten Tomatoes
reviews, batch `--batch-size` of `--sequence-length` pieces, Adam, XLA. The anchor is
the token-id path users had before preprocessors: every review tokenised once before
training, the ids fed to `fit` as arrays. The string path feeds `fit` a batched
`tf.data.Dataset` of the raw reviews and labels: the preprocessor tokenises each batch
in the input pipeline (a parallel `map`, prefetched) while the model trains on the one
before. Each path has its own model (the same weights), so each keeps its own compiled
step. A fit runs `--steps` steps; its step time is the median interval between steps'
ends after the first two (the pipeline filled, `fit`'s set-up left out); the two paths
alternate, `--repeats` fits each after a warm-up fit (compilation), and the figure is
the median of their step times.

    python benchmarks/strings.py            # the README's figure
"""

import argparse
import json
import platform
import statistics
import time

from timing import select_backend  # benchmarks/timing.py

select_backend(__name__)

import keras  # noqa: E402
import numpy as np  # noqa: E402


def classifier(args):
    from keras_attn.models import BertClassifier, student_from_teacher

    keras.utils.set_random_seed(0)
    model = BertClassifier.from_preset(
        "all_minilm_l6_v2", num_classes=2, pooling="mean", sequence_length=args.sequence_length
    )
    if args.layers < model.backbone.num_layers:  # a quicker check of the benchmark itself
        preprocessor = model.preprocessor
        model = student_from_teacher(model, args.layers)
        model.preprocessor = preprocessor
    model.compile(
        optimizer=keras.optimizers.Adam(1e-5),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        jit_compile=True,
    )
    return model


class StepTimes(keras.callbacks.Callback):
    """The seconds between consecutive training steps' ends."""

    def on_train_begin(self, logs=None):
        self.ends = []

    def on_train_batch_end(self, batch, logs=None):
        self.ends.append(time.perf_counter())


def steady_step(fit):
    """The median seconds a training step of `fit(callbacks)` took, from one step's end
    to the next's, after the first two (which fill the input pipeline): the steady
    state, `fit`'s own set-up (the same for both paths) left out."""
    times = StepTimes()
    fit([times])
    return statistics.median(np.diff(times.ends[2:]))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--steps", type=int, default=20, help="training steps a fit")
    parser.add_argument("--repeats", type=int, default=5, help="fits of each path")
    parser.add_argument("--layers", type=int, default=6, help="MiniLM's first N layers")
    parser.add_argument("--json", help="also write the rows to this file")
    args = parser.parse_args(argv)
    import tensorflow as tf

    from keras_attn.data import rotten_tomatoes

    data = rotten_tomatoes(log=False)
    rows = args.batch_size * args.steps
    texts, labels = data.texts[:rows], np.array(data.labels[:rows], "int32")
    by_strings, by_ids = classifier(args), classifier(args)
    # Token ids as users made them before: the whole set tokenised once, up front.
    ids = {k: v.numpy() for k, v in by_ids.preprocessor(texts).items()}
    by_ids.preprocessor = None
    strings = tf.data.Dataset.from_tensor_slices((texts, labels)).batch(args.batch_size)

    def fit_on_strings(callbacks):
        by_strings.fit(strings, verbose=0, callbacks=callbacks)

    def fit_on_ids(callbacks):
        by_ids.fit(
            ids, labels, batch_size=args.batch_size, shuffle=False, verbose=0, callbacks=callbacks
        )

    paths = {"token ids": fit_on_ids, "strings": fit_on_strings}
    for fit in paths.values():  # warm-up: compilation, the map's trace
        fit([])
    steps = {name: [] for name in paths}
    for _ in range(args.repeats):  # alternating, so machine drifts hit both alike
        for name, fit in paths.items():
            steps[name].append(steady_step(fit))
    seconds = {name: statistics.median(values) for name, values in steps.items()}
    anchor = 1 / seconds["token ids"]
    table = []
    print(
        f"MiniLM ({args.layers} layers) classifier, batch {args.batch_size} x "
        f"{args.sequence_length}, {args.steps} steps a fit, median of {args.repeats} fits, "
        f"{platform.processor() or platform.machine()}:"
    )
    print(f"{'path':<10} {'steps/s':>8} {'vs token ids':>13}")
    for name in ("token ids", "strings"):
        rate = 1 / seconds[name]
        table.append((name, rate, rate / anchor))
        print(f"{name:<10} {rate:>8.2f} {rate / anchor:>12.3f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                [dict(zip(("path", "steps_per_second", "ratio"), r, strict=True)) for r in table], f
            )
    return table


if __name__ == "__main__":
    main()
