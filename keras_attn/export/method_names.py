"""Signature method names in `saved_model.pb`, which TF2's saver cannot set."""

PREDICT_METHOD = "tensorflow/serving/predict"
CLASSIFY_METHOD = "tensorflow/serving/classify"


def set_method_names(path, methods):
    """Sets signatures' `method_name` (TF2's saver always writes Predict's).

    TF Serving's Classify API refuses a signature whose method is not
    `tensorflow/serving/classify` (tensorflow#38081: `tf.saved_model.save` cannot
    set it), so the written `saved_model.pb` is edited and its fingerprint redone.
    """
    from tensorflow.core.protobuf import saved_model_pb2

    proto_file = path / "saved_model.pb"
    saved_model = saved_model_pb2.SavedModel.FromString(proto_file.read_bytes())
    for meta_graph in saved_model.meta_graphs:
        for name, method in methods.items():
            meta_graph.signature_def[name].method_name = method
    temporary = proto_file.with_suffix(".pb.tmp")
    temporary.write_bytes(saved_model.SerializeToString(deterministic=True))
    temporary.replace(proto_file)
    try:
        from tensorflow.python.saved_model import fingerprinting_utils
    except ImportError:  # pragma: no cover - the fingerprint is optional to loaders
        (path / "fingerprint.pb").unlink(missing_ok=True)
    else:
        fingerprinting_utils.write_fingerprint(str(path))
