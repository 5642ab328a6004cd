"""`keras-attn convert`: a Hugging Face checkpoint folder <-> a Keras `.keras` model.

Reads a Hugging Face folder (`config.json`, `vocab.txt`, `model.safetensors` or
`pytorch_model.bin`; BERT, ELECTRA, ALBERT or DistilBERT, by its `model_type`) or
an original Google TF1 folder (`bert_config.json`, `vocab.txt`, `bert_model.ckpt.*`),
and writes `OUTPUT/backbone.keras` and `OUTPUT/vocab.txt`. Checkpoint variables the
backbone does not use are listed; a missing one stops the conversion with its name.
The written file is loaded back and checked to give the same outputs before the
command reports success.

And the other way: given a `backbone.keras` (or a run folder holding one, as
`keras-attn pretrain` writes), it writes the Hugging Face layout (`config.json`,
`model.safetensors`, and `vocab.txt` + `tokenizer_config.json` when a `vocab.txt` lies
beside it) that `transformers.AutoModel.from_pretrained` loads.

GPT-2 the same way: a Hugging Face GPT-2 folder (`model_type` `gpt2`) becomes
`OUTPUT/model.keras` (a `GPTLanguageModel`) with its `vocab.json` and `merges.txt`, and
a `.keras` GPT-2 model (with those files beside it) becomes a GPT-2 folder again; and
XLNet (`model_type` `xlnet`, an `XLNetBackbone`; its SentencePiece vocabulary is not
copied); RoBERTa (`model_type` `roberta`: `backbone.keras`, a `RobertaBackbone`, with its
`vocab.json` and `merges.txt`). Which family reads a folder is the registry's word
(`model_type`), and what each family writes is its `HuggingFaceTwin`.
"""

import contextlib
import os
import pathlib
import shutil
import sys
import tempfile
import warnings

from keras_attn.cli.user_errors import CommandParser, user_errors
from keras_attn.errors import UserInputError


def build_parser(parser=None):
    parser = parser or CommandParser(prog="keras-attn convert", description=__doc__.split("\n")[0])
    parser.add_argument(
        "checkpoint",
        help="Hugging Face checkpoint folder (its config.json's model_type picks the family: "
        "bert, electra, albert, distilbert, roberta, gpt2, xlnet, ...) or one on the hub "
        "(hf://ORG/NAME[@REVISION]), or TF1 BERT folder, or a .keras file (or a folder with "
        "backbone.keras) to write as one",
    )
    parser.add_argument(
        "output",
        type=pathlib.Path,
        help="folder for the .keras file and the family's tokenizer files (BERT: backbone.keras "
        "and vocab.txt; GPT-2: model.keras, vocab.json, merges.txt), or for the Hugging Face files",
    )
    parser.add_argument(
        "--model-type",
        choices=("bert", "electra", "albert", "distilbert"),
        help="to Hugging Face: the family to write (default: ALBERT for shared layers, "
        "ELECTRA for a factorised embedding, else BERT)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace files of the same names in the output folder (the .keras file, "
        "config.json, the weights, the tokenizer's files); without it nothing there is replaced",
    )
    parser.add_argument(
        "--no-check",
        dest="check",
        action="store_false",
        help="skip reloading the written file to compare outputs",
    )
    return parser


def keras_source(path):
    """The `backbone.keras` that `path` names, or `None` for a checkpoint folder."""
    path = pathlib.Path(path)
    if path.suffix == ".keras":
        return path
    checkpoint = (path / "config.json").exists() or (path / "bert_config.json").exists()
    if path.is_dir() and (path / "backbone.keras").is_file() and not checkpoint:
        return path / "backbone.keras"
    return None


def to_hugging_face(source, args):
    """A `.keras` model -> the Hugging Face folder `args.output`, read back and checked."""
    import keras

    from keras_attn.models import pretrained, registry

    if not source.is_file():
        raise UserInputError(f"{source} does not exist")
    _refuse_existing(args, ["config.json", "model.safetensors"])
    try:
        model = keras.saving.load_model(source)
    except Exception as error:  # a damaged or foreign file: Keras raises many types
        raise UserInputError(f"{source}: cannot load ({type(error).__name__}: {error})") from None
    family = registry.family_of(model)
    if family is None or family.twin is None:
        twins = [f.backbone_cls.__name__ for f in registry.families() if f.twin is not None]
        raise UserInputError(
            f"{source} holds a {type(model).__name__}; expected a {', '.join(twins)} "
            "(`keras-attn pretrain` writes a BertBackbone as backbone.keras)"
        )
    twin, options = family.twin, {}
    if args.model_type:
        if args.model_type not in twin.model_types:
            raise UserInputError(
                f"--model-type is for BERT-family backbones; a {type(model).__name__} is "
                "written as its own model type"
            )
        options["model_type"] = args.model_type
    tokenizer = _checked_tokenizer(twin, source.parent, model)
    with _staged_output(args) as (staged, written):
        try:
            model.save_pretrained(staged, tokenizer=tokenizer, **options)
        except ValueError as error:
            raise UserInputError(f"{source}: {error}") from None
        if args.check:
            _check_same(model, pretrained.from_pretrained(staged), twin, "written checkpoint")
            print("Read back and checked: identical outputs.")
    if tokenizer is None and twin.tokenizer_files:
        print(
            f"note: no {' + '.join(twin.tokenizer_files)} beside {source}: no tokenizer written",
            file=sys.stderr,
        )
    print(f"Wrote {args.output}: {', '.join(written)}")
    print(f'Load with: transformers.{twin.auto_class}.from_pretrained("{args.output}")')
    return args.output


def from_hugging_face(args):
    """A Hugging Face (or TF1 BERT) folder -> `OUTPUT/<the family's .keras file>` and its
    vocabulary files, reloaded and checked."""
    import keras

    from keras_attn.models import registry

    model_type = registry.checkpoint_model_type(args.checkpoint) or "bert"
    family = registry.for_model_type(model_type)
    twin = family.twin
    target = args.output / twin.keras_file
    _refuse_existing(args, [twin.keras_file, *twin.tokenizer_files])
    model = _read_checkpoint(family.backbone_cls, args)
    _checked_tokenizer(twin, args.checkpoint, model)  # before anything is copied
    files = [args.checkpoint / n for n in twin.tokenizer_files if (args.checkpoint / n).is_file()]
    with _staged_output(args) as (staged, _):
        model.save(staged / twin.keras_file)
        for file in files:
            shutil.copyfile(file, staged / file.name)
        if args.check:
            again = keras.saving.load_model(staged / twin.keras_file)
            _check_same(model, again, twin, "reloaded file")
    if not files or len(files) < len(twin.tokenizer_files):  # e.g. ALBERT's, XLNet's SentencePiece
        print(
            f"note: no {' + '.join(twin.tokenizer_files) or 'vocabulary'} in {args.checkpoint}; "
            "tokenize with the checkpoint's own tokenizer (e.g. keras-hub's AlbertTokenizer "
            "for spiece.model)",
            file=sys.stderr,
        )
    print(
        f"{type(model).__name__} ({model_type}): {model.num_layers} layers, hidden "
        f"{model.hidden_dim}, {model.num_heads} heads, vocabulary {model.vocabulary_size}, "
        f"{model.count_params():,} parameters"
    )
    if args.check:
        print("Reloaded and checked: identical outputs.")
    print(f"Wrote {target}" + "".join(f" and {args.output / f.name}" for f in files))
    print(f'Load with: keras.saving.load_model("{target}")  (after `import keras_attn.models`)')
    return target


def _refuse_existing(args, names):
    """Refuses, before any work, to replace the files `names` in the output folder
    unless `--overwrite` (`_staged_output` checks every written name again)."""
    found = [name for name in names if (args.output / name).exists()]
    if found and not args.overwrite:
        shown = ", ".join(str(args.output / name) for name in found)
        raise UserInputError(f"{shown} exists (pass --overwrite to replace it)")


def _checked_tokenizer(twin, folder, model):
    """The tokenizer files in `folder`, parsed whole and checked against `model`'s
    embedding (`tokenizer_checks.read_checked`); its warnings printed as `warning:`
    lines, a refusal one `error:` line."""
    from keras_attn.models.tokenizer_checks import read_checked

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            tokenizer = read_checked(twin, folder, model)
        except ValueError as error:  # a damaged file, or a vocabulary past the embedding
            raise UserInputError(str(error)) from None
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    return tokenizer


@contextlib.contextmanager
def _staged_output(args):
    """Yields `(staging folder, names)`: a hidden folder inside the output folder, and
    the list that gets the names moved out of it. When the block ends without an error,
    every file written there is moved into the output folder, after refusing (before
    moving any) to replace a file there unless `--overwrite`. A failed or interrupted
    conversion leaves the output folder's files as they were."""
    args.output.mkdir(parents=True, exist_ok=True)
    staged, written = pathlib.Path(tempfile.mkdtemp(prefix=".convert-", dir=args.output)), []
    try:
        yield staged, written
        names = sorted(p.name for p in staged.iterdir())
        _refuse_existing(args, names)
        for name in names:
            os.replace(staged / name, args.output / name)
        written.extend(names)
    finally:
        shutil.rmtree(staged, ignore_errors=True)


def _check_same(model, again, twin, what):
    """A RuntimeError unless `model` and `again` give identical outputs on the probe."""
    import keras
    import numpy as np

    x = twin.probe(model)
    expected, got = model(x), again(x)
    if not isinstance(expected, dict):
        expected, got = {"output": expected}, {"output": got}
    difference = max(
        float(
            np.max(
                np.abs(keras.ops.convert_to_numpy(expected[k]) - keras.ops.convert_to_numpy(got[k]))
            )
        )
        for k in expected
    )
    if difference > 0.0:
        raise RuntimeError(f"the {what} differs (max abs {difference:g})")


def _read_checkpoint(cls, args):
    """`cls.from_pretrained(args.checkpoint)`, its warnings printed."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = cls.from_pretrained(args.checkpoint)
        except ImportError as error:  # e.g. torch for pytorch_model.bin
            raise UserInputError(str(error)) from None
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    return model


def run(args):
    from keras_attn.checkpoints import hub_handles

    if hub_handles.is_handle(args.checkpoint):  # fetched into the hub's cache, checked
        args.checkpoint = hub_handles.resolve(args.checkpoint).path
    args.checkpoint = pathlib.Path(args.checkpoint)
    if args.output.exists() and not args.output.is_dir():
        raise UserInputError(
            f"output {args.output} is a file; expected a folder (the converted files go in it)"
        )
    source = keras_source(args.checkpoint)
    if source is not None:
        return to_hugging_face(source, args)
    if args.model_type:
        raise UserInputError("--model-type is for writing Hugging Face files from a .keras file")
    return from_hugging_face(args)


@user_errors
def main(argv=None):
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    main()
