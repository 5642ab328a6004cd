"""`keras-attn convert`: a BERT-family or GPT-2 checkpoint folder <-> a Keras `.keras` model.

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
a `.keras` GPT-2 model (with those files beside it) becomes a GPT-2 folder again.
"""

import argparse
import pathlib
import shutil
import sys
import warnings

from keras_attn.cli.user_errors import user_errors
from keras_attn.errors import UserInputError


def build_parser(parser=None):
    parser = parser or argparse.ArgumentParser(
        prog="keras-attn convert", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "checkpoint",
        type=pathlib.Path,
        help="Hugging Face (BERT, ELECTRA, ALBERT, DistilBERT, GPT-2) or TF1 BERT checkpoint "
        "folder, or a .keras file (or a folder with backbone.keras) to write as one",
    )
    parser.add_argument(
        "output",
        type=pathlib.Path,
        help="folder for backbone.keras and vocab.txt (GPT-2: model.keras, vocab.json, "
        "merges.txt), or for the Hugging Face files",
    )
    parser.add_argument(
        "--model-type",
        choices=("bert", "electra", "albert", "distilbert"),
        help="to Hugging Face: the family to write (default: ALBERT for shared layers, "
        "ELECTRA for a factorised embedding, else BERT)",
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="replace an existing backbone.keras"
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
    """`backbone.keras` -> the Hugging Face folder `args.output`, read back and checked."""
    import keras
    import numpy as np

    from keras_attn.models import BertBackbone

    if not source.is_file():
        raise UserInputError(f"{source} does not exist")
    if (args.output / "model.safetensors").exists() and not args.overwrite:
        raise UserInputError(
            f"{args.output / 'model.safetensors'} exists (pass --overwrite to replace it)"
        )
    try:
        backbone = keras.saving.load_model(source)
    except Exception as error:  # a damaged or foreign file: Keras raises many types
        raise UserInputError(f"{source}: cannot load ({type(error).__name__}: {error})") from None
    from keras_attn.models import GPTLanguageModel

    if isinstance(backbone, GPTLanguageModel):
        return gpt2_to_hugging_face(backbone, source, args)
    if not isinstance(backbone, BertBackbone):
        raise UserInputError(
            f"{source} holds a {type(backbone).__name__}; expected a BertBackbone "
            "(`keras-attn pretrain` writes one as backbone.keras) or a GPT-2 GPTLanguageModel"
        )
    tokenizer = None
    if (source.parent / "vocab.txt").exists():
        from keras_attn.data import WordPieceTokenizer

        tokenizer = WordPieceTokenizer(source.parent / "vocab.txt")
    try:
        backbone.save_pretrained(args.output, model_type=args.model_type, tokenizer=tokenizer)
    except ValueError as error:
        raise UserInputError(f"{source}: {error}") from None
    if args.check:
        again = BertBackbone.from_pretrained(args.output)
        x = _probe_inputs(backbone)
        expected, got = backbone(x)["sequence_output"], again(x)["sequence_output"]
        difference = float(np.max(np.abs(np.asarray(expected) - np.asarray(got))))
        if difference > 0.0:
            raise RuntimeError(f"the written checkpoint differs (max abs {difference:g})")
        print("Read back and checked: identical outputs.")
    written = sorted(p.name for p in args.output.iterdir())
    print(f"Wrote {args.output}: {', '.join(written)}")
    print(f'Load with: transformers.AutoModel.from_pretrained("{args.output}")')
    return args.output


def _gpt2_files(folder):
    return [folder / name for name in ("vocab.json", "merges.txt") if (folder / name).is_file()]


def _same_logits(model, again, what):
    import numpy as np

    ids = np.random.default_rng(0).integers(0, model.vocabulary_size, (2, 8)).astype("int32")
    difference = float(np.max(np.abs(np.asarray(model(ids)) - np.asarray(again(ids)))))
    if difference > 0.0:
        raise RuntimeError(f"the {what} differs (max abs {difference:g})")


def gpt2_to_hugging_face(model, source, args):
    """A GPT-2 `GPTLanguageModel` -> a Hugging Face GPT-2 folder, read back and checked."""
    from keras_attn.models import GPTLanguageModel

    if args.model_type:
        raise UserInputError("--model-type is for BERT-family backbones; GPT-2 is GPT-2")
    tokenizer = None
    if len(_gpt2_files(source.parent)) == 2:
        from keras_attn.data import gpt2_tokenizer

        tokenizer = gpt2_tokenizer(source.parent)
    try:
        model.save_pretrained(args.output, tokenizer=tokenizer)
    except ValueError as error:
        raise UserInputError(f"{source}: {error}") from None
    if args.check:
        _same_logits(model, GPTLanguageModel.from_pretrained(args.output), "written checkpoint")
        print("Read back and checked: identical outputs.")
    if tokenizer is None:
        print(
            f"note: no vocab.json + merges.txt beside {source}: no tokenizer written",
            file=sys.stderr,
        )
    written = sorted(p.name for p in args.output.iterdir())
    print(f"Wrote {args.output}: {', '.join(written)}")
    print(f'Load with: transformers.AutoModelForCausalLM.from_pretrained("{args.output}")')
    return args.output


def gpt2_from_hugging_face(args):
    """A Hugging Face GPT-2 folder -> `OUTPUT/model.keras` and its vocabulary files."""
    import keras

    from keras_attn.models import GPTLanguageModel

    target = args.output / "model.keras"
    model = _read_checkpoint(GPTLanguageModel, target, args)
    model.save(target)
    files = _gpt2_files(args.checkpoint)
    for file in files:
        shutil.copyfile(file, args.output / file.name)
    print(
        f"GPTLanguageModel (GPT-2): {model.num_layers} layers, hidden {model.hidden_dim}, "
        f"{model.num_heads} heads, vocabulary {model.vocabulary_size}, "
        f"{model.count_params():,} parameters"
    )
    if args.check:
        _same_logits(model, keras.saving.load_model(target), "reloaded file")
        print("Reloaded and checked: identical outputs.")
    print(f"Wrote {target}" + "".join(f" and {args.output / f.name}" for f in files))
    print("Tokenize with: keras_attn.data.gpt2_tokenizer(folder)")
    return target


def _read_checkpoint(cls, target, args):
    """`cls.from_pretrained(args.checkpoint)`, its warnings printed, once `target` is
    known to be writable (and its folder made)."""
    if target.exists() and not args.overwrite:
        raise UserInputError(f"{target} exists (pass --overwrite to replace it)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            model = cls.from_pretrained(args.checkpoint)
        except ImportError as error:  # e.g. torch for pytorch_model.bin
            raise UserInputError(str(error)) from None
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    args.output.mkdir(parents=True, exist_ok=True)
    return model


def _model_type(folder):
    import json

    try:
        return json.loads((folder / "config.json").read_text(encoding="utf-8")).get("model_type")
    except (OSError, ValueError, AttributeError):
        return None  # the checkpoint reader names what is wrong with the file


def _probe_inputs(backbone):
    import numpy as np

    rng, half = np.random.default_rng(0), min(8, backbone.max_sequence_length // 2)
    return {
        "token_ids": rng.integers(0, backbone.vocabulary_size, (2, 2 * half)).astype("int32"),
        "segment_ids": np.repeat([[0] * half + [1] * half], 2, axis=0).astype("int32"),
        "padding_mask": np.array([[1] * 2 * half, [1] * half + [0] * half], "int32"),
    }


def run(args):
    source = keras_source(args.checkpoint)
    if source is not None:
        return to_hugging_face(source, args)
    if args.model_type:
        raise UserInputError("--model-type is for writing Hugging Face files from a .keras file")
    if _model_type(args.checkpoint) == "gpt2":
        return gpt2_from_hugging_face(args)
    import keras
    import numpy as np

    from keras_attn.models import BertBackbone

    target = args.output / "backbone.keras"
    backbone = _read_checkpoint(BertBackbone, target, args)
    backbone.save(target)
    vocabulary = args.checkpoint / "vocab.txt"
    if vocabulary.exists():
        shutil.copyfile(vocabulary, args.output / "vocab.txt")
    else:  # ALBERT ships a SentencePiece model, which WordPieceTokenizer cannot read
        print(
            f"note: no vocab.txt in {args.checkpoint}; tokenize with the checkpoint's own "
            "tokenizer (e.g. keras-hub's AlbertTokenizer for spiece.model)",
            file=sys.stderr,
        )
    print(
        f"BertBackbone: {backbone.num_layers} layers, hidden {backbone.hidden_dim}, "
        f"{backbone.num_heads} heads, vocabulary {backbone.vocabulary_size}, "
        f"{backbone.count_params():,} parameters"
    )
    if args.check:
        restored = keras.saving.load_model(target)
        x = _probe_inputs(backbone)
        expected, got = backbone(x), restored(x)
        difference = max(
            float(np.max(np.abs(np.asarray(expected[k]) - np.asarray(got[k])))) for k in expected
        )
        if difference > 0.0:
            raise RuntimeError(
                f"the reloaded file differs from the checkpoint (max abs {difference:g})"
            )
        print("Reloaded and checked: identical outputs.")
    print(f"Wrote {target}" + (f" and {args.output / 'vocab.txt'}" if vocabulary.exists() else ""))
    print(f'Load with: keras.saving.load_model("{target}")  (after `import keras_attn.models`)')
    return target


@user_errors
def main(argv=None):
    return run(build_parser().parse_args(argv))


if __name__ == "__main__":
    main()
