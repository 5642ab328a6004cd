"""What TF Serving checks when it loads a SavedModel, checked before it has to.

`check_saved_model` reads `saved_model.pb` the way the server's loader sees it:
signature names, input keys and output types, the ops of the graph and of every
function in its library; `replay_warmup_requests` runs the warm-up records the
server replays at load time.
"""

import glob
import importlib.util
import os
import pathlib

import numpy as np
import tensorflow as tf

from keras_attn.api_export import keras_attn_export
from keras_attn.export.method_names import CLASSIFY_METHOD, PREDICT_METHOD
from keras_attn.export.versions import load_saved_model
from keras_attn.export.warmup import WARMUP_FILE

TOKEN_ID_INPUTS = frozenset({"token_ids", "segment_ids", "padding_mask"})
# The input keys each signature may have: one documented set per model kind.
SIGNATURE_INPUTS = {
    "serving_default": [
        frozenset({"text"}),
        frozenset({"text", "text_pair"}),
        frozenset({"question", "context"}),
        frozenset({"context", "choices"}),
        frozenset({"prompt"}),
        frozenset({"source"}),
        frozenset({"text", "mention_start", "mention_end"}),  # entity typing
    ],
    "serve_token_ids": [
        TOKEN_ID_INPUTS,
        frozenset({"token_ids", "padding_mask"}),
        TOKEN_ID_INPUTS | {"entity_ids", "marker_positions"},  # ERNIE's typing
    ],
    "classify": [frozenset({"inputs"})],
    "attention": [frozenset({"text"}), frozenset({"text", "text_pair"})],
}
HALF_TYPES = frozenset({tf.float16.as_datatype_enum, tf.bfloat16.as_datatype_enum})
XLA_ATTRIBUTES = ("_XlaMustCompile", "_XlaCompile", "_XlaScope", "_xla_compile_id")


def tensorflow_text_op_libraries():
    """Paths of tensorflow-text's op libraries (what TF Serving links in)."""
    spec = importlib.util.find_spec("tensorflow_text")
    if spec is None:
        return []
    return sorted(
        glob.glob(os.path.join(spec.submodule_search_locations[0], "python", "ops", "*.so"))
    )


def tensorflow_text_ops():
    """Names of the ops tensorflow-text's libraries register."""
    from tensorflow.core.framework import op_def_pb2
    from tensorflow.python.client import pywrap_tf_session

    names = set()
    for library in tensorflow_text_op_libraries():
        handle = pywrap_tf_session.TF_LoadLibrary(library)  # what tf.load_op_library does
        try:
            ops = op_def_pb2.OpList.FromString(pywrap_tf_session.TF_GetOpList(handle))
        finally:
            pywrap_tf_session.TF_DeleteLibraryHandle(handle)
        names.update(op.name for op in ops.op)
    return names


def _read(path):
    from tensorflow.core.protobuf import saved_model_pb2

    proto = pathlib.Path(path) / "saved_model.pb"
    if not proto.is_file():
        raise ValueError(
            "Expected a SavedModel version folder with saved_model.pb. Received: "
            f"path={str(path)!r}"
        )
    saved_model = saved_model_pb2.SavedModel.FromString(proto.read_bytes())
    serve = [m for m in saved_model.meta_graphs if "serve" in m.meta_info_def.tags]
    if not serve:
        raise ValueError(f"{path}: no MetaGraph tagged 'serve' (TF Serving loads that tag)")
    return serve[0]


@keras_attn_export("keras_attn.export.graph_ops")
def graph_ops(path):
    """`{op type: where}` of every op in a SavedModel's graph and function library.

    Example:

    >>> import pathlib, tempfile, tensorflow as tf
    >>> from keras_attn.export import graph_ops
    >>> module = tf.Module()
    >>> spec = tf.TensorSpec([None], tf.float32)
    >>> module.f = tf.function(lambda x: tf.nn.relu(x), input_signature=[spec])
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "1"
    >>> tf.saved_model.save(module, str(path), signatures=module.f)
    >>> "Relu" in graph_ops(path)
    True
    """
    meta_graph = _read(path)
    ops = {}
    for node in meta_graph.graph_def.node:
        ops.setdefault(node.op, "graph")
    for function in meta_graph.graph_def.library.function:
        for node in function.node_def:
            ops.setdefault(node.op, function.signature.name)
    return ops


@keras_attn_export("keras_attn.export.check_saved_model")
def check_saved_model(path, allowed_ops=None):
    """Raises `ValueError` listing what TF Serving would refuse or mis-serve.

    Checks: a `serve` MetaGraph with `serving_default`; each known signature's input
    keys exactly as documented (`export_saved_model`), `None` batch dimensions, the
    Predict method (Classify for `classify`) and no half-precision output (TF
    Serving's REST layer rejects it); every op of the graph and its functions is a
    core TensorFlow op or a tensorflow-text op (what the stock server links); no XLA
    compilation attribute (`jit_compile`) anywhere; warm-up records (if any) parse as
    `PredictionLog`.

    Args:
        path: the SavedModel version folder.
        allowed_ops: op names to accept; default: `tf.raw_ops` (core TensorFlow),
            `_QuantizedMatMul` (oneDNN's int8 product: a core op without a
            Python wrapper, `keras_attn.export.onednn_int8`) and the ops of
            tensorflow-text's libraries.

    Returns:
        The signature names, sorted.

    Example:

    >>> import pathlib, tempfile, tensorflow as tf
    >>> from keras_attn.export import check_saved_model
    >>> module = tf.Module()
    >>> module.f = tf.function(lambda text: {"length": tf.strings.length(text)},
    ...                        input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "1"
    >>> tf.saved_model.save(module, str(path), signatures={"serving_default": module.f})
    >>> check_saved_model(path)
    ['serving_default']
    """
    meta_graph = _read(path)
    signatures = meta_graph.signature_def
    if allowed_ops is None:
        allowed_ops = set(dir(tf.raw_ops)) | {"_QuantizedMatMul"} | tensorflow_text_ops()
    problems = [
        *_signature_problems(signatures),
        *(
            f"op {op!r} (in {where}) is neither core TensorFlow nor tensorflow-text"
            for op, where in sorted(graph_ops(path).items())
            if op not in allowed_ops
        ),
        *_xla_problems(meta_graph.graph_def.library.function),
    ]
    warmup = pathlib.Path(path) / "assets.extra" / WARMUP_FILE
    if warmup.is_file():
        try:
            read_warmup_requests(path)
        except Exception as error:  # noqa: BLE001 - reported with the file named
            problems.append(f"{warmup}: not PredictionLog records ({error})")
    if problems:
        raise ValueError(f"{path} would not serve as documented:\n  " + "\n  ".join(problems))
    return sorted(name for name in signatures if name != "__saved_model_init_op")


def _signature_problems(signatures):
    """What TF Serving would refuse in the signatures: no `serving_default`, input keys
    other than documented, another method, no None batch dimension, half precision."""
    problems = []
    if "serving_default" not in signatures:
        problems.append("no 'serving_default' signature (TF Serving's default)")
    for name, signature in signatures.items():
        if name == "__saved_model_init_op":
            continue
        keys = frozenset(signature.inputs)
        if name in SIGNATURE_INPUTS and keys not in SIGNATURE_INPUTS[name]:
            problems.append(
                f"signature {name!r}: inputs {sorted(keys)}, expected one of "
                f"{[sorted(k) for k in SIGNATURE_INPUTS[name]]}"
            )
        expected_method = CLASSIFY_METHOD if name == "classify" else PREDICT_METHOD
        if signature.method_name != expected_method:
            problems.append(
                f"signature {name!r}: method {signature.method_name!r}, expected "
                f"{expected_method!r}"
            )
        for key, info in signature.inputs.items():
            dims = info.tensor_shape.dim
            if info.tensor_shape.unknown_rank or not dims or dims[0].size != -1:
                problems.append(f"signature {name!r}: input {key!r} has no None batch dimension")
        for key, info in signature.outputs.items():
            if info.dtype in HALF_TYPES:
                problems.append(
                    f"signature {name!r}: output {key!r} is {tf.as_dtype(info.dtype).name} "
                    "(TF Serving's REST API rejects half precision)"
                )
    return problems


def _xla_problems(functions):
    """The functions and nodes of the graph's library that ask for XLA compilation."""
    problems = []
    for function in functions:
        for attribute in XLA_ATTRIBUTES:
            if attribute in function.attr and function.attr[attribute].b:
                problems.append(f"function {function.signature.name} asks for XLA ({attribute})")
        for node in function.node_def:
            for attribute in XLA_ATTRIBUTES:
                if attribute in node.attr and (node.attr[attribute].b or node.attr[attribute].s):
                    problems.append(
                        f"node {node.name} in {function.signature.name} asks for XLA ({attribute})"
                    )
    return problems


@keras_attn_export("keras_attn.export.read_warmup_requests")
def read_warmup_requests(path):
    """The `PredictionLog` records of a SavedModel's `assets.extra/tf_serving_warmup_requests`.

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.export import read_warmup_requests, write_warmup_requests
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = write_warmup_requests(folder, {"serving_default": {"text": ["hello"]}}, "m")
    >>> [log.predict_log.request.model_spec.signature_name for log in read_warmup_requests(folder)]
    ['serving_default']
    """
    from tensorflow_serving.apis import prediction_log_pb2

    records = pathlib.Path(path) / "assets.extra" / WARMUP_FILE
    return [
        prediction_log_pb2.PredictionLog.FromString(record.numpy())
        for record in tf.data.TFRecordDataset(str(records))
    ]


@keras_attn_export("keras_attn.export.replay_warmup_requests")
def replay_warmup_requests(path, loaded=None):
    """Runs every warm-up record against the loaded SavedModel, as TF Serving does.

    Predict records call their signature with the request's tensors; Classify
    records serialize their `tf.Example`s into the signature's `inputs`. Any error
    propagates (TF Serving would fail the load).

    Args:
        path: the SavedModel version folder.
        loaded: the `tf.saved_model.load(path)` result, if already loaded.

    Returns:
        A list of `(signature name, {output: numpy array})`, one per record.

    Example:

    >>> import pathlib, tempfile, tensorflow as tf
    >>> from keras_attn.export import replay_warmup_requests, write_warmup_requests
    >>> module = tf.Module()
    >>> module.f = tf.function(lambda text: {"length": tf.strings.length(text)},
    ...                        input_signature=[tf.TensorSpec([None], tf.string, name="text")])
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "1"
    >>> tf.saved_model.save(module, str(path), signatures={"serving_default": module.f})
    >>> _ = write_warmup_requests(path, {"serving_default": {"text": ["hello"]}}, "m")
    >>> replay_warmup_requests(path)[0][1]["length"].tolist()
    [5]
    """
    loaded = loaded or load_saved_model(path)
    results = []
    for log in read_warmup_requests(path):
        kind = log.WhichOneof("log_type")
        if kind == "predict_log":
            request = log.predict_log.request
            inputs = {
                key: tf.constant(tf.make_ndarray(proto)) for key, proto in request.inputs.items()
            }
        elif kind == "classify_log":
            request = log.classify_log.request
            examples = request.input.example_list.examples
            inputs = {"inputs": tf.constant([example.SerializeToString() for example in examples])}
        else:
            raise ValueError(
                f"{path}: warm-up record of kind {kind!r}; only predict and classify are written"
            )
        name = request.model_spec.signature_name or "serving_default"
        outputs = loaded.signatures[name](**inputs)
        results.append((name, {key: np.asarray(value) for key, value in outputs.items()}))
    return results
