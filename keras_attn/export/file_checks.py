"""The checks every one-file export (ONNX, OpenVINO, LiteRT) makes before it writes."""

from keras_attn.export_formats import format_of_runtime

# Why a one-file format holds no model of a kind that generates (a language model, an
# encoder-decoder, ...): their signatures run a decoding loop over a key/value cache and
# a detokenizer in the graph, which only the SavedModel export builds so far.
GENERATION = (
    "a generating model's decoding loop, cache and detokenizer are built for the "
    "SavedModel only so far"
)

# A kind of signatures (`signature_kinds`) -> the models it names, in error lines.
KIND_NAMES = {
    "classifier": "a classifier",
    "span_qa": "a span-QA model",
    "tagger": "a tagger",
    "encoder": "an encoder (sentence embeddings)",
    "multiple_choice": "a multiple-choice model",
    "masked_lm": "a masked language model (fill-mask)",
}
# The kinds that generate text (`GENERATION` says why no one-file format holds them).
GENERATING = ("language_model", "seq2seq")


def checked_labels(
    model,
    tokenizer,
    labels,
    runtime,
    holds="",
    quantize=None,
    no_int8=None,
    text_pair=False,
    pairs=None,
    kinds=("classifier",),
    others=None,
    tokenizers=("WordPieceTokenizer",),
):
    """`(kind, class names)` of a one-file export of `model`, after the checks every
    such export makes: a model of one of `kinds` (its signature kind; `others`:
    `{kind: why not}` for the kinds a format cannot hold, said in the error line,
    `GENERATION` for the generating kinds); `quantize` None or `"int8"`
    (`no_int8`: why only None); single texts unless it packs pairs (`pairs`: why not;
    None: it does); a tokenizer of a class named in `tokenizers` (`holds`: as what).
    The names are a classifier's or tagger's (`labels`, or "0", "1", ...), None for
    span QA and encoders. A `ValueError` names what `runtime`'s export cannot hold,
    before anything is written."""
    from keras_attn.export.signatures import common
    from keras_attn.export.signatures.signature_kinds import signature_kind

    kind = signature_kind(model)
    if kind not in kinds:
        expected = " or ".join(KIND_NAMES[k] for k in kinds)
        reason = (others or {}).get(kind) or (GENERATION if kind in GENERATING else "")
        why = f" ({reason})" if reason else " (not built for it yet)" if kind else ""
        raise ValueError(
            f"Expected {expected} for the {runtime} export{why}. Received: a "
            f"{type(model).__name__} ({kind or 'no'} signatures): use the SavedModel."
        )
    if quantize not in ((None,) if no_int8 else (None, "int8")):
        expected = f"None for {runtime} ({no_int8})" if no_int8 else "None or 'int8'"
        raise ValueError(f"Expected `quantize` {expected}. Received: quantize={quantize!r}")
    if text_pair and (pairs is not None or kind != "classifier"):
        why = pairs if kind == "classifier" else "a pair is a classifier's option"
        raise ValueError(
            f"Expected a classifier of single texts: {why}. Received: text_pair=True; use "
            "the SavedModel (pairs of WordPiece texts: ONNX or LiteRT too)."
        )
    if kind in ("span_qa", "encoder") and labels is not None:
        raise ValueError(
            f"Expected labels=None for {KIND_NAMES[kind]} (it has no classes). "
            f"Received: labels={labels!r}"
        )
    if type(tokenizer).__name__ not in tokenizers:
        held = " or ".join(tokenizers)
        limit = format_of_runtime(runtime).tokenizer_limits.get(type(tokenizer).__name__)
        why = f"{limit}; use the SavedModel" if limit else f"{holds}so far"
        raise ValueError(
            f"Expected a {held}: the {runtime} export holds those ({why}). "
            f"Received: {type(tokenizer).__name__}"
        )
    if kind in ("span_qa", "encoder"):
        return kind, None
    what = "labels (tag names)" if kind == "tagger" else "labels"
    names = common.label_names(labels, model.num_classes, what=what).numpy().astype(str)
    return kind, [str(n) for n in names]
