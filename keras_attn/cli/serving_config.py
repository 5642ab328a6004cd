"""`keras-attn serving-config MODEL_DIR...`: TF Serving's `models.config` (and batching file).

Writes a text-format `ModelServerConfig` serving each exported model folder
(`saved_models/<name>`) with a version policy and version labels, for
`tensorflow_model_server --model_config_file=...`; with `--batching`, also a
`batching.config` (`BatchingParameters`) for `--enable_batching
--batching_parameters_file=...`. Paths are written as the server will see them:
`--base-path /models` for the `tensorflow/serving` container with
`-v $PWD/saved_models:/models`.
"""

import argparse
import pathlib

from keras_attn.cli.errors import user_errors


def build_parser():
    parser = argparse.ArgumentParser(
        prog="keras-attn serving-config", description=__doc__.split("\n")[0]
    )
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
        "--max-batch-size", type=int, default=32, help="batching: largest batch (default: 32)"
    )
    parser.add_argument(
        "--batch-timeout-micros",
        type=int,
        default=2000,
        help="batching: wait for a batch to fill, in microseconds (default: 2000)",
    )
    parser.add_argument(
        "--num-batch-threads", type=int, default=4, help="batching: threads (default: 4)"
    )
    parser.add_argument(
        "--max-enqueued-batches", type=int, default=100, help="batching: queue (default: 100)"
    )
    return parser


@user_errors
def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    from keras_attn.export.serving_config import write_serving_config

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
    models = [
        {
            "path": folder,
            "versions": policies.get(folder.name, "latest"),
            "labels": labels[folder.name],
        }
        for folder in args.models
    ]
    batching = None
    if args.batching:
        batching = {
            "max_batch_size": args.max_batch_size,
            "batch_timeout_micros": args.batch_timeout_micros,
            "num_batch_threads": args.num_batch_threads,
            "max_enqueued_batches": args.max_enqueued_batches,
        }
    try:
        files = write_serving_config(
            models, args.output, base_path=args.base_path, batching=batching
        )
    except (ValueError, TypeError) as error:
        parser.error(str(error))
    for file in files:
        print(f"wrote {file}")
    config = files[0].resolve()
    flags = f"--model_config_file={config}"
    if batching:
        flags += f" --enable_batching --batching_parameters_file={config.parent / files[1].name}"
    if args.base_path:
        parent = args.models[0].resolve().parent
        flags = flags.replace(str(config.parent), "/config")
        print(
            f"Serve them: docker run -p 8500:8500 -p 8501:8501 -v {parent}:{args.base_path} "
            f"-v {config.parent}:/config tensorflow/serving {flags}"
        )
    else:
        print(f"Serve them: tensorflow_model_server --port=8500 --rest_api_port=8501 {flags}")
    return files
