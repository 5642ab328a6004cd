"""LoRA in miniature: MiniLM fine-tuned on Rotten Tomatoes with rank-8 adapters or fully.

"LoRA performs on-par or better than fine-tuning in model quality ... despite having
fewer trainable parameters" (Hu et al., 2021). The packaged all-MiniLM-L6-v2 (22.7M
parameters) is fine-tuned as a sentiment classifier (mean pooling, 64 pieces, batch 32,
10,246 / 2,562 split, seed 0), for the same steps, two ways (`keras-attn finetune`):

- full: every weight trains, lr 1e-4 (`minilm_classifier`'s);
- LoRA: `--lora-rank 8` adapters on every query and value projection (scale 1), the
  rest frozen, the new classifier head trains too; lr 5e-4 (the paper's RoBERTa-base
  GLUE rate).

Per run: accuracy on the whole held-out split, the share of parameters trained, the
run's minutes, and the files a run leaves (a checkpoint, `model.keras`, the adapters).
Step time and peak memory: `benchmarks/lora.py`. The table goes to stdout and
`results.json`; every run stays a run folder.

Run:  python examples/lora_vs_full.py [--steps 600] [--seeds 0 1 2] [--smoke]
"""

import argparse
import json
import os
import pathlib
import statistics

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

import keras  # noqa: E402

from keras_attn.cli.main import main as keras_attn  # noqa: E402

METHODS = {
    "full": ["--learning-rate", "0.0001"],
    "lora": ["--learning-rate", "0.0005", "--lora-rank", "8"],
}


def trained_share(model):
    """Parameters the run trained / the model's parameters (adapters not counted)."""
    trained = sum(int(keras.ops.size(w)) for w in model.trainable_weights)
    total = sum(int(keras.ops.size(w)) for w in model.weights if "lora_kernel" not in w.path)
    return trained, total


def sizes(run):
    """Bytes of the files a run leaves: its newest checkpoint, model, adapters."""
    newest = sorted((run / "checkpoints").glob("ckpt-*.npz"))[-1]
    files = {"checkpoint": newest, "model": run / "model.keras"}
    files["adapters"] = run / "adapters.lora.h5"
    return {name: path.stat().st_size for name, path in files.items() if path.exists()}


def fine_tune(method, seed, steps, output, smoke):
    flags = ["finetune", "--config", "minilm_classifier", *METHODS[method]]
    flags += ["--steps", str(steps), "--steps-per-epoch", str(min(steps, 200))]
    flags += ["--checkpoint-every", str(min(steps, 200)), "--attention-every", "0"]
    flags += ["--seed", str(seed), "--verbose", "0", "--output", str(output)]
    # Every validation (and the final figure) on the whole held-out split.
    flags += ["--validation-steps", "2", "--jit-compile", "false"] if smoke else []
    result = keras_attn(flags)
    trained, total = trained_share(result.model)
    row = {
        "method": method,
        "seed": seed,
        "accuracy": result.metrics["val_accuracy"],
        "trained": trained,
        "parameters": total,
        "share": trained / total,
        "minutes": round(result.seconds / 60, 2),
        "bytes": sizes(pathlib.Path(output)),
    }
    keras.backend.clear_session()
    return row


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=list(METHODS))
    parser.add_argument("--output", default="runs/lora_vs_full")
    parser.add_argument("--smoke", action="store_true", help="seconds: 2 steps, one seed")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.seeds = 2, args.seeds[:1]
    root = pathlib.Path(args.output)
    rows = []
    for seed in args.seeds:
        for method in args.methods:
            rows.append(fine_tune(method, seed, args.steps, root / f"{method}-{seed}", args.smoke))
            print(json.dumps(rows[-1]), flush=True)
    root.mkdir(parents=True, exist_ok=True)
    (root / "results.json").write_text(json.dumps(rows, indent=2))

    print(f"\nMiniLM on Rotten Tomatoes, {args.steps} steps, seeds {args.seeds}")
    for method in args.methods:
        mine = [row for row in rows if row["method"] == method]
        accuracies = [row["accuracy"] for row in mine]
        files = ", ".join(f"{k} {v / 2**20:.2f} MiB" for k, v in mine[-1]["bytes"].items())
        print(
            f"{method:<5} accuracy {statistics.mean(accuracies):.4f} "
            f"({min(accuracies):.4f}-{max(accuracies):.4f}), trained "
            f"{mine[-1]['trained']:,} of {mine[-1]['parameters']:,} "
            f"({mine[-1]['share']:.2%}), {statistics.mean(r['minutes'] for r in mine):.1f} min; "
            f"{files}"
        )


if __name__ == "__main__":
    main()
