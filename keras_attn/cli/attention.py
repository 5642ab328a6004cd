"""`keras-attn attention --saved-model DIR --text "..."`: draw an exported model's attention.

Loads the SavedModel with TensorFlow alone, runs its `attention` signature (every
BERT export has one: see `keras_attn.export.export_saved_model`) on one sentence (or
pair) and writes a PNG of one layer's heads (the last layer by default; `--layers all`
for every layer at once), tokens on both axes, with a colour bar: row `i` of a panel
is where token `i` looks. Prints, per head, the token it attends to most.
"""

import pathlib
import sys

import numpy as np

from keras_attn.cli.user_errors import CommandParser, user_errors
from keras_attn.errors import UserInputError


def build_parser():
    parser = CommandParser(prog="keras-attn attention", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--saved-model",
        type=pathlib.Path,
        required=True,
        help="saved_models/<name>[/<version>] (the highest version by default)",
    )
    parser.add_argument("--text", required=True, help="the sentence to look at")
    parser.add_argument(
        "--text-pair",
        help="the second text, for pair models (pair classifier, span QA: the "
        "context, multiple choice: a choice)",
    )
    parser.add_argument(
        "--layers",
        help="comma-separated layer indices to draw, or `all` (default: the last layer, "
        "its heads in a grid)",
    )
    parser.add_argument(
        "--output",
        type=pathlib.Path,
        default=pathlib.Path("attention.png"),
        help="the PNG to write (default: attention.png)",
    )
    parser.add_argument(
        "--logdir",
        type=pathlib.Path,
        help="also log one image per layer to this TensorBoard directory",
    )
    return parser


def attention(saved_model, text, text_pair=None):
    """`(scores (layers, heads, n, n), tokens)` of the SavedModel's `attention`
    signature for one text (or pair), padding cut off."""
    import tensorflow as tf

    from keras_attn.cli.command_line_text import as_bytes
    from keras_attn.export.versions import latest_version, load_saved_model

    version = latest_version(saved_model)
    loaded = load_saved_model(version)
    print(f"reading {version} (SavedModel)", file=sys.stderr)  # which version answered
    if "attention" not in loaded.signatures:
        raise UserInputError(
            f"{version} has no 'attention' signature (BERT exports have one; "
            f"signatures here: {sorted(loaded.signatures)})"
        )
    signature = loaded.signatures["attention"]
    inputs = sorted(signature.structured_input_signature[1])
    if "text_pair" in inputs and text_pair is None:
        raise UserInputError("this model takes sentence pairs; give --text-pair too")
    if "text_pair" not in inputs and text_pair is not None:
        raise UserInputError("this model takes single texts; leave out --text-pair")
    kwargs = {
        "text": tf.constant([as_bytes(text)])
    }  # bytes that are not UTF-8 are cleaned in the graph
    if text_pair is not None:
        kwargs["text_pair"] = tf.constant([as_bytes(text_pair)])
    outputs = signature(**kwargs)
    n = int(outputs["lengths"][0])
    tokens = [t.decode("utf-8") for t in outputs["tokens"][0, :n].numpy()]
    return outputs["attention"][0, :, :, :n, :n].numpy(), tokens


@user_errors
def main(argv=None):
    args = build_parser().parse_args(argv)
    from keras_attn.cli.command_line_text import shown
    from keras_attn.visualize import attention_heatmap, attention_image_summary

    scores, tokens = attention(args.saved_model, args.text, args.text_pair)
    layers = [scores.shape[0] - 1]
    if args.layers == "all":
        layers = list(range(scores.shape[0]))
    elif args.layers:
        try:
            layers = [int(i) for i in args.layers.split(",")]
        except ValueError:
            raise UserInputError(
                f"--layers takes comma-separated integers or `all`; got {args.layers!r}"
            ) from None
        if not all(0 <= i < scores.shape[0] for i in layers):
            raise UserInputError(
                f"--layers must be in 0..{scores.shape[0] - 1}; got {args.layers!r}"
            )
    title = (
        shown(args.text)
        if args.text_pair is None
        else f"{shown(args.text)} / {shown(args.text_pair)}"
    )
    try:
        args.output.parent.mkdir(parents=True, exist_ok=True)
    except OSError as error:  # a file where a folder of the path should be
        raise UserInputError(f"--output {args.output}: cannot make its folder ({error})") from None
    if len(layers) == 1:  # one layer: its heads in a grid
        attention_heatmap(
            scores[layers[0]], tokens, title=f"layer {layers[0]}: {title}", path=args.output
        )
    else:
        attention_heatmap(
            scores[layers],
            tokens,
            title=title,
            path=args.output,
            row_titles=[f"layer {i}" for i in layers],
        )
    print(
        f"{len(layers)} {'layer' if len(layers) == 1 else 'layers'} of {scores.shape[0]}, "
        f"{scores.shape[1]} heads each, {len(tokens)} tokens: "
        f"{' '.join(tokens)}"
    )
    for layer in layers:
        # Per head: the key token that receives the most attention, averaged over queries.
        received = scores[layer].mean(axis=1)  # (heads, n)
        summary = ", ".join(
            f"h{h} {tokens[int(np.argmax(r))]} {r.max():.2f}" for h, r in enumerate(received)
        )
        print(f"  layer {layer}: most attended: {summary}")
    if args.logdir:
        import tensorflow as tf

        with tf.summary.create_file_writer(str(args.logdir)).as_default():
            for layer in layers:
                attention_image_summary(
                    f"layer_{layer}", scores[layer], tokens, step=0, title=f"layer {layer}: {title}"
                )
        print(f"TensorBoard images: tensorboard --logdir {args.logdir} --host 127.0.0.1")
    print(f"Attention maps: {args.output}")
    return scores, tokens
