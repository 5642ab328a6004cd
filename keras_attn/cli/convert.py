"""`keras-attn convert`: a BERT-family checkpoint folder -> a Keras `.keras` BertBackbone.

Reads a Hugging Face folder (`config.json`, `vocab.txt`, `model.safetensors` or
`pytorch_model.bin`; BERT, ELECTRA, ALBERT or DistilBERT, by its `model_type`) or
an original Google TF1 folder (`bert_config.json`, `vocab.txt`, `bert_model.ckpt.*`),
and writes `OUTPUT/backbone.keras` and `OUTPUT/vocab.txt`. Checkpoint variables the
backbone does not use are listed; a missing one stops the conversion with its name.
The written file is loaded back and checked to give the same outputs before the
command reports success.
"""

import argparse
import pathlib
import shutil
import sys
import warnings

from keras_attn.cli.errors import user_errors
from keras_attn.errors import UserInputError


def build_parser(parser=None):
    parser = parser or argparse.ArgumentParser(
        prog="keras-attn convert", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "checkpoint",
        type=pathlib.Path,
        help="Hugging Face (BERT, ELECTRA, ALBERT, DistilBERT) or TF1 BERT checkpoint folder",
    )
    parser.add_argument("output", type=pathlib.Path, help="folder for backbone.keras and vocab.txt")
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


def run(args):
    import keras
    import numpy as np

    from keras_attn.models import BertBackbone

    target = args.output / "backbone.keras"
    if target.exists() and not args.overwrite:
        raise UserInputError(f"{target} exists (pass --overwrite to replace it)")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            backbone = BertBackbone.from_pretrained(args.checkpoint)
        except ImportError as error:  # e.g. torch for pytorch_model.bin
            raise UserInputError(str(error)) from None
    for warning in caught:
        print(f"warning: {warning.message}", file=sys.stderr)
    args.output.mkdir(parents=True, exist_ok=True)
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
        rng = np.random.default_rng(0)
        x = {
            "token_ids": rng.integers(0, backbone.vocabulary_size, (2, 16)).astype("int32"),
            "segment_ids": np.repeat([[0] * 8 + [1] * 8], 2, axis=0).astype("int32"),
            "padding_mask": np.array([[1] * 16, [1] * 12 + [0] * 4], "int32"),
        }
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
