"""`keras-attn export RUN`: a trained run -> `saved_models/<name>/<version>/` for TF Serving.

Reads what `keras-attn finetune` / `pretrain` / `lm` / `seq2seq` wrote into RUN
(`model.keras` or `backbone.keras`, the vocabularies, `labels.json`, `config.yaml`)
and writes a SavedModel whose `serving_default` signature takes raw text (the
tokenizer runs in the graph; language models and seq2seq decode in the graph, greedy
or beam search) and whose `serve_token_ids` takes token ids (classifiers also get TF
Serving's `classify`), with warm-up records; the export is then checked as TF
Serving's loader would (signatures, ops, warm-up replay). The version is the next
free integer unless `--version` is given; it is written beside the versions under a
name TF Serving ignores, checked, then renamed to its number, so the server never
sees a partial version and two exports started together get different numbers.
`--format onnx|openvino|litert` writes one file (with its checksum) the same way under
`<base>/<name>/<format>/<version>/`, a folder TF Serving does not read as a version.
"""

import json
import pathlib
import re
import zipfile

import yaml

from keras_attn.cli.user_errors import (
    CommandParser,
    add_sampling_filters,
    at_least,
    user_errors,
)
from keras_attn.errors import UserInputError
from keras_attn.export_formats import EXPORT_FORMATS, export_format

# keras_attn.export.quantization's (which imports Keras; a test keeps the two equal).
QUANTIZE = ("int8", "int8-portable", "int8-weights")
PRECISIONS = ("float32", "bfloat16")
# keras_attn.models.generation_config's (which imports Keras; a test keeps the two equal).
MAX_BEAMS = 64
# A model name is one folder name (at most 255 bytes here) and TF Serving's model name.
MAX_NAME_LENGTH = 128


def build_parser():
    parser = CommandParser(prog="keras-attn export", description=__doc__.split("\n")[0])
    parser.add_argument(
        "run", type=pathlib.Path, help="a run folder of `keras-attn finetune` or `pretrain`"
    )
    parser.add_argument("--name", help="model name under --base (default: the run folder's name)")
    parser.add_argument(
        "--base",
        type=pathlib.Path,
        default=pathlib.Path("saved_models"),
        help="TF Serving's model base folder (default: %(default)s)",
    )
    parser.add_argument(
        "--version", type=at_least(1), help="version number (default: the next free one)"
    )
    parser.add_argument(
        "--max-length",
        type=at_least(1),
        help="lm / seq2seq: length of the generated rows (default: the run's max_length or "
        "the model's positions; Transformer-XL: its segment + memory length)",
    )
    parser.add_argument(
        "--strategy",
        choices=("greedy", "beam", "sample"),
        default="greedy",
        help="lm / seq2seq: decoding in the graph (default: %(default)s); sample: drawn "
        "with --temperature, --top-k, --top-p, --min-p, seeded by --seed (none: each "
        "request draws its own)",
    )
    parser.add_argument(
        "--temperature",
        type=at_least(0.01, float, at_most=100.0),
        help="sampling's temperature (default: 1)",
    )
    parser.add_argument(
        "--seed",
        type=at_least(0, at_most=2**31 - 1),
        help="sampling's seed: the same request, the same reply",
    )
    add_sampling_filters(
        parser, "greedy / sample: CTRL's penalty on the tokens so far (default: %(default)s)"
    )
    parser.add_argument(
        "--num-beams",
        type=at_least(1, at_most=MAX_BEAMS),
        default=4,
        help="beam search's beams (default: %(default)s)",
    )
    parser.add_argument(
        "--stop",
        action="append",
        metavar="STRING",
        dest="stop_strings",
        type=_stop_string,
        help="lm: each served reply ends right after the first of these strings it holds, "
        "as generate(stop_strings=...) ends it (repeatable, up to 16)",
    )
    parser.add_argument(
        "--quantize",
        choices=QUANTIZE,
        help="serve int8 weights in the dense, attention and embedding layers (outputs stay "
        "float32; about a quarter of the weights' size). SavedModel: int8 multiplies on "
        "oneDNN's int8 products where this TensorFlow runs them (the server's TensorFlow "
        "needs oneDNN's kernels, as x86 builds have them), int8-portable as Keras's int8 "
        "layers (any server; slower than float), "
        "int8-weights int8 weights with float inputs (a language model's decoding); "
        "--format onnx: ONNX Runtime's dynamic int8; litert: LiteRT's dynamic-range int8",
    )
    parser.add_argument(
        "--precision",
        choices=PRECISIONS,
        help="SavedModel: serve the weights and products in this precision (outputs stay "
        "float32). bfloat16: half the weights' size, faster at large batches on CPUs with "
        "AVX-512 BF16 or AMX, slower elsewhere; float32: a mixed-precision run served in "
        "float32 (default: the run's own precision)",
    )
    parser.add_argument(
        "--format",
        choices=tuple(EXPORT_FORMATS),
        default="saved_model",
        help="saved_model (TF Serving; every model), onnx (ONNX Runtime), openvino "
        "(model.xml + .bin) or litert (model.tflite): one model that takes raw text, the "
        "tokenizer inside, written to BASE/NAME/FORMAT/VERSION/ with a checksum (outside "
        "TF Serving's versions); classifiers and sentence embeddings, and span QA and "
        "taggers in litert; "
        "docs/deployment.md says what each holds (default: %(default)s)",
    )
    parser.add_argument(
        "--length-penalty",
        type=float,
        default=0.0,
        help="beam search's GNMT alpha (default: %(default)s; the Transformer paper: 0.6)",
    )
    return parser


def _stop_string(text):
    """`--stop`'s value, checked as `GenerationConfig` checks each of `stop_strings`."""
    import argparse

    from keras_attn.models.stop_strings import check_stop_strings

    try:
        return check_stop_strings(text)[0]
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def export_run(
    run,
    name=None,
    base="saved_models",
    version=None,
    max_length=None,
    strategy="greedy",
    num_beams=4,
    length_penalty=0.0,
    quantize=None,
    format="saved_model",
    precision=None,
    stop_strings=None,
    sampling=None,
):
    """Exports the run folder `run` (with int8 weights if `quantize="int8"`, in
    bfloat16 if `precision="bfloat16"`; a language model's replies ended at
    `stop_strings`, drawn with `sampling`'s `GenerationConfig` fields where
    `strategy="sample"`) as a SavedModel, or (`format="onnx"` /
    `"openvino"` / `"litert"`) a classifier or a backbone's sentence embeddings
    (LiteRT: a span-QA model or tagger too) as `model.onnx` / `model.xml` /
    `model.tflite` in the version folder; returns the version folder (the file)
    written."""

    import keras_attn.models  # noqa: F401  (registers our classes for loading)
    from keras_attn.data import WordPieceTokenizer
    from keras_attn.export import export_saved_model
    from keras_attn.export.signatures.signature_kinds import export_options
    from keras_attn.models import registry

    run = pathlib.Path(run)
    config_file = run / "config.yaml"
    if not config_file.is_file():
        raise UserInputError(f"{run} is not a finished run folder (config.yaml expected)")
    if (run / "teacher_config.yaml").is_file():  # a `keras-attn distill` run: serves as
        config_file = run / "teacher_config.yaml"  # its teacher did (tokenizer, task)
    config = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    model_config, data_config = config.get("model", {}), config.get("data", {})
    name = name or run.name
    _check_precision(precision, format, quantize)
    target_dir = _target(pathlib.Path(base), name, version, format)
    task = data_config.get("task", "classification")
    lowercase = model_config.get("lowercase", True)
    found, model = _load_model(run)
    declared = export_options(model)
    if declared is None:
        from keras_attn.models import registry

        family = registry.family_of(model)  # no heads (ELMo's biLM): it serves as features
        features = "" if family is None or family.heads else " --feature-based scalar-mix"
        raise UserInputError(
            f"{found} holds a {type(model).__name__}, which has no serving signatures; "
            f"export a model fine-tuned from it (keras-attn finetune --backbone {run}{features})"
        )
    generation = _generation(
        declared,
        f"{found} holds a {type(model).__name__}",
        strategy=strategy,
        num_beams=num_beams,
        length_penalty=length_penalty,
        max_length=max_length,
        stop_strings=stop_strings,
        **(sampling or {}),
    )
    options = {}
    if "target_tokenizer" in declared:  # an encoder-decoder: a vocabulary per side
        lowercase = data_config.get("lowercase", False)
        tokenizer, target = (
            WordPieceTokenizer(
                run / f"{side}_vocab.txt",
                lowercase=lowercase,
                sequence_length=model.max_sequence_length,
            )
            for side in ("source", "target")
        )
        options = {
            "target_tokenizer": target,
            "generation": generation.replace(
                max_length=max_length or model_config.get("max_length")
            ),
        }
    else:
        files = registry.tokenizer_files(model).in_folder(run)  # vocab.txt, or the family's
        if files.missing(run):
            raise UserInputError(f"{run} has no {', '.join(files.missing(run))}")
        if "generation" in declared:
            options["generation"] = generation
        if "labels" in declared and (run / "labels.json").is_file():
            options["labels"] = json.loads((run / "labels.json").read_text(encoding="utf-8"))
        if "entities" in declared:  # ERNIE's typing (a text-only model reads none)
            options["entities"] = run / "entities.txt"
        if "marker" in declared and model_config.get("marker"):
            options["marker"] = str(model_config["marker"])
        if "text_pair" in declared:
            options["text_pair"] = task == "classification" and bool(
                data_config.get("text_pair_column")
            )
        try:
            length = int(model_config.get("sequence_length", 128))
            tokenizer = files.load_checked(run, model, length, lowercase)
        except (OSError, ValueError) as error:  # a damaged vocabulary or model file
            raise UserInputError(f"{run}: cannot read its tokenizer: {error}") from None
    if export_format(format).suffix:
        return _export_file(format, model, tokenizer, options, base, name, version, quantize)
    # Checked as TF Serving checks (signatures, ops, warm-up replay) before it is published.
    try:
        return export_saved_model(
            model,
            tokenizer,
            target_dir,
            check=True,
            quantize=quantize,
            precision=precision,
            **options,
        )
    except ValueError as error:  # what the run folder holds does not fit (entities.txt)
        raise UserInputError(f"cannot export {run}: {error}") from None


def _generation(declared, holds, **settings):
    """The flags' `GenerationConfig`, or a `UserInputError`; `--stop` only where the model
    generates (`holds`: what the run folder holds, for the message)."""
    from keras_attn.models import GenerationConfig

    try:
        generation = GenerationConfig(**settings)
    except (TypeError, ValueError) as error:
        raise UserInputError(str(error)) from None
    if generation.stop_strings and "generation" not in declared:
        raise UserInputError(f"--stop ends a language model's replies; {holds}, which makes none")
    return generation


def _sampling(args):
    """The sampling flags' `GenerationConfig` fields; refused (a `UserInputError`) without
    `--strategy sample`."""
    drawn = {"temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p}
    drawn.update(min_p=args.min_p, seed=args.seed)
    given = [f"--{k.replace('_', '-')}" for k, v in drawn.items() if v is not None]
    if given and args.strategy != "sample":
        raise UserInputError(f"{', '.join(given)} sample: give --strategy sample")
    fields = {k: v for k, v in drawn.items() if v is not None}
    if args.repetition_penalty != 1.0:
        fields["repetition_penalty"] = args.repetition_penalty
    return fields


def _check_precision(precision, format, quantize):
    """`--precision` only with a SavedModel in float (the library refuses the rest too,
    but after the model is loaded)."""
    one_file = export_format(format).suffix
    if precision is not None and (one_file or quantize is not None):
        other = f"--format {format}" if one_file else f"--quantize {quantize}"
        raise UserInputError(f"--precision is for float SavedModels; not with {other}")


def _target(base, name, version, format):
    """The export's folder: `base/name[/format][/version]`, after the checks of each part
    (a valid TF Serving model name, a version of 1 or more that is free, no file where a
    folder must be)."""
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", name) or name in (".", "..") or name.isdigit():
        raise UserInputError(
            f"--name {name!r}: expected letters, digits, '_', '.', '-', not a number alone "
            "(TF Serving reads number folders as versions)"
        )
    if len(name) > MAX_NAME_LENGTH:
        raise UserInputError(
            f"--name: expected at most {MAX_NAME_LENGTH} characters. Received "
            f"{len(name)}: {name[:40]}..."
        )
    if version is not None and version < 1:
        raise UserInputError(f"--version {version}: expected 1 or more")
    model_dir = pathlib.Path(base) / name / (format if export_format(format).suffix else "")
    _check_folder(pathlib.Path(base), pathlib.Path(base) / name, model_dir)
    target_dir = model_dir / (str(version) if version else "")
    if version and target_dir.exists():
        raise UserInputError(
            f"{target_dir} exists; give another --version or leave it out (the next free one)"
        )
    return target_dir


def _export_file(format, model, tokenizer, options, base, name, version, quantize):
    """`--format onnx|openvino|litert`: the model and its tokenizer as
    `<base>/<name>/<format>/<version>/model.onnx` (int8: ONNX Runtime's dynamic
    quantization), `.../model.xml` or `.../model.tflite` (int8: dynamic range), with
    its checksum. The format's own folder keeps it out of TF Serving's versions (the
    server loads only the integer folders of `<base>/<name>`); its version is claimed as
    a SavedModel's is (staged, then renamed), so racing exports each get their own."""
    from keras_attn.export import export_model
    from keras_attn.export.versions import publish, staging_folder

    model_dir = pathlib.Path(base) / name / format
    file_name = export_format(format).file_name
    with staging_folder(model_dir) as staged:
        try:
            export_model(
                model,
                tokenizer,
                staged / file_name,
                format=format,
                labels=options.get("labels"),
                quantize=quantize,
                text_pair=bool(options.get("text_pair")),
            )
        except ValueError as error:
            raise UserInputError(f"--format {format}: {error}") from None
        return publish(staged, model_dir, version) / file_name


def _check_folder(*folders):
    """Each of `folders` is a folder or can be made one: a file in the way is named."""
    for folder in folders:
        if folder.exists() and not folder.is_dir():
            raise UserInputError(
                f"{folder} is a file, where the export needs a folder: give another "
                "--base or --name"
            )


def _load_model(run):
    """`(file, model)`: the run folder's `backbone.keras` (a pre-training run exports
    sentence embeddings) or `model.keras`, loaded; a missing or damaged file is named."""
    import keras

    files = [run / name for name in ("backbone.keras", "model.keras") if (run / name).is_file()]
    if not files:  # backbone.keras first: a pre-training run exports sentence embeddings
        raise UserInputError(f"{run} holds no trained model (model.keras or backbone.keras)")
    try:
        model = keras.saving.load_model(files[0], compile=False)
    except Exception as error:  # Keras raises what its zip/JSON/HDF5 readers raise
        if not zipfile.is_zipfile(files[0]):  # Keras says "File not found" for these
            raise UserInputError(
                f"{files[0]} is not a .keras archive (truncated or damaged); export another "
                "run, or train this one again"
            ) from None
        raise UserInputError(
            f"{files[0]} cannot be loaded: {type(error).__name__}: {error}"
        ) from None
    return files[0], model


@user_errors
def main(argv=None):
    args = build_parser().parse_args(argv)
    from keras_attn.export.checks import _read
    from keras_attn.export.model_server_config import serving_image

    path = export_run(
        args.run,
        args.name,
        args.base,
        args.version,
        args.max_length,
        args.strategy,
        args.num_beams,
        args.length_penalty,
        args.quantize,
        args.format,
        args.precision,
        args.stop_strings,
        _sampling(args),
    )
    record = export_format(args.format)
    if record.suffix:
        runtime = record.packages
        from keras_attn.cli.predict_file import serving_default

        _, inputs, _ = serving_default(path)  # --text; span QA: --question, --context
        flags = _try_flags(inputs)
        print(
            f"Exported {args.run} -> {path} (checksum: {path.name}.sha256)\n"
            f"Run it:   with {runtime} (docs/deployment.md)\n"
            f"Try it:   keras-attn predict {path} {flags}"
        )
        return path
    flags = _try_flags(_read(path).signature_def["serving_default"].inputs)
    print(
        f"Exported {args.run} -> {path}\n"
        "Serve it: docker run -p 8500:8500 -p 8501:8501 -v "
        f"{path.parent.resolve()}:/models/{path.parent.name} "
        f"-e MODEL_NAME={path.parent.name} {serving_image()}\n"
        f"Try it:   keras-attn predict {path} {flags}"
    )
    return path


def _try_flags(inputs):
    """The hint's flags, one per input of `serving_default`: the text (or question)
    first; a number (entity typing's mention span) as N."""
    from keras_attn.cli.predict_file import INPUT_COLUMNS, INTEGER_INPUTS

    first = sorted(inputs, key=lambda name: (INPUT_COLUMNS + (name,)).index(name))
    return " ".join(
        f"--{name.replace('_', '-')} " + ("N" if name in INTEGER_INPUTS else '"..."')
        for name in first
    )
