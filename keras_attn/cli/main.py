"""The `keras-attn` command: `keras-attn COMMAND --help` for each command's options.

Only the command that runs is imported, and only once its arguments are read, so
`--help` answers at once, without TensorFlow. A command that needs TensorFlow gets
it imported here first with TensorFlow's native start-up lines (CUDA probing, absl's
notices) held back; `--verbose` shows them, and so does a failed import. `--verbose`
also prints the traceback of a user's error above its `error:` line.
"""

import importlib
import os

from keras_attn import native_logs
from keras_attn.cli import user_errors
from keras_attn.cli.train import BACKENDS, DESCRIPTIONS
from keras_attn.cli.user_errors import CommandParser

# name -> (module under keras_attn.cli, one-line help)
COMMANDS = {
    **{name: ("train", text) for name, text in DESCRIPTIONS.items()},
    "export": (
        "export",
        "a trained run -> saved_models/<name>/<version>/ (TF Serving; --format: ONNX, "
        "OpenVINO, LiteRT)",
    ),
    "predict": ("predict", "run an export of any format on raw text or a file of it"),
    "attention": ("attention", "draw an exported BERT model's attention for a sentence (PNG)"),
    "serving-config": ("serving_config", "TF Serving's models.config and batching file"),
    "saved-model-cli": (
        "saved_model_cli",
        "TensorFlow's saved_model_cli with tensorflow-text's ops",
    ),
    "main": ("main_job", "the main job: pre-train, fine-tune, export, predict (~7 min on 2 CPUs)"),
    "demo": ("demo", "a small Transformer from our layers learns to reverse sequences"),
    "convert": ("convert", "BERT-family and GPT-2 checkpoints: Hugging Face or TF1 <-> .keras"),
    "evaluate": ("evaluate", "zero- and few-shot accuracy of a language model, in context"),
    "chat": ("chat", "talk with a GGUF model (SmolLM2 by default), its replies streamed"),
}


@user_errors.user_errors
def main(argv=None):
    parser = CommandParser(prog="keras-attn", description="keras_attn command line")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="show TensorFlow's own start-up and C++ log lines (hidden by default) and the "
        "traceback above a user's error line",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        commands.add_parser(name, help=help_text, add_help=False)
    args, rest = parser.parse_known_args(argv)
    asks_help = any(flag in rest for flag in ("-h", "--help"))
    user_errors.show_tracebacks(args.verbose)
    backend = backend_flag(rest)
    if backend in BACKENDS:  # before TensorFlow starts: importing it imports Keras
        os.environ["KERAS_BACKEND"] = backend
    if not asks_help:
        start_tensorflow(quiet=not args.verbose)
    module = importlib.import_module(f"keras_attn.cli.{COMMANDS[args.command][0]}")
    if module.__name__.endswith(".train"):
        return module.main(args.command, rest)
    return module.main(rest)


def backend_flag(argv):
    """The value of a `--backend NAME` (or `--backend=NAME`) flag in `argv`, or None; read
    before Keras starts (the training commands and the benchmarks use it)."""
    for index, arg in enumerate(argv):
        if arg == "--backend" and index + 1 < len(argv):
            return argv[index + 1]
        if arg.startswith("--backend="):
            return arg.partition("=")[2]
    return None


def start_tensorflow(quiet=True):
    """Imports TensorFlow and finds its devices, its native log lines held back if
    `quiet` (see `keras_attn.native_logs`); shown, every C++ level, if not (unless
    the user set `TF_CPP_MIN_LOG_LEVEL`). A failed import shows what it printed."""
    if quiet:
        native_logs.quiet_command_line()
    else:
        native_logs.loud_tensorflow_start()
    try:
        with native_logs.native_stderr_held(quiet):
            import tensorflow as tf

            tf.config.list_physical_devices()  # CUDA's probe speaks now; no runtime is made yet
    except ModuleNotFoundError as error:
        if error.name != "tensorflow":
            raise
        from keras_attn.requirements import TENSORFLOW_INSTALL

        raise SystemExit(
            "keras-attn: the command line needs TensorFlow (tf.data pipelines, "
            "tensorflow-text, SavedModel export), which cannot be imported here. Install it "
            f"with: {TENSORFLOW_INSTALL}"
        ) from None


def console(argv=None):
    """The `keras-attn` console script: runs `main` and exits 0 on success (the
    commands return their results to Python callers, not to the shell)."""
    main(argv)
    return 0


if __name__ == "__main__":
    console()
