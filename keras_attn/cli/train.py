"""`keras-attn pretrain` / `finetune` / `distill` / `lm` / `seq2seq`: train a task from a YAML
config and flags.

Every option of the task's `model:`, `data:` and `training:` sections is also a
flag (`--batch-size 64`, `--text-column review`); `--help` lists them with their
defaults. Values come from the defaults, then `--config` (a shipped preset name or
a YAML file), then the flags. A run writes into `--output`: `config.yaml`,
`checkpoints/`, `logs/` (TensorBoard) and the trained model; the same command
started again resumes from the newest checkpoint. A folder holds one run: a command
whose configuration differs in more than the step budget and logging is refused
(`--no-resume` starts afresh there, moving the old run aside).
"""

import sys

from keras_attn.cli.user_errors import CommandParser, at_least, user_errors
from keras_attn.errors import UserInputError
from keras_attn.training import run_folder
from keras_attn.training.config import (
    TrainingConfig,
    add_arguments,
    load_config,
    overrides_from,
    to_dict,
)
from keras_attn.training.task_configs import SECTIONS

BACKENDS = ("tensorflow", "jax")

DESCRIPTIONS = {
    "pretrain": "pre-train BERT (masked LM + next-sentence or sentence-order prediction) on a "
    "corpus",
    "finetune": "fine-tune a BERT backbone to classify texts or text pairs from a CSV/TSV/JSONL "
    "file",
    "distill": "distil a fine-tuned classifier run into a shallower student (knowledge "
    "distillation: outputs, hidden states, attention)",
    "lm": "train a GPT-style causal language model on a corpus, with generated samples in "
    "TensorBoard",
    "seq2seq": "train an encoder-decoder Transformer on sentence pairs, with translations in "
    "TensorBoard",
}


# The options most runs set, shown first in `--help` (after --config and --output).
COMMON = {
    "pretrain": ("data.corpus", "model.preset", "model.objective"),
    "finetune": (
        "data.train", "data.text_column", "data.label_column", "data.task", "model.backbone",
        "training.lora_rank",
    ),
    "distill": ("model.teacher", "model.student_layers"),
    "lm": ("data.corpus", "model.architecture", "model.num_layers", "model.hidden_dim"),
    "seq2seq": ("data.pairs", "model.num_layers", "model.hidden_dim"),
}  # fmt: skip
COMMON_TRAINING = ("training.steps", "training.batch_size", "training.learning_rate")


def build_parser(command):
    parser = CommandParser(
        prog=f"keras-attn {command}",
        usage=f"keras-attn {command} [--config PRESET_OR_YAML] [--output FOLDER] [options]",
        description=DESCRIPTIONS[command],
        epilog="Presets: keras_attn/training/configs/*.yaml. Values: defaults < --config < flags.",
    )
    common = parser.add_argument_group("the common options")
    common.add_argument("--config", help="a preset name (e.g. bert_tiny_pretrain) or a YAML file")
    common.add_argument(
        "--output",
        default=f"runs/{command}",
        help="the run's folder: config, checkpoints, logs, model (default: %(default)s)",
    )
    how = parser.add_argument_group("resuming, progress and the backend")
    how.add_argument(
        "--no-resume",
        dest="resume",
        action="store_false",
        help="start afresh: a run already in --output moves to <output>.replaced-<time> "
        "(default: resume it from its newest checkpoint)",
    )
    how.add_argument(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=None,
        help="progress on stdout, counted over --steps: 0 none, 1 a bar, 2 plain lines (the "
        "first step, every 30 s, each epoch's metrics; no bar codes) (default: a bar on a "
        "terminal, lines otherwise); either way a line at least once a minute",
    )
    how.add_argument(
        "--backend",
        choices=BACKENDS,
        default=None,
        help="the Keras backend to train on: tensorflow (tf.distribute strategies) or jax "
        "(keras.distribution: data parallel over the devices, --strategy auto/mirrored, and "
        "weights split over --model-parallel N of them; "
        "XLA_FLAGS=--xla_force_host_platform_device_count=8 splits a CPU into eight). "
        "Default: KERAS_BACKEND, else tensorflow. Exports run on TensorFlow either way",
    )
    sections = {**SECTIONS[command], "training": TrainingConfig}
    destinations = add_arguments(
        parser, sections, (*COMMON[command], *COMMON_TRAINING), common_group=common
    )
    processes = parser.add_argument_group(
        "processes (JAX: one run over several processes or hosts; see docs/distributed.md)"
    )
    processes.add_argument(
        "--coordinator",
        metavar="HOST:PORT",
        help="where process 0 listens and the others connect (with --backend jax)",
    )
    processes.add_argument(
        "--num-processes", type=at_least(1), help="how many processes the run has"
    )
    processes.add_argument(
        "--process-id", type=at_least(0), help="this process's index (0: the chief, who writes)"
    )
    return parser, sections, destinations


def _join_processes(args, timeout):
    """`--coordinator`, `--num-processes`, `--process-id`: all three, consistent, on JAX."""
    import keras

    if args.coordinator is None or args.num_processes is None or args.process_id is None:
        raise UserInputError(
            "a run of several processes needs all of --coordinator HOST:PORT, --num-processes "
            "and --process-id"
        )
    host, _, port = args.coordinator.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise UserInputError(
            f"argument --coordinator: expected HOST:PORT, got {args.coordinator!r}"
        )
    _check_coordinator(host, int(port), args.process_id)
    if args.process_id >= args.num_processes:
        raise UserInputError(
            f"argument --process-id: expected 0 to {args.num_processes - 1} "
            f"(--num-processes {args.num_processes}), got {args.process_id}"
        )
    if keras.backend.backend() != "jax":
        raise UserInputError(
            "--coordinator, --num-processes and --process-id run on JAX: add --backend jax "
            "(TensorFlow's workers read TF_CONFIG, see --strategy multi_worker)"
        )
    from keras_attn.training.strategy import initialize_processes

    initialize_processes(args.coordinator, args.num_processes, args.process_id, timeout)


def _check_coordinator(host, port, process_id):
    """`--coordinator`'s host resolved (a dotted address checked as one, never looked
    up) and, in process 0, an address of this machine it can listen on: JAX's
    coordinator ends the process with a segmentation fault where it cannot."""
    import ipaddress
    import socket

    name = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if all(part.isdigit() for part in name.split(".")):
        try:
            ipaddress.ip_address(name)
        except ValueError:
            raise UserInputError(
                f"argument --coordinator: {name!r} is not an IPv4 address"
            ) from None
    try:
        family, kind, _, _, address = socket.getaddrinfo(name, port, type=socket.SOCK_STREAM)[0]
    except (socket.gaierror, UnicodeError) as error:
        raise UserInputError(
            f"argument --coordinator: cannot resolve the host {name!r} ({error})"
        ) from None
    if process_id != 0:
        return  # the coordinator may start after this process: JAX waits for it
    try:
        with socket.socket(family, kind) as probe:
            probe.bind(address)
    except OSError as error:
        raise UserInputError(
            f"argument --coordinator: process 0 serves the run at {host}:{port}, but cannot "
            f"listen there ({error.strerror or error}): give an address of this machine and "
            "a free port"
        ) from None


@user_errors
def main(command, argv=None):
    parser, sections, destinations = build_parser(command)
    args = parser.parse_args(argv)
    if args.backend is not None:
        import keras  # `keras-attn` set KERAS_BACKEND from --backend before Keras started

        if keras.backend.backend() != args.backend:
            parser.error(
                f"--backend {args.backend}: Keras already runs on {keras.backend.backend()!r} "
                f"in this process; set KERAS_BACKEND={args.backend} before Keras is imported "
                "(the keras-attn command does it for you)"
            )
    try:  # a bad value is one `error:` line, as every user error (no usage block)
        run = load_config(sections, args.config, overrides_from(args, destinations))
    except ValueError as error:
        raise UserInputError(str(error)) from None
    if args.coordinator or args.num_processes is not None or args.process_id is not None:
        _join_processes(args, run.training.peer_timeout)
    # The output folder is checked before any data or weights are loaded.
    run_folder.check_output_dir(args.output)
    run_folder.check_same_run(args.output, to_dict(run), resume=args.resume)

    # TensorFlow, the data and the model start here, after the config and folder are checked.
    from keras_attn.training.tasks import TASKS
    from keras_attn.training.trainer import train

    try:
        result = train(
            TASKS[command](),
            run,
            args.output,
            resume=args.resume,
            verbose="auto" if args.verbose is None else args.verbose,
        )
    except KeyboardInterrupt:
        raise KeyboardInterrupt(
            f"the run in {args.output} resumes from its last checkpoint when the same "
            "command starts again"
        ) from None
    print("\n" + result.summary(), file=sys.stdout, flush=True)
    return result
