"""ONNX exports that take raw text: the tokenizer as `onnxruntime-extensions` ops
(`onnx_tokenizer`), the model converted by tf2onnx, the serving outputs computed in the
graph (TensorFlow, onnx, tf2onnx; imported when first used)."""

import pathlib

import numpy as np

from keras_attn.api_export import keras_attn_export
from keras_attn.export.one_file import claimed_file, verify_checksum
from keras_attn.export.onnx_tokenizer import (
    INPUTS,
    OPSET,
    _constant,
    byte_pair_graph,
    wordpiece_graph,
)

# Why a tagger or span-QA model is not exported to ONNX (docs/deployment.md): both answer
# with byte offsets in the text, which onnxruntime-extensions' operators do not give.
NO_OFFSETS = (
    "a tagger's words and an answer's span are byte offsets in the text; "
    "onnxruntime-extensions 0.15's StringRegexSplitWithOffsets returns each text whole "
    "and its BertTokenizer's offset_mapping counts characters of its own re-spaced text"
)


# A backbone's outputs the sentence-embedding export reads.
ENCODER_OUTPUTS = ("sequence_output", "pooled_output")


def _label_nodes(names):
    """Nodes from the model's `logits` to the classifier's outputs (every row), and the
    outputs' `(name, element type, shape)`."""
    from onnx import TensorProto, helper

    table = helper.make_tensor(
        "names", TensorProto.STRING, [len(names)], [n.encode() for n in names]
    )
    nodes = [
        helper.make_node("Softmax", ["model/logits"], ["all_probabilities"], axis=-1),
        helper.make_node("ArgMax", ["all_probabilities"], ["all_label_ids"], axis=-1, keepdims=0),
        helper.make_node("Constant", [], ["label_names"], value=table),
        helper.make_node("Gather", ["label_names", "all_label_ids"], ["all_labels"], axis=0),
    ]
    outputs = [
        ("probabilities", TensorProto.FLOAT, ["batch", None]),
        ("label_ids", TensorProto.INT64, ["batch"]),
        ("labels", TensorProto.STRING, ["batch"]),
    ]
    return nodes, outputs


def _embedding_nodes():
    """Nodes from a backbone's outputs to the encoder's (`signatures.backbone`):
    `embeddings`, the mean of the sequence over the real tokens, L2-normalised as
    `tf.math.l2_normalize` does, and the `pooled_output`."""
    from onnx import TensorProto, helper

    nodes = [
        _constant("pool_tokens_axis", [1], TensorProto.INT64),
        _constant("pool_last_axis", [-1], TensorProto.INT64),
        _constant("pool_one", 1.0, TensorProto.FLOAT),
        _constant("pool_epsilon", 1e-12, TensorProto.FLOAT),
        helper.make_node("Cast", ["padding_mask"], ["pool_mask"], to=TensorProto.FLOAT),
        helper.make_node("Unsqueeze", ["pool_mask", "pool_last_axis"], ["pool_mask3"]),
        helper.make_node("Mul", ["model/sequence_output", "pool_mask3"], ["pool_masked"]),
        helper.make_node(
            "ReduceSum", ["pool_masked", "pool_tokens_axis"], ["pool_summed"], keepdims=0
        ),
        helper.make_node(
            "ReduceSum", ["pool_mask", "pool_tokens_axis"], ["pool_count"], keepdims=1
        ),
        helper.make_node("Max", ["pool_count", "pool_one"], ["pool_tokens"]),
        helper.make_node("Div", ["pool_summed", "pool_tokens"], ["pool_mean"]),
        helper.make_node("ReduceSumSquare", ["pool_mean"], ["pool_square"], axes=[-1], keepdims=1),
        helper.make_node("Max", ["pool_square", "pool_epsilon"], ["pool_kept"]),
        helper.make_node("Sqrt", ["pool_kept"], ["pool_norm"]),
        helper.make_node("Div", ["pool_mean", "pool_norm"], ["all_embeddings"]),
        helper.make_node("Identity", ["model/pooled_output"], ["all_pooled_output"]),
    ]
    outputs = [
        ("embeddings", TensorProto.FLOAT, ["batch", None]),
        ("pooled_output", TensorProto.FLOAT, ["batch", None]),
    ]
    return nodes, outputs


def _erfc(ctx, node, name, args):
    """tf2onnx handler: TensorFlow's exact GELU uses `Erfc`, which ONNX lacks: 1 - Erf."""
    from tf2onnx import utils

    erf = ctx.make_node("Erf", [node.input[0]])
    one = ctx.make_const(utils.make_name("one"), np.array(1.0, np.float32))
    node.type = "Sub"
    ctx.replace_inputs(node, [one.output[0], erf.output[0]])


def model_graph(model):
    """The model as an ONNX model (tf2onnx, then `onnx_graph.simplified`): int32
    `token_ids`, `segment_ids`, `padding_mask` `(batch, length)` -> float32 `logits`
    (a backbone: `sequence_output` and `pooled_output`)."""
    import tensorflow as tf
    import tf2onnx

    specs = [tf.TensorSpec((None, None), tf.int32, name=name) for name in INPUTS]

    @tf.function(input_signature=specs)
    def logits(token_ids, segment_ids, padding_mask):
        x = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
        outputs = model(x, training=False)
        if isinstance(outputs, dict):  # a backbone
            return {k: tf.cast(outputs[k], tf.float32) for k in ENCODER_OUTPUTS}
        return {"logits": tf.cast(outputs, tf.float32)}

    from keras_attn.export.onnx_graph import simplified

    proto, _ = tf2onnx.convert.from_function(
        logits, input_signature=specs, opset=OPSET, custom_op_handlers={"Erfc": (_erfc, [])}
    )
    return simplified(proto)


@keras_attn_export("keras_attn.export.export_onnx")
def export_onnx(model, tokenizer, path, labels=None, quantize=None, text_pair=False):
    """Writes a classifier, or a backbone's sentence embeddings, as one ONNX file that
    takes raw text, tokenizer inside.

    Input `text` (strings, `(batch,)`; and `text_pair` for a classifier of pairs);
    outputs as the SavedModel's `serving_default`: `probabilities` `(batch,
    classes)`, `label_ids` and `labels` `(batch,)` (a backbone: `embeddings` and
    `pooled_output`). The
    tokenizer is `onnxruntime-extensions`' `BertTokenizer` operator (a RoBERTa
    model's: its `HfJsonTokenizer` reading the `tokenizer.json` `transformers` writes
    for the vocabulary and merges; single texts), loaded with the library registered
    (`keras_attn.export.onnx_session`); the model is converted by tf2onnx; neither
    keras nor TensorFlow is needed to run it.

    Args:
        model: a classifier or a backbone whose family serves it with
            `"classifier"` or `"encoder"` signatures (`BertClassifier`, `BertBackbone`).
        tokenizer: its `WordPieceTokenizer`, or RoBERTa's `RobertaTokenizer`.
        path: the `.onnx` file to write.
        labels: the class names (default `"0"`, `"1"`, ...).
        text_pair: a classifier of text pairs: inputs `text` and `text_pair`.
        quantize: `None`, or `"int8"`: ONNX Runtime's dynamic quantization
            (`quantize_dynamic`: int8 weights with a scale per output column,
            activations quantized per call), the recipe Optimum applies for CPUs;
            the tokenizer is left as it is.

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

    from keras_attn.export.file_checks import checked_labels

    byte_pairs = type(tokenizer).__name__ == "RobertaTokenizer"
    kind, names = checked_labels(
        model,
        tokenizer,
        labels,
        "ONNX",
        "as onnxruntime-extensions ops ",
        quantize,
        text_pair=text_pair,
        pairs="onnxruntime-extensions' HfJsonTokenizer reads one text per row"
        if byte_pairs
        else None,
        others={"tagger": NO_OFFSETS, "span_qa": NO_OFFSETS},
        tokenizers=("WordPieceTokenizer", "RobertaTokenizer"),
        kinds=("classifier", "encoder"),
    )
    core = model_graph(model)
    if byte_pairs:
        pre = byte_pair_graph(tokenizer)
    else:
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
    nodes, outputs = _embedding_nodes() if kind == "encoder" else _label_nodes(names)
    graph.node.extend(nodes)
    # The rows asked for (an empty request was answered as one empty text).
    graph.node.append(_constant("first_row", [0], TensorProto.INT64))
    for name, _, _ in outputs:
        graph.node.append(
            helper.make_node(
                "Slice", [f"all_{name}", "first_row", "request_size", "first_row"], [name]
            )
        )
    del graph.output[:]
    graph.output.extend(helper.make_tensor_value_info(*output) for output in outputs)
    onnx.checker.check_model(merged)
    path = pathlib.Path(path)
    with claimed_file(path) as partial:  # whole or not at all, with its checksum
        if quantize is None:
            onnx.save(merged, str(partial))
        else:
            from onnxruntime.quantization import QuantType, quantize_dynamic

            float_path = partial.with_name("float.onnx")
            onnx.save(merged, str(float_path))
            # One scale per output column of each weight, not one per matrix: on the
            # fine-tuned MiniLM (Rotten Tomatoes test split) the labels equal the float
            # model's on 98.1% of snippets where one scale per matrix gave 95.4% (on a
            # CPU without VNNI; docs/deployment.md).
            quantize_dynamic(
                str(float_path), str(partial), weight_type=QuantType.QInt8, per_channel=True
            )
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
    >>> from keras_attn.export.onnx_tokenizer import wordpiece_graph
    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "film"])
    >>> path = str(pathlib.Path(tempfile.mkdtemp()) / "tokenizer.onnx")
    >>> onnx.save(wordpiece_graph(tokenizer), path)
    >>> onnx_session(path, threads=1).run(None, {"text": np.array(["Film"], dtype=object)})[0]
    array([[2, 5, 3]], dtype=int32)
    """
    import onnxruntime
    import onnxruntime_extensions

    verify_checksum(path)  # a file changed since export is refused, not served
    options = onnxruntime.SessionOptions()
    options.register_custom_ops_library(onnxruntime_extensions.get_library_path())
    if threads:
        options.intra_op_num_threads = options.inter_op_num_threads = int(threads)
    return onnxruntime.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
