"""OpenVINO exports that take raw text: the tokenizer converted by `openvino-tokenizers`,
the model read from its ONNX graph (`onnx_export.model_graph`), spliced into one
`model.xml` / `model.bin` (openvino, openvino-tokenizers, transformers; imported when
first used)."""

import pathlib
import tempfile

import numpy as np

from keras_attn.api_export import keras_attn_export
from keras_attn.export.one_file import claimed_file, verify_checksum
from keras_attn.export.onnx_tokenizer import INPUTS

# openvino-tokenizers' output names -> our models' inputs.
TOKENIZER_OUTPUTS = dict(
    zip(("input_ids", "token_type_ids", "attention_mask"), INPUTS, strict=True)
)
# The CPU plugin computes in bfloat16 where the processor has it unless told: float32.
FLOAT32 = {"INFERENCE_PRECISION_HINT": "f32"}


def _reference(tokenizer, folder):
    """The `transformers` tokenizer openvino-tokenizers converts: `BertTokenizerFast`
    over a `WordPieceTokenizer`'s vocabulary and casing, or what `AutoTokenizer` reads
    from a family's tokenizer written with its `save_pretrained` (RoBERTa's)."""
    from transformers import AutoTokenizer, BertTokenizerFast

    from keras_attn.data import WordPieceTokenizer

    if not isinstance(tokenizer, WordPieceTokenizer):  # a family's: RoBERTa's, DeBERTa's
        return AutoTokenizer.from_pretrained(tokenizer.save_pretrained(folder))
    vocabulary = pathlib.Path(folder) / "vocab.txt"
    vocabulary.write_text("\n".join(tokenizer.vocabulary) + "\n", encoding="utf-8")
    return BertTokenizerFast(
        str(vocabulary),
        do_lower_case=bool(tokenizer.lowercase),
        strip_accents=bool(tokenizer.lowercase),
        model_max_length=tokenizer.sequence_length,
    )


def tokenizer_model(tokenizer):
    """A `WordPieceTokenizer`, `RobertaTokenizer` or `DebertaV3Tokenizer` as an OpenVINO
    model (openvino-tokenizers' conversion of the same vocabulary read by `transformers`):
    strings `(batch,)` -> int32 `token_ids`, `segment_ids`, `padding_mask` `(batch,
    longest)`, cut to `sequence_length` (RoBERTa's segment ids, which its tokenizer
    does not give, are zeros)."""
    import openvino as ov
    import openvino.opset15 as ops
    from openvino_tokenizers import convert_tokenizer

    with tempfile.TemporaryDirectory() as folder:
        converted = convert_tokenizer(
            _reference(tokenizer, folder),
            with_detokenizer=False,
            truncation=True,
            max_length=tokenizer.sequence_length,
            tokenizer_output_type=ov.Type.i32,
        )
    for output in converted.outputs:
        output.get_tensor().set_names({TOKENIZER_OUTPUTS[output.get_any_name()]})
    if len(converted.outputs) == len(INPUTS):
        return converted
    mask = converted.output("padding_mask").get_node().input_value(0)
    zeros = ops.result(ops.multiply(mask, ops.constant(np.int32(0))))
    zeros.output(0).get_tensor().set_names({"segment_ids"})
    return ov.Model(
        [*converted.get_results(), zeros], converted.get_sinks(), converted.get_parameters()
    )


def pair_tokenizer_model(tokenizer):
    """A `WordPieceTokenizer` of text pairs as an OpenVINO model: strings `text` and
    `text_pair` `(batch,)` -> int32 `token_ids`, `segment_ids`, `padding_mask` `(batch,
    longest)`, packed as the tokenizer packs a pair: each text's pieces from
    openvino-tokenizers' conversion (no special tokens), trimmed round-robin to
    `sequence_length - 3` (the shorter kept whole when it fits in half, the first
    given the odd piece), then `[CLS] A [SEP] B [SEP]` by gathering (openvino-tokenizers'
    own pair truncation differs at odd budgets)."""
    import openvino as ov
    import openvino.opset15 as ops
    from openvino_tokenizers import convert_tokenizer

    length = tokenizer.sequence_length
    budget, half = length - 3, (length - 3) // 2
    with tempfile.TemporaryDirectory() as folder:
        single = convert_tokenizer(
            _reference(tokenizer, folder),
            with_detokenizer=False,
            add_special_tokens=False,
            truncation=True,
            max_length=length,
            tokenizer_output_type=ov.Type.i32,
        )

    def scalar(value):
        return ops.constant(np.int32(value))

    sides, parameters = [], []
    for name, side in (("text", single), ("text_pair", single.clone())):
        side.get_parameters()[0].output(0).get_tensor().set_names({name})
        # The two copies would share the state variable holding the truncation length
        # (a crash at the first call): each reads its initial value instead.
        for node in side.get_ordered_ops():
            if node.get_type_name() == "ReadValue":
                node.output(0).replace(node.input_value(0))
        ids = side.output("input_ids").get_node().input_value(0)
        mask = side.output("attention_mask").get_node().input_value(0)
        rows = ops.gather(ops.shape_of(ids), ops.constant(np.int64([0])), 0)
        spare = ops.broadcast(scalar(0), ops.concat([rows, ops.constant(np.int64([1]))], 0))
        ids = ops.concat([ids, spare], 1)  # a column even when no text has a piece
        count = ops.reduce_sum(mask, ops.constant(np.int64([1])), True)  # (batch, 1)
        sides.append((ids, count))
        parameters += side.get_parameters()
    (first, first_count), (second, second_count) = sides
    kept_a = ops.minimum(
        first_count, ops.maximum(ops.subtract(scalar(budget), second_count), scalar(budget - half))
    )
    kept_b = ops.minimum(
        second_count, ops.maximum(ops.subtract(scalar(budget), first_count), scalar(half))
    )
    p = ops.add(
        ops.range(scalar(0), scalar(length), scalar(1), "i32"), ops.multiply(kept_a, scalar(0))
    )

    def gathered(ids, index):
        width = ops.gather(ops.shape_of(ids, "i32"), ops.constant(np.int32(1)), 0)
        index = ops.minimum(ops.maximum(index, scalar(0)), ops.subtract(width, scalar(1)))
        return ops.gather(ids, index, 1, 1)

    a_end, b_start = ops.add(kept_a, scalar(1)), ops.add(kept_a, scalar(2))
    b_end = ops.add(b_start, kept_b)  # the last [SEP]
    in_first = ops.logical_and(ops.greater_equal(p, scalar(1)), ops.less_equal(p, kept_a))
    in_second = ops.logical_and(ops.greater_equal(p, b_start), ops.less(p, b_end))
    pad = ops.broadcast(scalar(tokenizer.pad_id), ops.shape_of(p))
    ids = ops.select(in_first, gathered(first, ops.subtract(p, scalar(1))), pad)
    ids = ops.select(in_second, gathered(second, ops.subtract(p, b_start)), ids)
    ids = ops.select(ops.equal(p, scalar(0)), scalar(tokenizer.cls_id), ids)
    separators = ops.logical_or(ops.equal(p, a_end), ops.equal(p, b_end))
    ids = ops.select(separators, scalar(tokenizer.sep_id), ids)
    used = ops.less_equal(p, b_end)
    segments = ops.convert(ops.logical_and(ops.greater_equal(p, b_start), used), "i32")
    longest = ops.add(
        ops.reduce_max(ops.add(kept_a, kept_b), ops.constant(np.int64([0])), False), scalar(3)
    )
    results = []
    for value, name in (
        (ids, "token_ids"),
        (segments, "segment_ids"),
        (ops.convert(used, "i32"), "padding_mask"),
    ):
        cut = ops.slice(
            value,
            ops.constant(np.int32([0])),
            longest,
            ops.constant(np.int32([1])),
            ops.constant(np.int32([1])),
        )
        result = ops.result(cut)
        result.output(0).get_tensor().set_names({name})
        results.append(result)
    return ov.Model(results, parameters, "pair_tokenizer")


def _label_strings(names, label_ids):
    """The names of `label_ids` `(batch,)` as a string tensor: each row's name is cut
    from a `(batch, widest)` byte table (`StringTensorPack` wants ascending begins)."""
    import openvino.opset15 as ops

    encoded = [n.encode("utf-8") for n in names]
    width = max(1, *(len(e) for e in encoded))
    table = np.zeros((len(encoded), width), np.uint8)
    for row, name in enumerate(encoded):
        table[row, : len(name)] = np.frombuffer(name, np.uint8)
    lengths = np.array([len(e) for e in encoded], np.int32)
    rows = ops.gather(ops.constant(table), label_ids, 0)
    count = ops.convert(ops.gather(ops.shape_of(label_ids), ops.constant(0), 0), "i32")
    begins = ops.multiply(
        ops.range(ops.constant(np.int32(0)), count, ops.constant(np.int32(1)), "i32"),
        ops.constant(np.int32(width)),
    )
    ends = ops.add(begins, ops.gather(ops.constant(lengths), label_ids, 0))
    chars = ops.reshape(rows, ops.constant(np.array([-1], np.int64)), False)
    return ops.string_tensor_pack(begins, ends, chars)


def _embeddings(core, mask):
    """The encoder's outputs (`signatures.backbone`) from a backbone's OpenVINO model:
    `embeddings`, the mean of `sequence_output` over the real tokens (`mask`),
    L2-normalised as `tf.math.l2_normalize` does, and `pooled_output`."""
    import openvino.opset15 as ops

    sequence = core.output("sequence_output").get_node().input_value(0)
    pooled = core.output("pooled_output").get_node().input_value(0)
    weights = ops.convert(mask, "f32")
    summed = ops.reduce_sum(ops.multiply(sequence, ops.unsqueeze(weights, -1)), 1, False)
    tokens = ops.maximum(ops.reduce_sum(weights, 1, True), ops.constant(np.float32(1.0)))
    mean = ops.divide(summed, tokens)
    square = ops.reduce_sum(ops.multiply(mean, mean), -1, True)
    norm = ops.sqrt(ops.maximum(square, ops.constant(np.float32(1e-12))))
    return ((ops.divide(mean, norm), "embeddings"), (pooled, "pooled_output"))


@keras_attn_export("keras_attn.export.export_openvino")
def export_openvino(model, tokenizer, path, labels=None, quantize=None, text_pair=False):
    """Writes a classifier, or a backbone's sentence embeddings, as an OpenVINO model
    that takes raw text, tokenizer inside.

    Input `text` (strings, `(batch,)`); outputs as the SavedModel's `serving_default`:
    `probabilities` `(batch, classes)`, `label_ids` and `labels` `(batch,)` (a
    backbone: `embeddings` and `pooled_output`). The
    tokenizer is `openvino-tokenizers`' conversion of the vocabulary (run the file with
    `import openvino_tokenizers` done: `keras_attn.export.openvino_model`), the model
    is OpenVINO's reading of its ONNX graph; weights stay float32. OpenVINO's CPU
    plugin cannot read an empty string tensor (`StringTensorUnpack` needs a row):
    send at least one text (`keras-attn predict` answers an empty request itself).

    Args:
        model: a classifier or a backbone whose family serves it with
            `"classifier"` or `"encoder"` signatures.
        tokenizer: its `WordPieceTokenizer`, RoBERTa's `RobertaTokenizer` or
            DeBERTa-v3's `DebertaV3Tokenizer`.
        path: the `.xml` file to write (the weights go beside it as `.bin`).
        labels: the class names (default `"0"`, `"1"`, ...).
        quantize: `None` (OpenVINO's int8 needs NNCF: use `export_onnx`'s).
        text_pair: must be False: pairs are refused (openvino-tokenizers trims them
            otherwise than `WordPieceTokenizer`).

    Returns:
        The path written.

    Raises:
        ValueError: for a model or tokenizer the OpenVINO export cannot hold, named.

    Example:

    >>> import tempfile, pathlib
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.export import export_openvino, openvino_model
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> tokenizer = WordPieceTokenizer(
    ...     ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "film"], sequence_length=8)
    >>> model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=7), num_classes=2)
    >>> path = export_openvino(model, tokenizer, pathlib.Path(tempfile.mkdtemp()) / "m.xml",
    ...                        labels=["bad", "good"])
    >>> compiled = openvino_model(path)
    >>> [o.get_any_name() for o in compiled.outputs]
    ['probabilities', 'label_ids', 'labels']
    >>> compiled(np.array(["good film", "film"]))["labels"].shape
    (2,)
    """
    import openvino as ov
    import openvino.opset15 as ops

    from keras_attn.export.file_checks import checked_labels
    from keras_attn.export.onnx_export import model_graph

    kind, names = checked_labels(
        model,
        tokenizer,
        labels,
        "OpenVINO",
        quantize=quantize,
        no_int8="its int8 needs NNCF; the int8 export is ONNX Runtime's",
        text_pair=text_pair,
        pairs=None
        if type(tokenizer).__name__ == "WordPieceTokenizer"
        else "the pair packing built here is WordPiece's (round-robin), not "
        f"{type(tokenizer).__name__}'s",
        others=dict.fromkeys(
            ("tagger", "span_qa"),
            "a tagger's words and an answer's span are byte offsets in the text; "
            "openvino-tokenizers' converted tokenizer gives token ids only",
        ),
        tokenizers=("WordPieceTokenizer", "RobertaTokenizer", "DebertaV3Tokenizer"),
        kinds=("classifier", "encoder"),
    )
    with tempfile.TemporaryDirectory() as folder:
        graph = pathlib.Path(folder) / "model.onnx"
        graph.write_bytes(model_graph(model).SerializeToString())
        core = ov.convert_model(str(graph))
    if text_pair:
        converted = pair_tokenizer_model(tokenizer)
    else:
        converted = tokenizer_model(tokenizer)
        converted.get_parameters()[0].output(0).get_tensor().set_names({"text"})
    for output in converted.outputs:  # the model's inputs read the tokenizer's outputs
        source = output.get_node().input_value(0)
        for target in core.input(output.get_any_name()).get_target_inputs():
            target.replace_source_output(source)
    if kind == "encoder":
        mask = converted.output("padding_mask").get_node().input_value(0)
        answers = _embeddings(core, mask)
    else:
        logits = core.output("logits").get_node().input_value(0)
        probabilities = ops.softmax(logits, -1)
        label_ids = ops.squeeze(
            ops.topk(probabilities, 1, -1, "max", "none", "i64").output(1), [-1]
        )
        answers = (
            (probabilities, "probabilities"),
            (label_ids, "label_ids"),
            (_label_strings(names, label_ids), "labels"),
        )
    results = []
    for value, name in answers:
        result = ops.result(value)
        result.output(0).get_tensor().set_names({name})
        results.append(result)
    exported = ov.Model(results, converted.get_sinks(), converted.get_parameters(), kind)
    exported.validate_nodes_and_infer_types()
    path = pathlib.Path(path)
    with claimed_file(path) as partial:  # model.xml and .bin whole, with their checksum
        ov.save_model(exported, str(partial), compress_to_fp16=False)
    return path


@keras_attn_export("keras_attn.export.openvino_model")
def openvino_model(path, threads=None):
    """An OpenVINO compiled model of an exported file on the CPU, float32, with
    `openvino-tokenizers`' operators loaded (what a service does with `openvino` and
    `openvino-tokenizers` alone: no keras, no TensorFlow; see `export_openvino`'s
    example).

    Args:
        path: the `.xml` file.
        threads: OpenVINO's inference threads (default: its own choice).

    Returns:
        The `openvino.CompiledModel`; call it with a numpy array of strings.

    Example:

    >>> import tempfile, pathlib, openvino
    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.export import openvino_model
    >>> from keras_attn.export.openvino_export import tokenizer_model
    >>> tokenizer = WordPieceTokenizer(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "film"])
    >>> path = str(pathlib.Path(tempfile.mkdtemp()) / "tokenizer.xml")
    >>> openvino.save_model(tokenizer_model(tokenizer), path)
    >>> openvino_model(path, threads=1)(np.array(["Film"]))["token_ids"]
    array([[2, 5, 3]], dtype=int32)
    """
    import openvino as ov
    import openvino_tokenizers  # noqa: F401  (registers the tokenizer's operators)

    verify_checksum(path)  # model.xml and .bin: a file changed since export is refused
    config = dict(FLOAT32)
    if threads:
        config["INFERENCE_NUM_THREADS"] = int(threads)
    return ov.Core().compile_model(str(path), "CPU", config)
