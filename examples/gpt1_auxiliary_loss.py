"""GPT-1's auxiliary language-model loss in miniature: λ = 0.5 against λ = 0.

"We additionally found that including language modeling as an auxiliary objective to
the fine-tuning helped learning by (a) improving generalization of the supervised model,
and (b) accelerating convergence ... L_3(C) = L_2(C) + λ * L_1(C)" with λ = 0.5
(Radford et al., 2018, §3.2); the ablation (Table 5) finds it helps the larger
datasets and not the smaller ones.

Here a GPT pre-trained on the King James Bible (`keras-attn lm --config gpt_kjv_lm`,
128 tokens; trained first if `--kjv-run` holds none) is fine-tuned on Rotten Tomatoes
(10,246 / 2,562 split, seed 0) by `keras-attn finetune --backbone KJV_RUN`: GPT-1's
start and extract tokens join its vocabulary, a linear layer reads the extract token's
final state, and the loss is the task's plus λ times the language model's over the same
snippets. Both λ run the same steps on the same batches for each seed; accuracy on the
whole held-out split. Every run is a `keras-attn` run folder; the table goes to stdout
and `results.json`.

Run:  python examples/gpt1_auxiliary_loss.py [--steps 600] [--seeds 0 1 2]
      [--lm-weights 0.5 0] [--kjv-run runs/kjv_gpt] [--smoke]
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


def smoke_corpus(folder):
    """The first 40 chapters of the KJV as a corpus file: a vocabulary in seconds."""
    from keras_attn.data import kjv_documents

    path = pathlib.Path(folder) / "kjv_excerpt.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join("\n".join(d) for d in kjv_documents()[:40]), encoding="utf-8")
    return path


def kjv_gpt(run, steps, smoke):
    """A `keras-attn lm` GPT on the KJV in `run` (trained unless it is there)."""
    run = pathlib.Path(run)
    if not (run / "model.keras").is_file():
        flags = ["--config", "gpt_kjv_lm", "--sequence-length", "128", "--output", str(run)]
        flags += ["--steps", str(steps), "--verbose", "0", "--samples-every", "0"]
        if smoke:
            flags += ["--num-layers", "1", "--hidden-dim", "32", "--intermediate-dim", "64"]
            flags += ["--vocabulary-size", "1000", "--jit-compile", "false"]
            flags += ["--validation-steps", "1", "--steps-per-epoch", "2"]
            flags += ["--corpus", str(smoke_corpus(run.parent)), "--held-out-documents", "4"]
        keras_attn(["lm", *flags])
        keras.backend.clear_session()
    return run


def finetune(backbone, lm_weight, seed, args, output):
    steps = args.steps
    flags = ["--backbone", str(backbone), "--lm-weight", str(lm_weight)]
    flags += ["--sequence-length", "64", "--steps", str(steps), "--seed", str(seed)]
    flags += ["--steps-per-epoch", str(min(steps, 200)), "--checkpoint-every", str(min(steps, 200))]
    flags += ["--learning-rate", str(args.learning_rate), "--batch-size", "32", "--warmup", "0.05"]
    flags += ["--output", str(output), "--verbose", "0", "--attention-every", "0"]
    flags += ["--jit-compile", str(not args.smoke)]
    if args.smoke:
        flags += ["--validation-steps", "2"]
    return keras_attn(["finetune", *flags])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=600, help="fine-tuning steps, each")
    parser.add_argument("--learning-rate", type=float, default=2.5e-4)
    parser.add_argument("--lm-weights", type=float, nargs="+", default=[0.5, 0.0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--kjv-run", default="runs/kjv_gpt")
    parser.add_argument("--kjv-steps", type=int, default=1500)
    parser.add_argument("--output", default="runs/gpt1_auxiliary_loss")
    parser.add_argument("--smoke", action="store_true", help="seconds: a few steps, one seed")
    args = parser.parse_args(argv)
    root = pathlib.Path(args.output)
    if args.smoke:
        args.steps, args.seeds, args.kjv_steps = 2, args.seeds[:1], 2
        args.kjv_run = root / "kjv_gpt"
    backbone = kjv_gpt(args.kjv_run, args.kjv_steps, args.smoke)
    rows = []
    for seed in args.seeds:
        for lm_weight in args.lm_weights:
            tuned = finetune(backbone, lm_weight, seed, args, root / f"lambda{lm_weight}-{seed}")
            keras.backend.clear_session()
            row = {
                "lm_weight": lm_weight,
                "seed": seed,
                "steps": tuned.steps,
                "minutes": round(tuned.seconds / 60, 2),
                "rotten_tomatoes_accuracy": tuned.metrics["val_logits_accuracy"],
                "held_out_lm_loss": tuned.metrics.get("val_lm_logits_loss"),
            }
            rows.append(row)
            print(json.dumps(row), flush=True)
    root.mkdir(parents=True, exist_ok=True)
    (root / "results.json").write_text(json.dumps(rows, indent=2))
    print(f"\n{args.steps} fine-tuning steps of 32 each, held out: 2,562 snippets")
    print("lambda  minutes  Rotten Tomatoes accuracy (mean, min-max)")
    for lm_weight in args.lm_weights:
        mine = [r for r in rows if r["lm_weight"] == lm_weight]
        accuracy = [r["rotten_tomatoes_accuracy"] for r in mine]
        print(
            f"{lm_weight:<6}  {statistics.mean(r['minutes'] for r in mine):7.1f}  "
            f"{statistics.mean(accuracy):.3f} ({min(accuracy):.3f}-{max(accuracy):.3f})"
        )


if __name__ == "__main__":
    main()
