"""The checks every one-file export (ONNX, OpenVINO, LiteRT) makes before it writes."""


def classifier_label_names(
    model,
    tokenizer,
    labels,
    runtime,
    holds="",
    quantize=None,
    no_int8=None,
    text_pair=False,
    pairs=None,
):
    """The class names a one-file export of `model` writes, after the checks every such
    export makes: a classifier; `quantize` None or `"int8"` (`no_int8`: why only None);
    single texts unless it packs pairs (`pairs`: why not; None: it does); a
    `WordPieceTokenizer` (`holds`: as what). A `ValueError` names what `runtime`'s export
    cannot hold, before anything is written."""
    from keras_attn.data import WordPieceTokenizer
    from keras_attn.export.signatures import common
    from keras_attn.export.signatures.signature_kinds import signature_kind

    kind = signature_kind(model)
    if kind != "classifier":
        raise ValueError(
            f"Expected a classifier for the {runtime} export (so far). Received: a "
            f"{type(model).__name__} ({kind or 'no'} signatures): use the SavedModel."
        )
    if quantize not in ((None,) if no_int8 else (None, "int8")):
        expected = f"None for {runtime} ({no_int8})" if no_int8 else "None or 'int8'"
        raise ValueError(f"Expected `quantize` {expected}. Received: quantize={quantize!r}")
    if text_pair and pairs is not None:
        raise ValueError(
            f"Expected a classifier of single texts: {pairs}. Received: text_pair=True; use "
            "the SavedModel or ONNX."
        )
    if not isinstance(tokenizer, WordPieceTokenizer):
        raise ValueError(
            f"Expected a WordPieceTokenizer: the {runtime} export holds only WordPiece "
            f"{holds}so far. Received: {type(tokenizer).__name__}"
        )
    return [str(n) for n in common.label_names(labels, model.num_classes).numpy().astype(str)]
