"""bfloat16 SavedModels (`precision_copy`, `export_saved_model(precision=...)`,
`keras-attn export --precision`): every float layer in the precision asked for, float32
answers served without keras, with and without oneDNN, and what is refused."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorflow.python.util import _pywrap_util_port

from keras_attn.cli import export as export_command
from keras_attn.cli import main as cli
from keras_attn.data import WordPieceTokenizer
from keras_attn.export import export_saved_model, precision_copy, quantization, quantized_copy
from keras_attn.models import GenerationConfig, GPTLanguageModel
from tests.export.test_onednn_int8 import VOCABULARY, graph_ops, served, tiny_classifier
from tests.export.test_saved_model import (
    GENERATION_VOCABULARY,
    SMALL_DECODER,
    _assert_serves_as_generated,
)
from tests.helpers import serving_session

X = {
    "token_ids": np.array([[2, 5, 7, 8, 3, 0]], "int32"),
    "segment_ids": np.zeros((1, 6), "int32"),
    "padding_mask": np.array([[1, 1, 1, 1, 1, 0]], "int32"),
}


def test_precision_copy_puts_every_float_layer_in_bfloat16_and_leaves_the_model():
    model = tiny_classifier()
    floats = np.asarray(model(X))
    half = precision_copy(model, "bfloat16")
    assert type(half) is type(model)
    kinds = {v.path: str(v.dtype) for v in half.backbone.weights}
    assert set(kinds.values()) == {"bfloat16"}, kinds
    assert {str(v.dtype) for v in model.weights} == {"float32"}  # the model as it was
    np.testing.assert_allclose(np.asarray(half(X), "float32"), floats, atol=0.05)
    assert np.abs(np.asarray(half(X), "float32") - floats).max() > 0  # not float32
    # And back: "float32" gives a float32 copy of a bfloat16 model.
    again = precision_copy(half, "float32")
    assert {str(v.dtype) for v in again.weights} == {"float32"}


def test_precision_copy_refuses_unknown_precisions_int8_layers_and_unbuilt_models():
    model = tiny_classifier()
    model(X)
    with pytest.raises(ValueError, match=r"`precision`.*'float32', 'bfloat16'.*'float16'"):
        precision_copy(model, "float16")
    with pytest.raises(ValueError, match="float model.*int8 layers"):
        precision_copy(quantized_copy(model), "bfloat16")
    with pytest.raises(ValueError, match="built model"):
        precision_copy(keras.Sequential([keras.layers.Dense(2)]), "bfloat16")
    tokenizer = WordPieceTokenizer(VOCABULARY, sequence_length=16)
    with pytest.raises(ValueError, match="not both.*quantize='int8', precision='bfloat16'"):
        export_saved_model(model, tokenizer, "unused/m/1", quantize="int8", precision="bfloat16")


def test_the_command_offers_what_the_library_takes(tmp_path, capsys):
    assert export_command.PRECISIONS == quantization.PRECISIONS
    assert export_command.QUANTIZE == quantization.SAVED_MODEL_QUANTIZATION
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("model: {sequence_length: 16}\n")
    for extra in (["--format", "onnx"], ["--quantize", "int8"]):
        with pytest.raises(SystemExit):
            cli.main(["export", str(run), "--precision", "bfloat16", *extra])
        error = capsys.readouterr().err.strip().splitlines()
        assert error[-1].startswith("error: --precision is for float SavedModels"), error
        assert extra[0] in error[-1]
    assert not (tmp_path / "saved_models").exists()


@pytest.mark.slow
def test_bfloat16_saved_model_serves_float32_without_keras_with_and_without_onednn(tmp_path):
    model = tiny_classifier()
    tokenizer = WordPieceTokenizer(VOCABULARY, sequence_length=16)
    texts = ["good film .", "bad film", "", "good good bad . film film film good"]
    paths = {
        precision: export_saved_model(
            model, tokenizer, tmp_path / str(precision) / "1", precision=precision, check=True
        )
        for precision in (None, "bfloat16")
    }
    serving = tf.saved_model.load(str(paths["bfloat16"])).signatures["serving_default"]
    assert serving.structured_outputs["probabilities"].dtype == tf.float32
    ops = graph_ops(serving)
    assert ops.count("MatMul") > 0
    nodes = serving.graph.as_graph_def()
    products = [
        n.attr["T"].type
        for f in nodes.library.function
        for n in f.node_def
        if n.op == "MatMul" and "logits" not in n.name
    ]
    assert set(products) == {tf.bfloat16.as_datatype_enum}, products
    answers = {p: np.array(served(path, texts)["probabilities"]) for p, path in paths.items()}
    assert np.abs(answers["bfloat16"] - answers[None]).max() < 0.02
    assert np.abs(answers["bfloat16"] - answers[None]).max() > 0
    assert served(paths["bfloat16"], [])["probabilities"] == []  # an empty batch
    # A TensorFlow without oneDNN (or told to leave it off) computes the same answers.
    off = served(paths["bfloat16"], texts, TF_ENABLE_ONEDNN_OPTS="0")
    np.testing.assert_allclose(off["probabilities"], answers["bfloat16"], atol=0.01)
    # 420 real tokens: the layer norms take their fused form (`ServingPlan.normalize`),
    # oneDNN's `_MklLayerNorm` or, without oneDNN, TensorFlow's `FusedBatchNormV3`.
    many = {
        onednn: np.array(served(paths["bfloat16"], texts * 20, **env)["probabilities"])
        for onednn, env in (("on", {}), ("off", {"TF_ENABLE_ONEDNN_OPTS": "0"}))
    }
    np.testing.assert_allclose(many["off"], many["on"], atol=0.01)
    np.testing.assert_allclose(many["on"][:4], answers["bfloat16"], atol=0.01)
    # TF Serving's way (a Session, Grappler on): two `_MklLayerNorm` a layer with oneDNN.
    with serving_session(paths["bfloat16"]) as run:
        ops = [node.op for node in run(texts * 20)[1]]
    layers = len(model.backbone.transformer_layers)
    onednn = _pywrap_util_port.IsMklEnabled()
    assert ops.count("_MklLayerNorm") == (2 * layers if onednn else 0)
    assert ops.count("FusedBatchNormV3") == (0 if onednn else 2 * layers)
    sizes = {
        p: sum(f.stat().st_size for f in (path / "variables").iterdir())
        for p, path in paths.items()
    }
    assert sizes["bfloat16"] < 0.6 * sizes[None], sizes


@pytest.mark.slow
def test_bfloat16_language_model_generates_what_its_copy_generates(tmp_path):
    """The decoding loop in bfloat16 (caches, logits, argmax) serves the tokens the
    bfloat16 copy generates in memory."""
    tokenizer = WordPieceTokenizer(GENERATION_VOCABULARY, sequence_length=16)
    model = GPTLanguageModel(len(GENERATION_VOCABULARY), **SMALL_DECODER, max_sequence_length=12)
    generation = GenerationConfig(max_length=10)
    path = export_saved_model(
        model, tokenizer, tmp_path / "lm" / "1", precision="bfloat16", generation=generation
    )
    half = precision_copy(model, "bfloat16")
    _assert_serves_as_generated(
        path, tokenizer, lambda ids: half.generate(ids, 10, jit_compile=False)
    )
