"""`onnx_graph.simplified`: tf2onnx's layer norms, exact GELUs and sequence `Dense`
layers rewritten as ONNX's `LayerNormalization`, the erf GELU and one `MatMul`; the
model computes what it computed (padding included)."""

import collections

import numpy as np

from keras_attn.export.onnx_export import model_graph
from keras_attn.models import BertBackbone, BertClassifier


def test_the_simplified_graph_computes_the_model_with_fused_operators(tmp_path):
    import onnx
    import onnxruntime

    backbone = BertBackbone.from_size("tiny", vocabulary_size=300, max_sequence_length=32)
    model = BertClassifier(backbone, num_classes=3)
    for weight in model.weights:  # no unit norms or zero biases hiding a swapped tensor
        weight.assign(np.random.default_rng(len(weight.path)).normal(0, 0.3, weight.shape))
    proto = model_graph(model)
    onnx.checker.check_model(proto)
    counts = collections.Counter(node.op_type for node in proto.graph.node)
    # Two layers: two norms each and the embeddings'; one GELU each; six sequence
    # Dense layers reduced to a MatMul each (no Tensordot reshapes left).
    assert counts["LayerNormalization"] == 5
    assert counts["Erf"] == 2
    assert not {"GlobalAveragePool", "Reciprocal", "Sqrt"} & set(counts)
    assert not [n for n in proto.graph.node if "Tensordot" in n.name and n.op_type != "MatMul"]
    # The projections reshape to constant shapes: one Shape is left (the positions').
    assert counts["Shape"] == 1 and counts["Reshape"] <= 12
    assert len(proto.graph.node) < 130  # tf2onnx wrote about 250
    onnx.save(proto, str(tmp_path / "model.onnx"))
    options = onnxruntime.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"), options)
    # ONNX Runtime fuses each feed-forward product's bias and GELU (`BiasGelu`).
    optimized = collections.Counter(
        n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node
    )
    assert optimized["BiasGelu"] == 2 and not optimized["Erf"]
    rng = np.random.default_rng(0)
    inputs = {
        "token_ids": rng.integers(5, 300, (3, 19)).astype("int32"),
        "segment_ids": rng.integers(0, 2, (3, 19)).astype("int32"),
        "padding_mask": np.ones((3, 19), "int32"),
    }
    inputs["padding_mask"][1, 7:] = 0
    (logits,) = session.run(None, inputs)
    np.testing.assert_allclose(logits, np.asarray(model(inputs)), atol=1e-5)
