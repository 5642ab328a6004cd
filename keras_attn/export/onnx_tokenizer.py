"""A `WordPieceTokenizer` as an ONNX graph: onnxruntime-extensions' `BertTokenizer`
operator in a `Loop` over the batch, pairs trimmed and packed in the graph (onnx;
imported when first used)."""

import numpy as np

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


def _rows_asked(names):
    """Nodes giving `request_size` (`(1,)` int64: the rows asked for) and `<name>_rows`
    for each input: the texts, or one empty text when the request has none (the
    converted model cannot take a batch of none; the export cuts its answers back)."""
    from onnx import TensorProto, helper

    return [
        helper.make_node("Shape", ["text"], ["request_size"]),
        _constant("no_rows", [0], TensorProto.INT64),
        helper.make_node("Equal", ["request_size", "no_rows"], ["empty_1"]),
        helper.make_node("Squeeze", ["empty_1"], ["empty"]),
        *(_or_one_empty_text(name) for name in names),
    ]


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
        *_rows_asked(names),  # `export_onnx` cuts the answers back to `request_size`
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


def _hugging_face_json(tokenizer):
    """`(tokenizer.json, tokenizer_config.json)` texts of `tokenizer` (a family's
    tokenizer with `save_pretrained`) as `transformers` writes them, the config's
    class named as onnxruntime-extensions 0.15 knows byte-level BPE: `GPT2Tokenizer`
    (it refuses `RobertaTokenizer`)."""
    import json
    import tempfile

    import transformers

    with tempfile.TemporaryDirectory() as folder:
        tokenizer.save_pretrained(f"{folder}/ours")
        transformers.AutoTokenizer.from_pretrained(f"{folder}/ours").save_pretrained(
            f"{folder}/theirs"
        )
        with open(f"{folder}/theirs/tokenizer.json", encoding="utf-8") as f:
            vocabulary = f.read()
        with open(f"{folder}/theirs/tokenizer_config.json", encoding="utf-8") as f:
            config = json.load(f)
    config["tokenizer_class"] = "GPT2Tokenizer"
    return vocabulary, json.dumps(config)


def byte_pair_graph(tokenizer):
    """A `RobertaTokenizer` as an ONNX model with the outputs of `wordpiece_graph`
    (single texts): onnxruntime-extensions' `HfJsonTokenizer` reading the
    `tokenizer.json` `transformers` writes for it (`<s> pieces </s>`, the batch padded
    to its longest text), then cut to `sequence_length` with `</s>` last, as the
    tokenizer cuts a text."""
    from onnx import TensorProto, helper

    length, int64 = tokenizer.sequence_length, TensorProto.INT64
    vocabulary, config = _hugging_face_json(tokenizer)
    nodes = [
        *_rows_asked(["text"]),
        helper.make_node(
            "HfJsonTokenizer",
            ["text_rows"],
            ["all_ids", "all_mask"],
            domain=CONTRIB,
            tokenizer_vocab=vocabulary,
            tokenizer_config=config,
        ),
        _constant("axis1", [1], int64),
        _constant("start", [0], int64),
        _constant("full", [length], int64),
        _constant("last", length - 1, int64),
        _constant("sep", tokenizer.sep_id, int64),
        helper.make_node("ReduceSum", ["all_mask", "axis1"], ["pieces"], keepdims=1),
        helper.make_node("ReduceMax", ["pieces"], ["most"], keepdims=0),
        helper.make_node("Min", ["most", "full"], ["longest"]),
        helper.make_node("Slice", ["all_ids", "start", "longest", "axis1"], ["cut_ids"]),
        helper.make_node("Slice", ["all_mask", "start", "longest", "axis1"], ["mask64"]),
        # A text cut short ends in </s> at the last position, as `RobertaTokenizer` packs.
        helper.make_node("Shape", ["cut_ids"], ["cut_shape"]),
        helper.make_node("Gather", ["cut_shape", "one_index"], ["cut_length"]),
        helper.make_node("Range", ["zero_scalar", "cut_length", "one_scalar"], ["positions"]),
        helper.make_node("Equal", ["positions", "last"], ["at_last"]),
        helper.make_node("Greater", ["pieces", "full"], ["too_long"]),
        helper.make_node("And", ["at_last", "too_long"], ["put_sep"]),
        helper.make_node("Where", ["put_sep", "sep", "cut_ids"], ["ids64"]),
        helper.make_node("Cast", ["ids64"], ["token_ids"], to=TensorProto.INT32),
        helper.make_node("Cast", ["mask64"], ["padding_mask"], to=TensorProto.INT32),
        helper.make_node("Mul", ["padding_mask", "zero_int32"], ["segment_ids"]),
    ]
    constants = [
        _constant("one_index", 1, int64),
        _constant("zero_scalar", 0, int64),
        _constant("one_scalar", 1, int64),
        _constant("zero_int32", 0, TensorProto.INT32),
    ]
    outputs = [
        helper.make_tensor_value_info(name, TensorProto.INT32, ["batch", "length"])
        for name in INPUTS
    ]
    outputs.append(helper.make_tensor_value_info("request_size", int64, [1]))
    graph = helper.make_graph(
        constants + nodes,
        "byte_pair",
        [helper.make_tensor_value_info("text", TensorProto.STRING, ["batch"])],
        outputs,
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET), helper.make_opsetid(CONTRIB, 1)]
    )
