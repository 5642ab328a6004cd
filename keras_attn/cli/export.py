"""`keras-attn export RUN`: a trained run's model -> `saved_models/<name>/<version>/` for TF Serving.

Reads what `keras-attn finetune` / `pretrain` wrote into RUN (`model.keras` or
`backbone.keras`, `vocab.txt`, `labels.json`, `config.yaml`) and writes a
SavedModel whose `serving_default` signature takes raw text (the tokenizer runs
in the graph) and whose `serve_token_ids` takes token ids. The version is the next
free integer unless `--version` is given.
"""

import argparse
import json
import pathlib

import yaml


def build_parser():
    parser = argparse.ArgumentParser(prog="keras-attn export", description=__doc__.split("\n")[0])
    parser.add_argument("run", type=pathlib.Path, help="a run folder of `keras-attn finetune` or `pretrain`")
    parser.add_argument("--name", help="model name under --base (default: the run folder's name)")
    parser.add_argument("--base", type=pathlib.Path, default=pathlib.Path("saved_models"),
                        help="TF Serving's model base folder (default: %(default)s)")
    parser.add_argument("--version", type=int, help="version number (default: the next free one)")
    return parser


def export_run(run, name=None, base="saved_models", version=None):
    """Exports the run folder `run`; returns the version folder written."""
    import keras

    import keras_attn  # noqa: F401  (registers our classes for loading)
    from keras_attn.data import WordPieceTokenizer
    from keras_attn.export import export_saved_model, next_version_dir

    run = pathlib.Path(run)
    config_file = run / "config.yaml"
    if not config_file.is_file() or not (run / "vocab.txt").is_file():
        raise SystemExit(f"error: {run} is not a finished run folder (config.yaml and vocab.txt expected)")
    config = yaml.safe_load(config_file.read_text())
    model_config, data_config = config.get("model", {}), config.get("data", {})
    name = name or run.name
    target = pathlib.Path(base) / name / str(version) if version else next_version_dir(base, name)
    task = data_config.get("task", "classification")
    if task != "classification":
        raise SystemExit(f"error: {run} is a {task} run; only classifiers and pre-trained backbones export "
                         "for now (tagging and span QA signatures are still to come)")
    if (run / "labels.json").is_file():  # a classifier
        model = keras.saving.load_model(run / "model.keras")
        labels = json.loads((run / "labels.json").read_text())
        lowercase = model_config.get("lowercase", True)
        text_pair = bool(data_config.get("text_pair_column"))
    elif (run / "backbone.keras").is_file():  # a pre-training run: sentence embeddings
        model = keras.saving.load_model(run / "backbone.keras")
        labels, lowercase, text_pair = None, True, False
    else:
        raise SystemExit(f"error: {run} holds neither a classifier (labels.json) nor a backbone "
                         "(backbone.keras); language models and seq2seq export are not supported yet")
    tokenizer = WordPieceTokenizer(run / "vocab.txt", lowercase=lowercase,
                                   sequence_length=int(model_config.get("sequence_length", 128)))
    return export_saved_model(model, tokenizer, target, labels=labels, text_pair=text_pair)


def main(argv=None):
    args = build_parser().parse_args(argv)
    path = export_run(args.run, args.name, args.base, args.version)
    print(f"Exported {args.run} -> {path}\n"
          f"Serve it: docker run -p 8501:8501 -v {path.parent.resolve()}:/models/{path.parent.name} "
          f"-e MODEL_NAME={path.parent.name} tensorflow/serving:2.21.0\n"
          f"Try it:   keras-attn predict {path} --text \"...\"")
    return path
