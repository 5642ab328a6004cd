"""Does ELECTRA's discriminator learn in miniature? The recipe and the paper's remedies.

Each variant pre-trains `electra_tiny_pretrain` (ELECTRA-Small's recipe on a tiny
discriminator, the King James Bible) for `--steps` steps and records, on held-out
chapters every `--every` steps, what the discriminator has learned:

- `rtd_auc`: how well its "replaced" logit ranks replaced above original tokens;
- `frequent_rtd_auc` / `frequent_rtd_recall`: the same and the share found among the
  500 most frequent pieces, where a replacement cannot be told by its rarity, only by
  its context (a generator's samples follow the corpus's frequencies).

Variants (`--variants`): `recipe` (as the preset says), `warm_start` (300 steps of
masked LM alone, then the replaced-token weight ramped in over 300), `ramp` (the
weight ramped in over the first 600 steps), `uniform` (the control: replacements drawn
uniformly from the vocabulary), `uniform_warmup` (ours: 500 steps of uniform
replacements, easy to tell, before the generator's), `unigram` (ours: replacements
drawn by the corpus's piece frequencies, context-free: can the discriminator learn
context at all?), `lambda_10` (the weight 10
instead of 50: the shared embeddings follow masked LM more), `lr_2e-3` (four times
the learning rate), `generator_half` (a generator half as wide) and `mini` (a
discriminator of 4 layers, H=256).

Writes `results.json` (every curve) and a figure of the curves (`--figure`).
`--from-runs NAME=FOLDER ...` draws instead the held-out curves that finished (or
running) `keras-attn pretrain --objective electra` runs logged to TensorBoard, e.g.
longer schedules of the recipe.

Run:  python examples/electra_remedies.py [--steps 1500] [--seeds 0] [--variants ...]
      [--figure docs/images/electra_remedies.png] [--smoke]
      python examples/electra_remedies.py --from-runs 6k=runs/a 12k=runs/b --figure F
"""

import argparse
import json
import os
import pathlib

os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from keras_attn.native_logs import quiet_command_line  # noqa: E402

quiet_command_line()  # TensorFlow's C++ notices off, as for `keras-attn` commands

import keras  # noqa: E402

from keras_attn.cli.main import main as keras_attn  # noqa: E402

VARIANTS = {
    "recipe": [],
    "warm_start": ["--generator-warmup-steps", "300", "--rtd-ramp-steps", "300"],
    "ramp": ["--rtd-ramp-steps", "600"],
    "uniform": ["--uniform-generator", "true"],
    "uniform_warmup": ["--uniform-warmup-steps", "500"],
    "unigram": ["--unigram-generator", "true"],
    "lambda_10": ["--rtd-weight", "10"],
    "lr_2e-3": ["--learning-rate", "0.002"],
    "generator_half": ["--generator-fraction", "0.5"],
    "mini": ["--preset", "mini"],
}
CURVES = ("val_rtd_auc", "val_frequent_rtd_auc", "val_frequent_rtd_recall", "val_mlm_accuracy")


def pretrain(variant, seed, steps, every, output, smoke):
    flags = ["--config", "electra_tiny_pretrain", *VARIANTS[variant]]
    flags += ["--steps", str(steps), "--steps-per-epoch", str(every), "--seed", str(seed)]
    flags += ["--checkpoint-every", str(every), "--attention-every", "0", "--verbose", "0"]
    flags += ["--output", str(output)]
    if smoke:
        import sys

        sys.path.insert(0, str(pathlib.Path(__file__).parent))  # the sibling example's corpus
        from electra_vs_bert import smoke_corpus

        flags += ["--corpus", str(smoke_corpus(output.parent)), "--vocabulary-size", "1000"]
        flags += ["--held-out-documents", "4", "--validation-steps", "1", "--jit-compile", "false"]
        flags += ["--frequent-pieces", "50"]
    else:
        flags += ["--validation-steps", "20"]
    return keras_attn(["pretrain", *flags])


def plot(rows, path):
    """The held-out curves, one line per variant (the mean over seeds)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    titles = {
        "val_rtd_auc": "held-out AUC, all replacements",
        "val_frequent_rtd_auc": "AUC among the 500 most frequent pieces",
        "val_frequent_rtd_recall": "recall on frequent-piece replacements",
        "val_mlm_accuracy": "generator's masked-LM accuracy",
    }
    figure, axes = plt.subplots(1, len(CURVES), figsize=(4.2 * len(CURVES), 3.4))
    for axis, key in zip(axes, CURVES, strict=True):
        for variant in dict.fromkeys(r["variant"] for r in rows):
            mine = [r for r in rows if r["variant"] == variant and key in r["curves"]]
            if not mine:
                continue
            values = np.mean([r["curves"][key] for r in mine], axis=0)
            axis.plot(mine[0]["steps"], values, label=variant)
        axis.set_title(titles[key], fontsize=9)
        axis.set_xlabel("step")
        axis.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=110)


def curves_from_run(folder):
    """`(steps, {curve: values})` of a pretrain run's held-out checks (TensorBoard)."""
    import tensorflow as tf
    from tensorboard.backend.event_processing import event_accumulator

    logs = event_accumulator.EventAccumulator(
        str(pathlib.Path(folder) / "logs" / "validation"), size_guidance={"tensors": 0}
    )
    logs.Reload()
    curves, steps = {}, None
    for key in CURVES:
        events = logs.Tensors(f"evaluation_{key.removeprefix('val_')}_vs_iterations")
        steps = [event.step for event in events]
        values = [float(tf.make_ndarray(event.tensor_proto)) for event in events]
        curves[key] = [round(value, 4) for value in values]
    return steps, curves


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--every", type=int, default=100, help="steps between held-out checks")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--output", default="runs/electra_remedies")
    parser.add_argument("--figure", default=None, help="PNG of the curves (default: in --output)")
    parser.add_argument("--smoke", action="store_true", help="seconds: a few steps, one seed")
    parser.add_argument(
        "--from-runs", nargs="+", metavar="NAME=FOLDER", help="draw these runs' curves instead"
    )
    args = parser.parse_args(argv)
    if args.from_runs:
        rows = []
        for spec in args.from_runs:
            name, _, folder = spec.partition("=")
            steps, curves = curves_from_run(folder)
            rows.append({"variant": name, "seed": None, "steps": steps, "curves": curves})
            last = {key: values[-1] for key, values in curves.items()}
            print(json.dumps({"run": name, "step": steps[-1], **last}), flush=True)
        plot(rows, pathlib.Path(args.figure or "electra_runs.png"))
        return rows
    if args.smoke:
        args.steps, args.every, args.seeds = 4, 2, args.seeds[:1]
    root = pathlib.Path(args.output)
    rows = []
    for seed in args.seeds:
        for variant in args.variants:
            result = pretrain(variant, seed, args.steps, args.every, root / f"{variant}-{seed}",
                              args.smoke)  # fmt: skip
            keras.backend.clear_session()
            curves = {k: [round(v, 4) for v in result.history[k]] for k in CURVES
                      if k in result.history}  # fmt: skip
            steps = [args.every * (i + 1) for i in range(len(curves["val_rtd_auc"]))]
            row = {"variant": variant, "seed": seed, "steps": steps, "curves": curves}
            row["final"] = {k: round(v, 4) for k, v in result.metrics.items() if k in CURVES}
            rows.append(row)
            print(json.dumps({"variant": variant, "seed": seed, **row["final"]}), flush=True)
    root.mkdir(parents=True, exist_ok=True)
    (root / "results.json").write_text(json.dumps(rows, indent=2))
    figure = pathlib.Path(args.figure) if args.figure else root / "electra_remedies.png"
    plot(rows, figure)
    print(f"\n{args.steps} steps, held-out checks every {args.every}; figure: {figure}")
    print("variant          AUC   frequent AUC  frequent recall  generator MLM acc")
    for variant in args.variants:
        mine = [r["final"] for r in rows if r["variant"] == variant]
        mean = {k: sum(m.get(k, 0) for m in mine) / len(mine) for k in CURVES}
        print(
            f"{variant:<15} {mean['val_rtd_auc']:.3f}  {mean['val_frequent_rtd_auc']:12.3f}  "
            f"{mean['val_frequent_rtd_recall']:15.3f}  {mean['val_mlm_accuracy']:.3f}"
        )


if __name__ == "__main__":
    main()
