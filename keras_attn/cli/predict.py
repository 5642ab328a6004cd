"""`keras-attn predict SAVED_MODEL --text ...`: run an exported model on raw text.

Loads the SavedModel with TensorFlow alone (as TF Serving would) and calls its
`serving_default` signature, or runs a one-file export on its runtime. SAVED_MODEL is a
version folder, a model folder (its highest version, as TF Serving picks it), a
format folder (`saved_models/<name>/onnx`: its highest version) or the file; the
export read is named on stderr. With `--input FILE --output FILE` it predicts a
whole CSV/TSV/JSONL file in batches, one output row per input row
(`keras_attn.cli.predict_file`).
"""

import json
import pathlib

from keras_attn.cli.command_line_text import as_bytes, classified, shown
from keras_attn.cli.predict_file import INPUT_COLUMNS, INTEGER_INPUTS, predict_file, summary_text
from keras_attn.cli.user_errors import CommandParser, at_least, user_errors
from keras_attn.errors import UserInputError


def build_parser():
    parser = CommandParser(prog="keras-attn predict", description=__doc__.split("\n")[0])
    parser.add_argument(
        "saved_model",
        type=pathlib.Path,
        help="saved_models/<name>[/<version>], saved_models/<name>/<format>[/<version>], or "
        "an exported model.onnx / .xml / .tflite",
    )
    parser.add_argument("--text", action="append", help="a text (repeat for a batch)")
    parser.add_argument(
        "--text-pair", action="append", help="the second text of each pair, for pair models"
    )
    parser.add_argument(
        "--question", action="append", help="span QA: a question (repeat; one --context each)"
    )
    parser.add_argument("--context", action="append", help="span QA / multiple choice: the context")
    parser.add_argument(
        "--choices",
        action="append",
        help="multiple choice: the choices of a context, '|'-separated",
    )
    parser.add_argument(
        "--prompt", action="append", help="language model: a prompt to continue (repeat)"
    )
    parser.add_argument(
        "--source", action="append", help="seq2seq: a source sentence to translate (repeat)"
    )
    parser.add_argument(
        "--mention-start",
        action="append",
        type=at_least(0, at_most=2**31 - 1),  # an int32 input
        help="entity typing: the first character of the mention in each --text (from 0)",
    )
    parser.add_argument(
        "--mention-end",
        action="append",
        type=at_least(0, at_most=2**31 - 1),  # an int32 input
        help="entity typing: the character just past the mention in each --text",
    )
    parser.add_argument("--json", action="store_true", help="print the outputs as JSON")
    batch = parser.add_argument_group("batch prediction of a file")
    batch.add_argument(
        "--input", type=pathlib.Path, help="a CSV, TSV or JSONL file (.bz2/.gz/.xz too)"
    )
    batch.add_argument(
        "--output", type=pathlib.Path, help="predictions.csv / .tsv / .jsonl, one row per input row"
    )
    batch.add_argument(
        "--format", choices=("csv", "tsv", "jsonl"), help="the input's (default: from its name)"
    )
    batch.add_argument("--batch-size", type=int, default=64, help="rows per call (default: 64)")
    for name in INPUT_COLUMNS:
        batch.add_argument(
            f"--{name.replace('_', '-')}-column",
            metavar="COLUMN",
            help=f"the column holding `{name}` (default: {name})",
        )
    batch.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def predict(saved_model, texts=None, text_pairs=None, announce=False, **inputs):
    """`{output name: numpy array}` of `serving_default` on `texts` (and `text_pairs`),
    or on the signature's own inputs by name (`question=`, `context=`, `choices=`).

    Texts may hold bytes that are not UTF-8 (a shell passes them on as they are);
    they reach the graph as bytes, which cleans them to U+FFFD as it does for a
    served request. An input the model does not take is refused, never ignored. A
    `.onnx` file (`keras-attn export --format onnx`) runs on ONNX Runtime, an `.xml`
    file (`--format openvino`) on OpenVINO, a `.tflite` file (`--format litert`) on
    LiteRT. `announce`: say on stderr which export was read, once it is loaded."""
    from keras_attn.cli.predict_file import serving_default
    from keras_attn.cli.runtimes import runtime_name
    from keras_attn.export.versions import resolve_export

    saved_model = resolve_export(saved_model)
    call, expected, _ = serving_default(saved_model, announce)
    given = {
        name: value
        for name, value in {"text": texts, "text_pair": text_pairs, **inputs}.items()
        if value is not None and len(value)
    }
    runtime = runtime_name(saved_model)
    model = f"this {runtime} model" if runtime else "this model's serving_default"
    takes = f"{model} takes {_flags(expected)}"
    extra = [name for name in given if name not in expected]
    if extra:
        raise UserInputError(f"{takes}; it has no use for {_flags(extra)}")
    missing = [name for name in expected if name not in given]
    if missing:
        raise UserInputError(f"{takes}; missing: {_flags(missing)}")
    sizes = {name: len(given[name]) for name in expected}
    if len(set(sizes.values())) != 1:
        raise UserInputError(f"give as many of each input: {sizes}")
    return call(**{
        name: given[name] if name in INTEGER_INPUTS else as_bytes(given[name])
        for name in expected
    })  # fmt: skip


def _flags(names):
    return ", ".join("--" + name.replace("_", "-") for name in names)


@user_errors
def main(argv=None):
    args = build_parser().parse_args(argv)
    if args.input is not None or args.output is not None:
        return _predict_file(args)
    choices = [c.split("|") for c in args.choices] if args.choices else None
    outputs = predict(
        args.saved_model,
        args.text,
        args.text_pair,
        question=args.question,
        context=args.context,
        choices=choices,
        prompt=args.prompt,
        source=args.source,
        mention_start=args.mention_start,
        mention_end=args.mention_end,
        announce=True,
    )
    if args.json:
        print(
            json.dumps(
                {
                    k: v.tolist()
                    if v.dtype != object
                    else [
                        [s.decode(errors="replace") for s in row]
                        if v.ndim > 1
                        else row.decode(errors="replace")
                        for row in v
                    ]
                    for k, v in outputs.items()
                },
                indent=2,
                ensure_ascii=False,
            )
        )
        return outputs
    rows = args.text or args.question or args.context or args.prompt or args.source
    if args.mention_start and args.mention_end:  # the typed mention in brackets
        rows = [
            f"{t[:s]}[{t[s:e]}]{t[e:]}" if 0 <= s < e <= len(t) else t
            for t, s, e in zip(map(shown, rows), args.mention_start, args.mention_end, strict=True)
        ]
    for i, text in enumerate(map(shown, rows)):
        if "labels" in outputs and outputs["labels"][i] == b"" and "label_ids" in outputs:
            print(f"{'(none)':>10}  the mention covers no word of its text: {text}")
        elif "labels" in outputs:
            print(classified(outputs["labels"][i], outputs["probabilities"][i], text))
        elif "tags" in outputs:
            tagged = [
                f"{shown(w)}/{shown(t)}"
                for w, t in zip(outputs["words"][i], outputs["tags"][i], strict=True)
                if w
            ]
            print(" ".join(tagged))
        elif "text" in outputs:
            print(f"{text} -> {shown(outputs['text'][i])}")
        elif "answer" in outputs:
            print(
                f"{text} -> {shown(outputs['answer'][i])!r} (score {outputs['score'][i]:.2f})"
                if "score" in outputs
                else f"{text} -> {shown(outputs['answer'][i])!r}"
            )
        else:
            print(f"{text}: " + ", ".join(f"{k} {tuple(v[i].shape)}" for k, v in outputs.items()))
    return outputs


def _predict_file(args):
    inline = [f"--{n.replace('_', '-')}" for n in INPUT_COLUMNS if getattr(args, n)]
    if args.input is None or args.output is None:
        raise UserInputError("batch prediction needs both --input FILE and --output FILE")
    if inline:
        raise UserInputError(f"--input reads the texts from the file; leave out {inline}")
    if args.output.resolve() == args.input.resolve():
        raise UserInputError(f"--output {args.output} would overwrite the --input file")
    columns = {
        name: getattr(args, f"{name}_column")
        for name in INPUT_COLUMNS
        if getattr(args, f"{name}_column") is not None
    }
    summary = predict_file(
        args.saved_model,
        args.input,
        args.output,
        columns=columns,
        batch_size=args.batch_size,
        format=args.format,
        progress=not args.quiet,
    )
    print(summary_text(summary, args.input, args.output))
    return summary
