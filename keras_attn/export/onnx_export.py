"""ONNX exports that take raw text: the tokenizer as `onnxruntime-extensions` ops, the
model converted by tf2onnx, the serving outputs computed in the graph (TensorFlow,
onnx, tf2onnx; imported when first used)."""

import pathlib

import numpy as np

from keras_attn.api_export import keras_attn_export

CONTRIB = "ai.onnx.contrib"  # onnxruntime-extensions' operator domain
OPSET = 17
INPUTS = ("token_ids", "segment_ids", "padding_mask")


def _constant(name, value, dtype):
    from onnx import helper

    value = np.asarray(value)
    return helper.make_node(
        "Constant",
        [],
        [name],
        value=helper.make_tensor(name, dtype, value.shape, value.ravel().tolist()),
    )


def _bert_tokenizer(tokenizer, inputs, outputs, **options):
    """onnxruntime-extensions' `BertTokenizer` node with the tokenizer's vocabulary and
    casing (an uncased vocabulary also strips accents, as `WordPieceTokenizer`)."""
    from onnx import helper

    lowercase = int(bool(tokenizer.lowercase))
    return helper.make_node(
        "BertTokenizer",
        inputs,
        outputs,
        domain=CONTRIB,
        vocab_file="\n".join(tokenizer.vocabulary),
        do_lower_case=lowercase,
        strip_accents=lowercase,
        **options,
    )


def _pair_nodes(tokenizer):
    """Loop-body nodes packing `text[row]` and `text_pair[row]` as `WordPieceTokenizer`
    does: each text's pieces alone, trimmed round-robin to `sequence_length - 3` (the
    shorter kept whole when it fits in half, else the first gets the odd piece), then
    `[CLS] A [SEP] B [SEP]` -> `ids`, `types`, `mask` (the operator's own truncation of
    pairs is not BERT's)."""
    from onnx import TensorProto, helper

    int64, budget = TensorProto.INT64, tokenizer.sequence_length - 3
    nodes = [
        _constant("zero", [0], int64),
        _constant("one", [1], int64),
        _constant("two", [2], int64),
        _constant("minus_one", [-1], int64),
        _constant("budget", [budget], int64),
        _constant("half_up", [budget - budget // 2], int64),
        _constant("half_down", [budget // 2], int64),
        _constant("cls", [tokenizer.cls_id], int64),
        _constant("sep", [tokenizer.sep_id], int64),
    ]
    for side, source in (("a", "text"), ("b", "text_pair")):
        nodes += [
            helper.make_node("Gather", [f"{source}_rows", "row"], [f"{side}_text"]),
            _bert_tokenizer(tokenizer, [f"{side}_text"], [f"{side}_all", f"{side}_t", f"{side}_m"]),
            # The pieces without the operator's [CLS] and [SEP].
            helper.make_node(
                "Slice", [f"{side}_all", "one", "minus_one", "axis0"], [f"{side}_ids"]
            ),
            helper.make_node("Shape", [f"{side}_ids"], [f"{side}_n"]),
        ]
    nodes += [
        # Round-robin allotment (tensorflow-text's RoundRobinTrimmer): each side keeps up
        # to the larger of what the other leaves and its half (the first: the odd piece).
        helper.make_node("Sub", ["budget", "b_n"], ["room_a"]),
        helper.make_node("Sub", ["budget", "a_n"], ["room_b"]),
        helper.make_node("Max", ["room_a", "half_up"], ["cap_a"]),
        helper.make_node("Max", ["room_b", "half_down"], ["cap_b"]),
        helper.make_node("Min", ["a_n", "cap_a"], ["keep_a"]),
        helper.make_node("Min", ["b_n", "cap_b"], ["keep_b"]),
        helper.make_node("Slice", ["a_ids", "zero", "keep_a", "axis0"], ["a_kept"]),
        helper.make_node("Slice", ["b_ids", "zero", "keep_b", "axis0"], ["b_kept"]),
        helper.make_node("Concat", ["cls", "a_kept", "sep", "b_kept", "sep"], ["ids"], axis=0),
        helper.make_node("Add", ["keep_a", "two"], ["first_length"]),
        helper.make_node("Add", ["keep_b", "one"], ["second_length"]),
        helper.make_node("ConstantOfShape", ["first_length"], ["zeros"], value=_int64(0)),
        helper.make_node("ConstantOfShape", ["second_length"], ["ones"], value=_int64(1)),
        helper.make_node("Concat", ["zeros", "ones"], ["types"], axis=0),
        helper.make_node("Shape", ["ids"], ["all_n"]),
        helper.make_node("ConstantOfShape", ["all_n"], ["mask"], value=_int64(1)),
    ]
    return nodes


def _or_one_empty_text(name):
    """An `If` node: `name` as it is, or `[""]` when it holds no text (`empty`)."""
    from onnx import TensorProto, helper

    rows = f"{name}_rows"

    def branch(label, node):
        output = helper.make_tensor_value_info(f"{rows}_{label}", TensorProto.STRING, [None])
        return helper.make_graph([node], f"{name}_{label}", [], [output])

    one_empty = helper.make_node(
        "Constant",
        [],
        [f"{rows}_empty"],
        value=helper.make_tensor("one_empty", TensorProto.STRING, [1], [b""]),
    )
    as_given = helper.make_node("Identity", [name], [f"{rows}_given"])
    return helper.make_node(
        "If",
        ["empty"],
        [rows],
        then_branch=branch("empty", one_empty),
        else_branch=branch("given", as_given),
    )


def _int64(value):
    """A one-element int64 tensor, the fill value of `ConstantOfShape`."""
    from onnx import TensorProto, helper

    return helper.make_tensor("value", TensorProto.INT64, [1], [value])


def wordpiece_graph(tokenizer, text_pair=False):
    """A `WordPieceTokenizer` as an ONNX model: strings `text` (and, with `text_pair`,
    `text_pair`) `(batch,)` -> int32 `token_ids`, `segment_ids`, `padding_mask`
    `(batch, longest)`, as the tokenizer packs them and the SavedModel cuts them (to
    the longest text's pieces).

    Each text goes through `onnxruntime-extensions`' `BertTokenizer` (BERT's basic
    tokenisation and WordPiece, `[CLS] ... [SEP]`, cut to `sequence_length`) in a
    `Loop` over the batch (the operator reads one text, or one pair), padded to
    `sequence_length`, then the batch is cut to its longest row; a pair is packed
    and trimmed here (`_pair_nodes`). A request of no text is read as one empty text
    (the converted model cannot take an empty batch); the `request_size` output
    (`(1,)`, int64) says how many rows were asked for."""
    from onnx import TensorProto, helper

    length, int64 = tokenizer.sequence_length, TensorProto.INT64
    if text_pair:
        pack = _pair_nodes(tokenizer)
    else:
        pack = [
            helper.make_node("Gather", ["text_rows", "row"], ["one_text"]),
            _bert_tokenizer(tokenizer, ["one_text"], ["ids", "types", "mask"], max_length=length),
        ]
    body = [
        _constant("axis0", [0], int64),
        _constant("full", [length], int64),
        _constant("pad_id", tokenizer.pad_id, int64),
        helper.make_node("Unsqueeze", ["i", "axis0"], ["row"]),
        *pack,
        helper.make_node("Shape", ["ids"], ["pieces"]),
        helper.make_node("Sub", ["full", "pieces"], ["room"]),
        helper.make_node("Concat", ["axis0", "room"], ["pads"], axis=0),
        helper.make_node("Pad", ["ids", "pads", "pad_id"], ["ids_out"]),
        helper.make_node("Pad", ["types", "pads"], ["types_out"]),
        helper.make_node("Pad", ["mask", "pads"], ["mask_out"]),
        helper.make_node("Identity", ["keep_going"], ["keep_going_out"]),
    ]
    one_text = helper.make_graph(
        body,
        "one_text",
        [
            helper.make_tensor_value_info("i", int64, []),
            helper.make_tensor_value_info("keep_going", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info("keep_going_out", TensorProto.BOOL, [])]
        + [helper.make_tensor_value_info(n, int64, [length]) for n in ("ids_out", "types_out")]
        + [helper.make_tensor_value_info("mask_out", int64, [length])],
    )
    names = ("text", "text_pair")[: 2 if text_pair else 1]
    nodes = [
        # An empty request is read as one empty text (the converted model cannot take a
        # batch of none); `export_onnx` cuts the answers back to `request_size` rows.
        helper.make_node("Shape", ["text"], ["request_size"]),
        _constant("no_rows", [0], int64),
        helper.make_node("Equal", ["request_size", "no_rows"], ["empty_1"]),
        helper.make_node("Squeeze", ["empty_1"], ["empty"]),
        *(_or_one_empty_text(name) for name in names),
        helper.make_node("Shape", ["text_rows"], ["batch_1"]),
        helper.make_node("Squeeze", ["batch_1"], ["batch"]),
        _constant("always", True, TensorProto.BOOL),
        helper.make_node("Loop", ["batch", "always"], ["ids", "types", "mask"], body=one_text),
        _constant("axis1", [1], int64),
        _constant("start", [0], int64),
        helper.make_node("ReduceSum", ["mask", "axis1"], ["lengths"], keepdims=0),
        helper.make_node("ReduceMax", ["lengths"], ["longest"], keepdims=1),
    ]
    outputs = []
    for source, name in zip(("ids", "types", "mask"), INPUTS, strict=True):
        nodes.append(
            helper.make_node("Slice", [source, "start", "longest", "axis1"], [name + "64"])
        )
        nodes.append(helper.make_node("Cast", [name + "64"], [name], to=TensorProto.INT32))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.INT32, ["batch", "length"]))
    outputs.append(helper.make_tensor_value_info("request_size", int64, [1]))
    texts = [helper.make_tensor_value_info(n, TensorProto.STRING, ["batch"]) for n in names]
    graph = helper.make_graph(nodes, "wordpiece", texts, outputs)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(CONTRIB, 1)]
    )


def _erfc(ctx, node, name, args):
    """tf2onnx handler: TensorFlow's exact GELU uses `Erfc`, which ONNX lacks: 1 - Erf."""
    from tf2onnx import utils

    erf = ctx.make_node("Erf", [node.input[0]])
    one = ctx.make_const(utils.make_name("one"), np.array(1.0, np.float32))
    node.type = "Sub"
    ctx.replace_inputs(node, [one.output[0], erf.output[0]])


def model_graph(model):
    """The model as an ONNX model (tf2onnx): int32 `token_ids`, `segment_ids`,
    `padding_mask` `(batch, length)` -> float32 `logits`."""
    import tensorflow as tf
    import tf2onnx

    specs = [tf.TensorSpec((None, None), tf.int32, name=name) for name in INPUTS]

    @tf.function(input_signature=specs)
    def logits(token_ids, segment_ids, padding_mask):
        x = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        return {"logits": tf.cast(model(x, training=False), tf.float32)}

    proto, _ = tf2onnx.convert.from_function(
        logits, input_signature=specs, opset=OPSET, custom_op_handlers={"Erfc": (_erfc, [])}
    )
    return proto


@keras_attn_export("keras_attn.export.export_onnx")
def export_onnx(model, tokenizer, path, labels=None, quantize=None, text_pair=False):
    """Writes a classifier as one ONNX file that takes raw text, tokenizer inside.

    Input `text` (strings, `(batch,)`; and `text_pair` for a classifier of pairs);
    outputs as the SavedModel's `serving_default`:
    `probabilities` `(batch, classes)`, `label_ids` and `labels` `(batch,)`. The
    tokenizer is `onnxruntime-extensions`' `BertTokenizer` operator (load the file
    with its library registered: `keras_attn.export.onnx_session`), the model is
    converted by tf2onnx; neither keras nor TensorFlow is needed to run it.

    Args:
        model: a classifier whose family serves it with `"classifier"` signatures
            (`BertClassifier`, `DebertaV3Classifier`, ...).
        tokenizer: its `WordPieceTokenizer` (the one ONNX can hold so far).
        path: the `.onnx` file to write.
        labels: the class names (default `"0"`, `"1"`, ...).
        text_pair: a classifier of text pairs: inputs `text` and `text_pair`.
        quantize: `None`, or `"int8"`: ONNX Runtime's dynamic quantization
            (`quantize_dynamic`, int8 weights, activations quantized per call), the
            recipe Optimum applies for CPUs; the tokenizer is left as it is.

    Returns:
        The path written.

    Raises:
        ValueError: for a model or tokenizer ONNX export cannot hold, named.

    Example:

    >>> import tempfile, pathlib
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.export import export_onnx, onnx_session
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> tokenizer = WordPieceTokenizer(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "film"], sequence_length=8)
    >>> model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=7), num_classes=2)
    >>> path = export_onnx(model, tokenizer, pathlib.Path(tempfile.mkdtemp()) / "m.onnx",
    ...                    labels=["bad", "good"])
    >>> session = onnx_session(path)
    >>> [o.name for o in session.get_outputs()]
    ['probabilities', 'label_ids', 'labels']
    >>> session.run(None, {"text": np.array(["good film", "film"], dtype=object)})[0].shape
    (2, 2)
    """
    import onnx
    from onnx import TensorProto, compose, helper

    from keras_attn.data import WordPieceTokenizer
    from keras_attn.export.signatures import common
    from keras_attn.export.signatures.signature_kinds import signature_kind

    kind = signature_kind(model)
    if kind != "classifier":
        raise ValueError(
            f"Expected a classifier for the ONNX export (so far). Received: a "
            f"{type(model).__name__} ({kind or 'no'} signatures): use the SavedModel."
        )
    if quantize not in (None, "int8"):
        raise ValueError(f"Expected `quantize` None or 'int8'. Received: quantize={quantize!r}")
    if not isinstance(tokenizer, WordPieceTokenizer):
        raise ValueError(
            "Expected a WordPieceTokenizer: the ONNX export holds only WordPiece as "
            f"onnxruntime-extensions ops so far. Received: {type(tokenizer).__name__}"
        )
    names = [str(n) for n in common.label_names(labels, model.num_classes).numpy().astype(str)]
    core = model_graph(model)
    pre = wordpiece_graph(tokenizer, text_pair=text_pair)
    pre.ir_version = core.ir_version
    merged = compose.merge_models(
        pre,
        core,
        io_map=[(name, name) for name in INPUTS],
        prefix2="model/",
    )
    opsets = {o.domain or "": o.version for o in merged.opset_import}  # merging repeats some
    del merged.opset_import[:]
    merged.opset_import.extend(helper.make_opsetid(d, v) for d, v in sorted(opsets.items()))
    graph = merged.graph
    graph.node.extend(
        [
            helper.make_node("Softmax", ["model/logits"], ["all_probabilities"], axis=-1),
            helper.make_node(
                "ArgMax", ["all_probabilities"], ["all_label_ids"], axis=-1, keepdims=0
            ),
            helper.make_node(
                "Constant",
                [],
                ["label_names"],
                value=helper.make_tensor(
                    "label_names", TensorProto.STRING, [len(names)], [n.encode() for n in names]
                ),
            ),
            helper.make_node("Gather", ["label_names", "all_label_ids"], ["all_labels"], axis=0),
            _constant("first_row", [0], TensorProto.INT64),
            *(
                helper.make_node(
                    "Slice", [f"all_{n}", "first_row", "request_size", "first_row"], [n]
                )
                for n in ("probabilities", "label_ids", "labels")
            ),
        ]
    )
    del graph.output[:]
    graph.output.extend(
        [
            helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, ["batch", None]),
            helper.make_tensor_value_info("label_ids", TensorProto.INT64, ["batch"]),
            helper.make_tensor_value_info("labels", TensorProto.STRING, ["batch"]),
        ]
    )
    onnx.checker.check_model(merged)
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if quantize is None:
        onnx.save(merged, str(path))
        return path
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory() as folder:
        float_path = pathlib.Path(folder) / "float.onnx"
        onnx.save(merged, str(float_path))
        quantize_dynamic(str(float_path), str(path), weight_type=QuantType.QInt8)
    return path


@keras_attn_export("keras_attn.export.onnx_session")
def onnx_session(path, threads=None):
    """An `onnxruntime.InferenceSession` of an exported file, with the
    `onnxruntime-extensions` operators its tokenizer needs (what a service does with
    `onnxruntime` alone: no keras, no TensorFlow; see `export_onnx`'s example).

    Args:
        path: the `.onnx` file.
        threads: ONNX Runtime's intra- and inter-op threads (default: its own choice).

    Returns:
        The `onnxruntime.InferenceSession`.

    Example:

    >>> import tempfile, pathlib, onnx
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.export import onnx_session
    >>> from keras_attn.export.onnx_export import wordpiece_graph
    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "film"])
    >>> path = str(pathlib.Path(tempfile.mkdtemp()) / "tokenizer.onnx")
    >>> onnx.save(wordpiece_graph(tokenizer), path)
    >>> onnx_session(path, threads=1).run(None, {"text": np.array(["Film"], dtype=object)})[0]
    array([[2, 5, 3]], dtype=int32)
    """
    import onnxruntime
    import onnxruntime_extensions

    options = onnxruntime.SessionOptions()
    options.register_custom_ops_library(onnxruntime_extensions.get_library_path())
    if threads:
        options.intra_op_num_threads = options.inter_op_num_threads = int(threads)
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
