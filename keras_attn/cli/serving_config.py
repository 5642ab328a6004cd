"""`keras-attn serving-config MODEL_DIR...`: TF Serving's `models.config` (and batching file).

Writes a text-format `ModelServerConfig` serving each exported model folder
(`saved_models/<name>`) with a version policy and version labels, for
`tensorflow_model_server --model_config_file=...`; with `--batching`, also a
`batching.config` (`BatchingParameters`) for `--enable_batching
--batching_parameters_file=...`. Paths are written as the server will see them:
`--base-path /models` for the `tensorflow/serving` container with
`-v $PWD/saved_models:/models`.
"""

import pathlib

from keras_attn.cli.user_errors import CommandParser, user_errors

BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
DEFAULT_BATCHING = {
    "max_batch_size": 32,
    "batch_timeout_micros": 2000,
    "num_batch_threads": 4,
    "max_enqueued_batches": 100,
}


def build_parser():
    parser = CommandParser(prog="keras-attn serving-config", description=__doc__.split("\n")[0])
    parser.add_argument(
        "models", nargs="+", type=pathlib.Path, help="model folders saved_models/<name>"
    )
    parser.add_argument(
        "--output",
        type=pathlib.Path,
        default=pathlib.Path("saved_models/models.config"),
        help="models.config to write (default: %(default)s)",
    )
    parser.add_argument(
        "--base-path",
        help="the folder the server sees the model folders' parent as, e.g. "
        "/models in the container (default: absolute paths here)",
    )
    parser.add_argument(
        "--versions",
        action="append",
        default=[],
        metavar="[NAME=]POLICY",
        help="version policy: latest (default), latest:N, all, specific:1,2; NAME= for one model",
    )
    parser.add_argument(
        "--label",
        action="append",
        default=[],
        metavar="NAME:LABEL=VERSION",
        help="a version label, e.g. sentiment:stable=1 (repeat)",
    )
    parser.add_argument(
        "--batching", action="store_true", help="also write batching.config next to --output"
    )
    parser.add_argument(
        "--measure",
        action="store_true",
        help="batching: time the first model's serving_default at batch sizes 1 to 64 on "
        "this machine and take the settings from that curve (flags given still win)",
    )
    parser.add_argument(
        "--measure-batch-sizes",
        type=int,
        nargs="+",
        default=list(BATCH_SIZES),
        metavar="N",
        help="batch sizes --measure times (default: %(default)s)",
    )
    parser.add_argument("--max-batch-size", type=int, help="batching: largest batch (default: 32)")
    parser.add_argument(
        "--batch-timeout-micros",
        type=int,
        help="batching: wait for a batch to fill, in microseconds (default: 2000)",
    )
    parser.add_argument("--num-batch-threads", type=int, help="batching: threads (default: 4)")
    parser.add_argument("--max-enqueued-batches", type=int, help="batching: queue (default: 100)")
    return parser


@user_errors
def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    from keras_attn.export.model_server_config import (
        serving_config,
        serving_image,
        write_serving_config,
    )

    batching = _batching(parser, args)
    models = _models(parser, args)
    try:  # folders, policies and labels first: then every served version is loadable
        serving_config(models, base_path=args.base_path)
    except (ValueError, TypeError) as error:
        parser.error(str(error))
    _check_served_versions(models)
    try:
        files = write_serving_config(
            models, args.output, base_path=args.base_path, batching=batching
        )
    except (ValueError, TypeError) as error:
        parser.error(str(error))
    for file in files:
        print(f"wrote {file}")
    if batching and args.measure:
        print("batching: " + ", ".join(f"{k} {v}" for k, v in batching.items()))
    config = files[0].resolve()
    flags = f"--model_config_file={config}"
    if batching:
        flags += f" --enable_batching --batching_parameters_file={config.parent / files[1].name}"
    if args.base_path:
        parent = args.models[0].resolve().parent
        flags = flags.replace(str(config.parent), "/config")
        print(
            f"Serve them: docker run -p 8500:8500 -p 8501:8501 -v {parent}:{args.base_path} "
            f"-v {config.parent}:/config {serving_image()} {flags}"
        )
    else:
        print(f"Serve them: tensorflow_model_server --port=8500 --rest_api_port=8501 {flags}")
    return files


def _models(parser, args):
    """The `models` of `write_serving_config` from the folders, `--versions` and `--label`."""
    names = {folder.name for folder in args.models}
    policies, labels = {}, {name: {} for name in names}
    for spec in args.versions:
        name, _, policy = spec.rpartition("=")
        if name and name not in names:
            parser.error(f"--versions {spec}: no model named {name!r} (models: {sorted(names)})")
        for target in [name] if name else names:
            policies[target] = policy
    for spec in args.label:
        name, colon, rest = spec.partition(":")
        label, equals, version = rest.partition("=")
        if not colon or not equals or not version.isdigit():
            parser.error(f"--label {spec}: expected NAME:LABEL=VERSION, e.g. sentiment:stable=1")
        if name not in names:
            parser.error(f"--label {spec}: no model named {name!r} (models: {sorted(names)})")
        labels[name][label] = int(version)
    return [
        {
            "path": folder,
            "versions": policies.get(folder.name, "latest"),
            "labels": labels[folder.name],
        }
        for folder in args.models
    ]


def _check_served_versions(models):
    """Loads every version the configuration will serve, as TF Serving will: a damaged
    one is named (which file, what is wrong) now, not in the server's log. The
    folders and policies are valid (`serving_config` checked them)."""
    from keras_attn.export.model_server_config import model_versions, served_versions
    from keras_attn.export.versions import load_saved_model

    for model in models:
        for version in served_versions(model_versions(model["path"]), model["versions"]):
            load_saved_model(model["path"] / str(version))


def _batching(parser, args):
    """The batching file's values (`None`: no file): the defaults or the measured ones,
    then the flags given."""
    if args.measure and not args.batching:
        parser.error("--measure sets the batching file's values: give --batching too")
    if not args.batching:
        return None
    batching = dict(DEFAULT_BATCHING)
    if args.measure:
        batching = _measured(args.models[0], args.measure_batch_sizes)
    given = {name: getattr(args, name) for name in DEFAULT_BATCHING}
    batching.update({k: v for k, v in given.items() if v is not None})
    if batching.get("allowed_batch_sizes") and (
        batching["allowed_batch_sizes"][-1] != batching["max_batch_size"]
    ):  # --max-batch-size overrode the measured one: let the server form any size
        del batching["allowed_batch_sizes"]
    return batching


def _measured(model_folder, batch_sizes):
    """The recommended batching values for `model_folder`, with its curve printed."""
    from keras_attn.errors import UserInputError
    from keras_attn.export.batching import measure_batching, recommend_batching

    try:
        curve = measure_batching(model_folder, batch_sizes)
    except (ValueError, OSError) as error:
        raise UserInputError(f"--measure {model_folder}: {error}") from None
    print(f"{model_folder}: serving_default on this machine")
    print(f"{'batch':>6} {'p50 ms':>9} {'requests/s':>11}")
    for row in curve:
        print(f"{row['batch']:>6} {row['p50_ms']:>9.2f} {row['throughput']:>11.1f}")
    return recommend_batching(curve)
