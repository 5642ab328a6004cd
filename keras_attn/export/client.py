"""A small client for a running TF Serving: REST (row and columnar JSON) and gRPC.

Builds the requests TF Serving's APIs document and turns responses back into numpy
arrays. REST needs only the standard library; gRPC uses `tensorflow-serving-api`'s
`PredictRequest` / `ClassificationRequest` and `grpcio`.

    from keras_attn.export import client
    client.predict_rest("localhost:8501", "sentiment", {"text": ["A charming film."]})
    client.predict_grpc("localhost:8500", "sentiment", {"text": ["A charming film."]})
"""

import base64
import json
import urllib.error
import urllib.request

import numpy as np

from keras_attn.api_export import keras_attn_export


def _as_json(value):
    """numpy / bytes -> JSON values; bytes that are not UTF-8 as TF Serving's `{"b64": ...}`."""
    if isinstance(value, np.ndarray):
        return [_as_json(v) for v in value] if value.ndim else _as_json(value.item())
    if isinstance(value, (list, tuple)):
        return [_as_json(v) for v in value]
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return {"b64": base64.b64encode(value).decode("ascii")}
    if isinstance(value, np.generic):
        return value.item()
    return value


def _batch_size(inputs):
    sizes = {len(v) for v in inputs.values()}
    if len(sizes) != 1:
        raise ValueError(
            f"Expected every input with the same batch size. Received sizes: "
            f"{ {k: len(v) for k, v in inputs.items()} }"
        )
    return sizes.pop()


@keras_attn_export("keras_attn.export.client.rest_url")
def rest_url(server, model, version=None, label=None, verb="predict"):
    """`http://server/v1/models/<model>[/versions/<v> | /labels/<l>]:<verb>`.

    Example:

    >>> from keras_attn.export.client import rest_url
    >>> rest_url("localhost:8501", "sentiment", version=2)
    'http://localhost:8501/v1/models/sentiment/versions/2:predict'
    """
    if version is not None and label is not None:
        raise ValueError(
            f"Give `version` or `label`, not both. Received: version={version!r}, label={label!r}"
        )
    if verb not in ("predict", "classify", "regress"):
        raise ValueError(
            f"Expected `verb` 'predict', 'classify' or 'regress'. Received: verb={verb!r}"
        )
    server = server if "://" in server else f"http://{server}"
    path = f"/v1/models/{model}"
    if version is not None:
        path += f"/versions/{int(version)}"
    elif label is not None:
        path += f"/labels/{label}"
    return f"{server.rstrip('/')}{path}:{verb}"


@keras_attn_export("keras_attn.export.client.rest_predict_body")
def rest_predict_body(inputs, signature_name="serving_default", format="row"):
    """The JSON body of a REST Predict request.

    Args:
        inputs: `{input name: batch of values}` (lists or numpy arrays).
        signature_name: the signature to run.
        format: `"row"` (`instances`: one object per example) or `"columnar"`
            (`inputs`: one list per input).

    Example:

    >>> from keras_attn.export.client import rest_predict_body
    >>> rest_predict_body({"text": ["good", "bad"]})
    {'signature_name': 'serving_default', 'instances': [{'text': 'good'}, {'text': 'bad'}]}
    >>> rest_predict_body({"text": ["good"]}, format="columnar")
    {'signature_name': 'serving_default', 'inputs': {'text': ['good']}}
    """
    if format not in ("row", "columnar"):
        raise ValueError(f"Expected `format` 'row' or 'columnar'. Received: format={format!r}")
    inputs = {key: _as_json(value) for key, value in inputs.items()}
    if format == "columnar":
        return {"signature_name": signature_name, "inputs": inputs}
    size = _batch_size(inputs)
    return {
        "signature_name": signature_name,
        "instances": [{key: value[i] for key, value in inputs.items()} for i in range(size)],
    }


@keras_attn_export("keras_attn.export.client.rest_classify_body")
def rest_classify_body(examples, signature_name="classify"):
    """The JSON body of a REST Classify request: `examples` are feature dicts.

    Example:

    >>> from keras_attn.export.client import rest_classify_body
    >>> rest_classify_body([{"text": "good"}])
    {'signature_name': 'classify', 'examples': [{'text': 'good'}]}
    """
    return {
        "signature_name": signature_name,
        "examples": [{k: _as_json(v) for k, v in e.items()} for e in examples],
    }


@keras_attn_export("keras_attn.export.client.parse_rest_response")
def parse_rest_response(body, output_names=None):
    """A REST Predict response -> `{output name: numpy array}`.

    Row responses (`predictions`) hold one object per example, or bare values when
    the signature has one output (named by `output_names[0]`, default `"output"`);
    columnar ones (`outputs`) a dict or a bare value.

    Example:

    >>> from keras_attn.export.client import parse_rest_response
    >>> body = {"predictions": [{"labels": "pos", "probabilities": [0.2, 0.8]}]}
    >>> parse_rest_response(body)["probabilities"]
    array([[0.2, 0.8]])
    """
    if isinstance(body, (str, bytes)):
        body = json.loads(body)
    if "error" in body:
        raise RuntimeError(f"TF Serving refused the request: {body['error']}")
    single = (output_names or ["output"])[0]
    if "predictions" in body:
        rows = body["predictions"]
        if rows and isinstance(rows[0], dict):
            return {key: np.array([row[key] for row in rows]) for key in rows[0]}
        return {single: np.array(rows)}
    if "outputs" in body:
        outputs = body["outputs"]
        if isinstance(outputs, dict):
            return {key: np.array(value) for key, value in outputs.items()}
        return {single: np.array(outputs)}
    if "results" in body:  # Classify: [[label, score], ...] per example
        return {
            "classes": np.array([[c for c, _ in row] for row in body["results"]]),
            "scores": np.array([[s for _, s in row] for row in body["results"]], "float32"),
        }
    raise ValueError(
        f"Expected a TF Serving response with 'predictions', 'outputs' or 'results'. "
        f"Received keys: {sorted(body)}"
    )


@keras_attn_export("keras_attn.export.client.predict_rest")
def predict_rest(
    server,
    model,
    inputs,
    signature_name="serving_default",
    version=None,
    label=None,
    format="row",
    timeout=30.0,
):
    """POSTs a Predict request to TF Serving's REST API; `{output: numpy array}`.

    Args:
        server: `host:port` of the REST API (8501 by default in the container).
        model: the model name.
        inputs: `{input name: batch of values}`.
        signature_name, format: as `rest_predict_body`.
        version, label: a version number or label (default: the latest).
        timeout: seconds.

    Example:

    With a server running (`docker run` in docs/deployment.md; the doctest's is a stand-in
    serving an untrained classifier, so which label wins is not shown):

    >>> from keras_attn.export.client import predict_rest
    >>> outputs = predict_rest("localhost:8501", "sentiment", {"text": ["A charming film."]})
    >>> sorted(outputs), outputs["probabilities"].shape, outputs["labels"][0] in ("rotten", "fresh")
    (['label_ids', 'labels', 'probabilities'], (1, 2), True)
    """
    body = json.dumps(rest_predict_body(inputs, signature_name, format)).encode("utf-8")
    request = urllib.request.Request(
        rest_url(server, model, version, label),
        data=body,
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return parse_rest_response(response.read())
    except urllib.error.HTTPError as error:
        raise RuntimeError(
            f"TF Serving answered {error.code}: {error.read().decode('utf-8', 'replace')}"
        ) from error


@keras_attn_export("keras_attn.export.client.grpc_predict_request")
def grpc_predict_request(model, inputs, signature_name="serving_default", version=None, label=None):
    """A `tensorflow.serving.PredictRequest` with `inputs` as TensorProtos.

    Strings become DT_STRING, Python ints int32 (the token-id signatures' type).

    Example:

    >>> from keras_attn.export.client import grpc_predict_request
    >>> request = grpc_predict_request("sentiment", {"text": ["good"]})
    >>> request.model_spec.name, request.inputs["text"].string_val
    ('sentiment', [b'good'])
    """
    import tensorflow as tf
    from tensorflow_serving.apis import predict_pb2

    request = predict_pb2.PredictRequest()
    _model_spec(request.model_spec, model, signature_name, version, label)
    for key, value in inputs.items():
        array = np.asarray(value)
        if array.dtype.kind in "USO":
            dtype = tf.string
        elif array.dtype.kind in "iu":
            dtype = tf.int32
        else:
            dtype = tf.float32
        request.inputs[key].CopyFrom(tf.make_tensor_proto(array, dtype=dtype))
    return request


@keras_attn_export("keras_attn.export.client.grpc_classify_request")
def grpc_classify_request(model, examples, signature_name="classify", version=None, label=None):
    """A `tensorflow.serving.ClassificationRequest` of `tf.Example`s built from feature dicts.

    Example:

    >>> from keras_attn.export.client import grpc_classify_request
    >>> request = grpc_classify_request("sentiment", [{"text": "good"}])
    >>> request.input.example_list.examples[0].features.feature["text"].bytes_list.value
    [b'good']
    """
    import tensorflow as tf
    from tensorflow_serving.apis import classification_pb2

    request = classification_pb2.ClassificationRequest()
    _model_spec(request.model_spec, model, signature_name, version, label)
    for features in examples:
        example = request.input.example_list.examples.add()
        for key, value in features.items():
            value = value if isinstance(value, bytes) else str(value).encode("utf-8")
            example.features.feature[key].CopyFrom(
                tf.train.Feature(bytes_list=tf.train.BytesList(value=[value]))
            )
    return request


def _model_spec(spec, model, signature_name, version, label):
    if version is not None and label is not None:
        raise ValueError(
            f"Give `version` or `label`, not both. Received: version={version!r}, label={label!r}"
        )
    spec.name = model
    spec.signature_name = signature_name
    if version is not None:
        spec.version.value = int(version)
    elif label is not None:
        spec.version_label = label


@keras_attn_export("keras_attn.export.client.predict_grpc")
def predict_grpc(
    server, model, inputs, signature_name="serving_default", version=None, label=None, timeout=30.0
):
    """Calls TF Serving's gRPC `Predict`; `{output: numpy array}`.

    Args:
        server: `host:port` of the gRPC API (8500 by default in the container).
        model, inputs, signature_name, version, label: as `grpc_predict_request`.
        timeout: seconds.

    Example:

    With a server running (`docker run` in docs/deployment.md); strings come back as bytes:

    >>> from keras_attn.export.client import predict_grpc
    >>> outputs = predict_grpc("localhost:8500", "sentiment", {"text": ["A charming film."]})
    >>> outputs["probabilities"].shape, outputs["labels"][0] in (b"rotten", b"fresh")
    ((1, 2), True)
    """
    import grpc
    import tensorflow as tf
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    request = grpc_predict_request(model, inputs, signature_name, version, label)
    with grpc.insecure_channel(server) as channel:
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Predict(
            request, timeout=timeout
        )
    return {key: tf.make_ndarray(proto) for key, proto in response.outputs.items()}


@keras_attn_export("keras_attn.export.client.classify_grpc")
def classify_grpc(
    server, model, examples, signature_name="classify", version=None, label=None, timeout=30.0
):
    """Calls TF Serving's gRPC `Classify`; `{"classes": (batch, classes), "scores": ...}`.

    Args:
        server: `host:port` of the gRPC API.
        model, examples, signature_name, version, label: as `grpc_classify_request`.
        timeout: seconds.

    Example:

    With a server running (`docker run` in docs/deployment.md):

    >>> from keras_attn.export.client import classify_grpc
    >>> classify_grpc("localhost:8500", "sentiment", [{"text": "A charming film."}])["classes"]
    array([['rotten', 'fresh']], dtype='<U6')
    """
    import grpc
    from tensorflow_serving.apis import prediction_service_pb2_grpc

    request = grpc_classify_request(model, examples, signature_name, version, label)
    with grpc.insecure_channel(server) as channel:
        response = prediction_service_pb2_grpc.PredictionServiceStub(channel).Classify(
            request, timeout=timeout
        )
    rows = response.result.classifications
    return {
        "classes": np.array([[c.label for c in row.classes] for row in rows]),
        "scores": np.array([[c.score for c in row.classes] for row in rows], "float32"),
    }


__all__ = [
    "classify_grpc",
    "grpc_classify_request",
    "grpc_predict_request",
    "parse_rest_response",
    "predict_grpc",
    "predict_rest",
    "rest_classify_body",
    "rest_predict_body",
    "rest_url",
]
