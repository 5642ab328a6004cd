"""The `keras-attn` command: `keras-attn COMMAND --help` for each command's options."""

import argparse

from keras_attn.cli import (
    attention,
    convert,
    demo,
    export,
    main_job,
    predict,
    saved_model_cli,
    serving_config,
    train,
)

COMMANDS = {
    **{name: (train.Command(name), text) for name, text in train.DESCRIPTIONS.items()},
    "export": (
        export,
        "a trained run -> saved_models/<name>/<version>/ (TF Serving, raw-text signature)",
    ),
    "predict": (predict, "run an exported SavedModel on raw text"),
    "attention": (
        attention,
        "draw an exported BERT model's attention for a sentence (PNG, TensorBoard)",
    ),
    "serving-config": (
        serving_config,
        "TF Serving's models.config (version policies, labels) and batching file",
    ),
    "saved-model-cli": (
        saved_model_cli,
        "TensorFlow's saved_model_cli with tensorflow-text's ops loaded",
    ),
    "main": (
        main_job,
        "the main job: pre-train, fine-tune, export, predict (about 7 minutes on 2 CPUs)",
    ),
    "demo": (demo, "a small Transformer from our layers learns to reverse sequences"),
    "convert": (convert, "a BERT checkpoint folder (Hugging Face or TF1) -> backbone.keras"),
}


def main(argv=None):
    parser = argparse.ArgumentParser(prog="keras-attn", description="keras_attn command line")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        commands.add_parser(name, help=help_text, add_help=False)
    args, rest = parser.parse_known_args(argv)
    return COMMANDS[args.command][0].main(rest)


def console(argv=None):
    """The `keras-attn` console script: runs `main` and exits 0 on success (the
    commands return their results to Python callers, not to the shell)."""
    main(argv)
    return 0


if __name__ == "__main__":
    console()
