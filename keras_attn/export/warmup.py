"""TF Serving's warm-up records: one `PredictionLog` per signature, replayed at load time."""

import pathlib

import numpy as np
import tensorflow as tf

from keras_attn.api_export import keras_attn_export

WARMUP_FILE = "tf_serving_warmup_requests"


def _example(features):
    """A `tf.Example` of string features (a Classify request's input)."""
    return tf.train.Example(
        features=tf.train.Features(
            feature={
                key: tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[str(value).encode("utf-8")])
                )
                for key, value in features.items()
            }
        )
    )


@keras_attn_export("keras_attn.export.write_warmup_requests")
def write_warmup_requests(path, requests, model_name, classify=()):
    """Writes `assets.extra/tf_serving_warmup_requests`: TF Serving's warm-up records.

    One `PredictionLog` per signature, a TFRecord file TF Serving replays when it
    loads the version (a record that fails fails the load).

    Args:
        path: the SavedModel version folder.
        requests: `{signature name: {input name: array-like}}`; a Classify
            signature's value is `{"inputs": [feature dicts]}` (tf.Example features).
        model_name: the `model_spec.name` of the requests.
        classify: the names of Classify signatures.

    Returns:
        The records file, a `pathlib.Path`.

    Example:

    >>> import pathlib, tempfile
    >>> from keras_attn.export import write_warmup_requests
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> write_warmup_requests(folder, {"serving_default": {"text": ["hello"]}}, "m").name
    'tf_serving_warmup_requests'
    """
    from tensorflow_serving.apis import (
        classification_pb2,
        input_pb2,
        model_pb2,
        predict_pb2,
        prediction_log_pb2,
    )

    records = []
    for name, inputs in requests.items():
        spec = model_pb2.ModelSpec(name=model_name, signature_name=name)
        if name in classify:
            request = classification_pb2.ClassificationRequest(
                model_spec=spec,
                input=input_pb2.Input(
                    example_list=input_pb2.ExampleList(
                        examples=[_example(features) for features in inputs["inputs"]]
                    )
                ),
            )
            records.append(
                prediction_log_pb2.PredictionLog(
                    classify_log=prediction_log_pb2.ClassifyLog(request=request)
                )
            )
        else:
            request = predict_pb2.PredictRequest(model_spec=spec)
            for key, value in inputs.items():
                value = np.asarray(value)
                dtype = tf.string if value.dtype.kind in "USO" else tf.as_dtype(value.dtype)
                request.inputs[key].CopyFrom(tf.make_tensor_proto(value, dtype=dtype))
            records.append(
                prediction_log_pb2.PredictionLog(
                    predict_log=prediction_log_pb2.PredictLog(request=request)
                )
            )
    folder = pathlib.Path(path) / "assets.extra"
    folder.mkdir(parents=True, exist_ok=True)
    with tf.io.TFRecordWriter(str(folder / WARMUP_FILE)) as writer:
        for record in records:
            writer.write(record.SerializeToString())
    return folder / WARMUP_FILE
