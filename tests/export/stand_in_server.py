"""A stand-in for TF Serving's model server, for tests: its REST and gRPC Predict and
Classify APIs, as documented, answered from a SavedModel loaded with TensorFlow.

TF Serving's binary cannot be installed on the CI machine; this answers requests the
way it would, so that the clients (ours, curl) are tested end to end. It is not a
server for real use.
"""

import base64
import http.server
import json
import pathlib
import re
import threading
from concurrent import futures

import grpc
import tensorflow as tf
import tensorflow_text  # noqa: F401 - its ops, which the stock server links
from tensorflow_serving.apis import classification_pb2, predict_pb2, prediction_service_pb2_grpc

REST_PATH = re.compile(
    r"^/v1/models/(?P<name>[^/:]+)(?:/versions/(?P<version>\d+))?:(?P<verb>predict|classify)$"
)


def _json_value(value):
    return value.decode("utf-8") if isinstance(value, bytes) else value


def _from_json(value):
    """A JSON input value: `{"b64": ...}` objects become bytes."""
    if isinstance(value, dict) and set(value) == {"b64"}:
        return base64.b64decode(value["b64"])
    if isinstance(value, list):
        return [_from_json(v) for v in value]
    return value


def _example(features):
    """A REST Classify example (`{"text": "..."}`) as a serialized `tf.Example`."""
    feature = {}
    for key, value in features.items():
        values = value if isinstance(value, list) else [value]
        if all(isinstance(v, str) for v in values):
            feature[key] = tf.train.Feature(
                bytes_list=tf.train.BytesList(value=[v.encode() for v in values])
            )
        elif all(isinstance(v, int) for v in values):
            feature[key] = tf.train.Feature(int64_list=tf.train.Int64List(value=values))
        else:
            feature[key] = tf.train.Feature(float_list=tf.train.FloatList(value=values))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


class StandInServer:
    """Serves the versions of `base/<name>/` on 127.0.0.1: `rest_port`, `grpc_port`
    (free ports unless given, e.g. TF Serving's own 8501 and 8500)."""

    def __init__(self, base, name, rest_port=0, grpc_port=0):
        folder = pathlib.Path(base) / name
        self.name = name
        self.rest_port, self.grpc_port = rest_port, grpc_port
        self.versions = {
            int(p.name): tf.saved_model.load(str(p)) for p in folder.iterdir() if p.name.isdigit()
        }
        if not self.versions:
            raise ValueError(f"no numbered version under {folder}")

    def signature(self, name, version, signature_name):
        if name != self.name:
            raise KeyError(f"Servable not found for request: Latest({name})")
        loaded = self.versions[int(version) if version else max(self.versions)]
        return loaded.signatures[signature_name or "serving_default"]

    def predict(self, name, version, signature_name, inputs):
        function = self.signature(name, version, signature_name)
        specs = function.structured_input_signature[1]
        tensors = {k: tf.constant(v, dtype=specs[k].dtype) for k, v in inputs.items()}
        return {k: v.numpy() for k, v in function(**tensors).items()}

    def classify(self, name, version, signature_name, examples):
        outputs = self.signature(name, version, signature_name or "classify")(
            inputs=tf.constant(examples)
        )
        return outputs["classes"].numpy(), outputs["scores"].numpy()

    # REST: https://www.tensorflow.org/tfx/serving/api_rest
    def _rest_handler(self):
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                match = REST_PATH.match(self.path)
                try:
                    if not match:
                        raise KeyError(f"Malformed request: POST {self.path}")
                    body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                    name, version = match["name"], match["version"]
                    if match["verb"] == "classify":
                        examples = [_example(e) for e in body["examples"]]
                        classes, scores = server.classify(
                            name, version, body.get("signature_name"), examples
                        )
                        answer = {
                            "results": [
                                [
                                    [_json_value(c), float(s)]
                                    for c, s in zip(row_c, row_s, strict=True)
                                ]
                                for row_c, row_s in zip(classes, scores, strict=True)
                            ]
                        }
                    elif "instances" in body:
                        rows = body["instances"]
                        inputs = {k: _from_json([row[k] for row in rows]) for k in rows[0]}
                        outputs = server.predict(name, version, body.get("signature_name"), inputs)
                        size = len(next(iter(outputs.values())))
                        answer = {
                            "predictions": [
                                {k: _json_value_tree(_tolist(v[i])) for k, v in outputs.items()}
                                for i in range(size)
                            ]
                        }
                    else:
                        inputs = {k: _from_json(v) for k, v in body["inputs"].items()}
                        outputs = server.predict(name, version, body.get("signature_name"), inputs)
                        answer = {
                            "outputs": {k: _json_value_tree(v.tolist()) for k, v in outputs.items()}
                        }
                    status = 200
                except Exception as error:  # noqa: BLE001 - reported as TF Serving does, in "error"
                    answer, status = {"error": str(error)}, 400
                data = json.dumps(answer).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        return Handler

    def _prediction_service(self):
        server = self

        class PredictionService(prediction_service_pb2_grpc.PredictionServiceServicer):
            def Predict(self, request, context):  # noqa: N802 - gRPC's name
                spec = request.model_spec
                inputs = {k: tf.make_ndarray(v) for k, v in request.inputs.items()}
                outputs = server.predict(
                    spec.name, spec.version.value or None, spec.signature_name, inputs
                )
                response = predict_pb2.PredictResponse()
                response.model_spec.CopyFrom(spec)
                for key, value in outputs.items():
                    response.outputs[key].CopyFrom(tf.make_tensor_proto(value))
                return response

            def Classify(self, request, context):  # noqa: N802
                spec = request.model_spec
                examples = [e.SerializeToString() for e in request.input.example_list.examples]
                classes, scores = server.classify(
                    spec.name, spec.version.value or None, spec.signature_name, examples
                )
                response = classification_pb2.ClassificationResponse()
                for row_classes, row_scores in zip(classes, scores, strict=True):
                    row = response.result.classifications.add()
                    for label, score in zip(row_classes, row_scores, strict=True):
                        row.classes.add(label=_json_value(label), score=score)
                return response

        return PredictionService()

    def __enter__(self):
        self.http = http.server.ThreadingHTTPServer(
            ("127.0.0.1", self.rest_port), self._rest_handler()
        )
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.grpc = grpc.server(futures.ThreadPoolExecutor(4))
        prediction_service_pb2_grpc.add_PredictionServiceServicer_to_server(
            self._prediction_service(), self.grpc
        )
        try:
            port = self.grpc.add_insecure_port(f"127.0.0.1:{self.grpc_port}")
        except RuntimeError:
            port = 0
        if not port:
            self.http.shutdown()
            self.http.server_close()
            raise OSError(f"could not listen for gRPC on 127.0.0.1:{self.grpc_port} (in use?)")
        self.grpc_port = port
        self.grpc.start()
        self.rest_port = self.http.server_address[1]
        return self

    def __exit__(self, *exc):
        self.http.shutdown()
        self.http.server_close()
        self.grpc.stop(None)


def _tolist(value):
    return value.tolist() if hasattr(value, "tolist") else value


def _json_value_tree(value):
    if isinstance(value, list):
        return [_json_value_tree(v) for v in value]
    return _json_value(value)
