"""int8 SavedModels on oneDNN's quantized products: the product against float32, which
layers it replaces, the export's graph and answers, and what a server with TensorFlow's oneDNN
rewrites off does with it (answers the same)."""

import json
import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from keras_attn.data import WordPieceTokenizer
from keras_attn.export import export_saved_model
from keras_attn.export.onednn_int8 import (
    PRODUCT_OP,
    Int8Product,
    _contracted_axes,
    onednn_int8_available,
)
from keras_attn.export.quantization import embeddings_only, int8_products_for
from keras_attn.export.serving_plan import serving_copy
from keras_attn.models import BertBackbone, BertClassifier
from tests.helpers import TF_SERVING_PREAMBLE, script_answer

needs_onednn = pytest.mark.skipif(
    not onednn_int8_available(), reason="this TensorFlow runs no oneDNN int8 product"
)
VOCABULARY = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "good", "bad", "film", "."]
PRODUCT = PRODUCT_OP  # "_QuantizedMatMul"


@needs_onednn
@pytest.mark.parametrize("shift", [0.0, 3.0, -2.0])
def test_int8_product_against_float32(shift):
    rng = np.random.default_rng(0)
    rows = (rng.normal(size=(40, 48)) + shift).astype("float32")
    kernel = (rng.normal(size=(48, 24)) * rng.uniform(0.01, 1.0, 24)).astype("float32")
    kernel[:, 5] = 0.0  # a zero column gives its bias
    bias = rng.normal(size=24).astype("float32")
    got = Int8Product(kernel, bias)(tf.constant(rows)).numpy()
    expected = rows @ kernel + bias
    # Rounding of both operands: each column's error within a few of its quanta.
    step = np.abs(rows).max() * np.abs(kernel).sum(0) / 127 + 1e-6
    assert np.all(np.abs(got - expected) < 2 * step), np.abs(got - expected).max()
    np.testing.assert_allclose(got[:, 5], bias[5], rtol=1e-6)
    assert np.abs(got - expected).max() > 0  # int8, not a float path


@needs_onednn
def test_int8_product_of_constant_rows_and_no_bias():
    kernel = np.arange(12, dtype="float32").reshape(3, 4) - 5
    rows = np.full((2, 3), 0.75, "float32")  # a range of zero width
    got = Int8Product(kernel)(tf.constant(rows)).numpy()
    np.testing.assert_allclose(got, rows @ kernel, atol=0.05)


@needs_onednn
def test_int8_product_of_empty_zero_and_nan_rows():
    product = Int8Product(np.ones((4, 3), "float32"), np.array([1.0, 2.0, 3.0], "float32"))
    assert product(tf.zeros((0, 4))).shape == (0, 3)
    rows = tf.constant([[0.0, 0.0, 0.0, 0.0], [np.nan, 1.0, 2.0, 3.0]])
    got = product(rows).numpy()
    np.testing.assert_allclose(got[0], [1.0, 2.0, 3.0])
    assert np.isnan(got[1]).all()  # as float32's product: not a finite made-up answer


def test_int8_product_refuses_bad_kernels_and_biases():
    with pytest.raises(ValueError, match=r"2-D kernel.*\(4, 2, 3\)"):
        Int8Product(np.zeros((4, 2, 3), "float32"))
    with pytest.raises(ValueError, match=r"bias of shape \(3,\).*\(2,\)"):
        Int8Product(np.zeros((4, 3), "float32"), np.zeros(2, "float32"))
    kernel = np.zeros((4, 3), "float32")
    kernel[1, 2] = np.nan
    with pytest.raises(ValueError, match="finite weights"):
        Int8Product(kernel)


def test_contracted_axes_of_the_attention_projections():
    assert _contracted_axes(keras.layers.Dense(3)) == 1
    query = keras.layers.EinsumDense("abc,cde->abde", output_shape=(None, 2, 4))
    output = keras.layers.EinsumDense("abcd,cde->abe", output_shape=(None, 8))
    assert (_contracted_axes(query), _contracted_axes(output)) == (1, 2)
    # The contracted axis last in the kernel: not a product of rows by a matrix.
    assert _contracted_axes(keras.layers.EinsumDense("abc,dc->abd", output_shape=(None, 4))) is None


def test_the_mode_decides_the_products():
    assert int8_products_for(None) is False
    assert int8_products_for("int8-portable") is False
    assert int8_products_for("int8") is onednn_int8_available()
    with pytest.raises(ValueError, match=r"`quantize`.*'int8-portable'.*quantize='int4'"):
        int8_products_for("int4")
    assert embeddings_only(keras.layers.Embedding(4, 2)) and not embeddings_only(
        keras.layers.Dense(2)
    )


def tiny_classifier():
    keras.utils.set_random_seed(0)
    return BertClassifier(
        BertBackbone.from_size("tiny", vocabulary_size=len(VOCABULARY), max_sequence_length=16),
        num_classes=2,
    )


def graph_ops(function):
    graph = function.graph.as_graph_def()
    nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
    return [node.op for node in nodes]


def test_only_the_block_projections_are_replaced_and_only_inside():
    model = tiny_classifier()
    x = {
        "token_ids": np.array([[2, 5, 7, 8, 3, 0]], "int32"),
        "segment_ids": np.zeros((1, 6), "int32"),
        "padding_mask": np.array([[1, 1, 1, 1, 1, 0]], "int32"),
    }
    inside = tf.function(serving_copy(model, onednn_int8=True)).get_concrete_function(x)
    after = tf.function(model).get_concrete_function(x)  # the model itself is left alone
    # Two blocks of four attention projections and two feed-forward products; the
    # pooler and the head keep their float products.
    assert graph_ops(inside).count(PRODUCT) == 12
    assert PRODUCT not in graph_ops(after)
    if onednn_int8_available():
        floats = np.asarray(model(x))
        assert np.abs(inside(x).numpy() - floats).max() < 0.05


def test_int8_products_bring_onednn_layer_norms_into_a_served_graph():
    """A serving copy with oneDNN's int8 products declares them oneDNN's: the blocks'
    layer norms take oneDNN's fused form on many rows (`ServingPlan.normalize`,
    a `FusedBatchNormV3` in a branch taken from `FUSED_NORM_ROWS` rows on); a float32
    graph without them keeps Keras's form everywhere."""
    model = tiny_classifier()
    x = {
        "token_ids": np.array([[2, 5, 7, 8, 3]], "int32"),
        "segment_ids": np.zeros((1, 5), "int32"),
        "padding_mask": np.ones((1, 5), "int32"),
    }

    def served_ops(onednn_int8):
        copy = serving_copy(model, onednn_int8=onednn_int8)
        return graph_ops(tf.function(copy).get_concrete_function(x))

    assert served_ops(True).count("FusedBatchNormV3") == 2 * 2  # 2 blocks
    assert "FusedBatchNormV3" not in served_ops(False)


# A SavedModel served as TF Serving has it; prints the probabilities, or the error's
# first line.
SERVE = (
    TF_SERVING_PREAMBLE
    + """
serve = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
try:
    out = serve(text=tf.constant(json.loads(sys.argv[2]), tf.string))
    print(json.dumps({"probabilities": out["probabilities"].numpy().tolist()}))
except tf.errors.OpError as error:
    print(json.dumps({"error": str(error).splitlines()[0]}))
"""
)


def served(path, texts, **env):
    """The served answer; with `env` (TensorFlow's settings) from a process of its own,
    else from the worker's TensorFlow-only one."""
    return script_answer(SERVE, path, json.dumps(texts), env={**os.environ, **env} if env else None)


@needs_onednn
@pytest.mark.slow
def test_int8_saved_model_serves_without_keras_with_and_without_onednn_rewrites(tmp_path):
    model = tiny_classifier()
    tokenizer = WordPieceTokenizer(VOCABULARY, sequence_length=16)
    texts = ["good film .", "bad film", "", "good good bad . film film film good"]
    paths = {
        quantize: export_saved_model(
            model, tokenizer, tmp_path / str(quantize) / "1", quantize=quantize, check=True
        )
        for quantize in (None, "int8", "int8-portable")
    }
    loaded = tf.saved_model.load(str(paths["int8"]))
    ops = graph_ops(loaded.signatures["serving_default"])
    assert ops.count(PRODUCT) == 12
    portable_ops = graph_ops(
        tf.saved_model.load(str(paths["int8-portable"])).signatures["serving_default"]
    )
    assert PRODUCT not in portable_ops
    answers = {q: np.array(served(path, texts)["probabilities"]) for q, path in paths.items()}
    assert served(paths["int8"], [])["probabilities"] == []  # an empty batch
    for quantize in ("int8", "int8-portable"):
        assert np.abs(answers[quantize] - answers[None]).max() < 0.02, quantize
    # The embeddings are int8 too: the variables are about a third of float32's.
    sizes = {
        q: sum(f.stat().st_size for f in (p / "variables").iterdir()) for q, p in paths.items()
    }
    assert sizes["int8"] < 0.4 * sizes[None], sizes
    # With TensorFlow's oneDNN rewrites off the op still runs its own (oneDNN) kernel:
    # the same answers; the portable export answers too.
    off = served(paths["int8"], texts, TF_ENABLE_ONEDNN_OPTS="0")
    np.testing.assert_allclose(off["probabilities"], answers["int8"], atol=1e-6)
    portable_off = served(paths["int8-portable"], texts, TF_ENABLE_ONEDNN_OPTS="0")
    np.testing.assert_allclose(portable_off["probabilities"], answers["int8-portable"], atol=1e-4)


@needs_onednn
def test_the_product_takes_each_calls_scales_and_bias_never_a_cached_primitives():
    """TensorFlow keys its cache of oneDNN primitives on the weight ranges' buffers: fed
    ranges and biases, new each call and often at a freed buffer's address, must each
    give their own answer (the scales are arguments of every call, not of the cached
    primitive)."""
    from keras_attn.export.onednn_int8 import _fused_int8_product

    rng = np.random.default_rng(0)
    graph = tf.Graph()
    with graph.as_default():
        rows = tf.compat.v1.placeholder(tf.quint8, (None, 16))
        kernel = tf.compat.v1.placeholder(tf.qint8, (16, 8))
        bias, low, high = (tf.compat.v1.placeholder(tf.float32, (8,)) for _ in range(3))
        product = _fused_int8_product(
            [rows, kernel, bias, tf.constant(0.0), tf.constant(2.0), low, high],
            frozen_weights=False,
        )
    quantized = rng.integers(0, 256, (5, 16)).astype(np.uint8)
    weights = rng.integers(-127, 128, (16, 8)).astype(np.int8)
    sums = quantized.astype(np.float64) * (2 / 255) @ weights
    with tf.compat.v1.Session(graph=graph) as session:
        for _ in range(20):
            step = rng.uniform(0.001, 1.0, 8).astype("float32")
            offsets = rng.normal(size=8).astype("float32")
            feed = {rows: quantized, kernel: weights, bias: offsets}
            got = session.run(product, {**feed, low: -127 * step, high: 127 * step})
            np.testing.assert_allclose(got, sums * step + offsets, rtol=1e-5, atol=1e-5)


@needs_onednn
@pytest.mark.slow  # 12 s: an export with its decoding loop, served in a process of its own
def test_int8_language_model_serves_the_tokens_its_int8_products_generate(tmp_path):
    """`quantize="int8"` on a language model: the decoding loop served without keras
    multiplies on oneDNN's int8 products (one row a step) and gives the tokens the model
    generates in memory with the same products (its serving copy) and int8 embeddings."""
    from keras_attn.export.quantization import quantized_copy
    from keras_attn.models import GenerationConfig, GPTLanguageModel
    from tests.export.test_saved_model import (
        GENERATION_VOCABULARY,
        SMALL_DECODER,
        _assert_serves_as_generated,
    )

    tokenizer = WordPieceTokenizer(GENERATION_VOCABULARY, sequence_length=16)
    keras.utils.set_random_seed(3)
    model = GPTLanguageModel(len(GENERATION_VOCABULARY), **SMALL_DECODER, max_sequence_length=12)
    path = export_saved_model(
        model,
        tokenizer,
        tmp_path / "lm" / "1",
        quantize="int8",
        generation=GenerationConfig(max_length=10),
    )
    loaded = tf.saved_model.load(str(path))
    assert PRODUCT in graph_ops(loaded.signatures["serving_default"])
    copy = serving_copy(quantized_copy(model, filters=embeddings_only), True, owned=True)

    def generate(ids):
        return copy.generate(ids, 10, jit_compile=False)

    _assert_serves_as_generated(path, tokenizer, generate)


@needs_onednn
def test_frozen_weights_answer_as_read_ones_at_every_row_count_and_stay_the_first():
    """`Int8Product`'s op keeps its first call's weights in oneDNN's layout: at every row
    count (a served request's length, where oneDNN may ask for another layout and the
    kernel reorders what it is given) it answers to the bit as the op that reads its
    weights on every call; and a kernel fed anew after the first call is not read,
    which is why only weights that never change go in frozen."""
    from keras_attn.export.onednn_int8 import _fused_int8_product

    rng = np.random.default_rng(1)
    graph = tf.Graph()
    with graph.as_default():
        rows = tf.compat.v1.placeholder(tf.quint8, (None, 96))
        kernel = tf.compat.v1.placeholder(tf.qint8, (96, 160))
        step = tf.constant(rng.uniform(0.001, 0.1, 160).astype("float32"))
        inputs = [rows, kernel, tf.constant(rng.normal(size=160).astype("float32"))]
        inputs += [tf.constant(0.0), tf.constant(2.0), -127 * step, 127 * step]
        frozen = _fused_int8_product(inputs)
        read = _fused_int8_product(inputs, frozen_weights=False)
    weights = rng.integers(-127, 128, (96, 160)).astype(np.int8)
    with tf.compat.v1.Session(graph=graph) as session:
        for count in [1, 2, 7, 16, 25, 33, 64, 1440, 3, 1]:
            feed = {rows: rng.integers(0, 256, (count, 96)).astype(np.uint8), kernel: weights}
            got, expected = session.run([frozen, read], feed)
            np.testing.assert_array_equal(got, expected)
        feed[kernel] = -weights
        got, expected = session.run([frozen, read], feed)
        assert np.abs(got - expected).max() > 1.0  # the frozen op kept its first weights


def test_a_tensorflow_without_the_ops_builder_has_no_onednn_int8(monkeypatch):
    """The op is built through a private TensorFlow function: where an upgrade moves it,
    the probe says no (the export then serves Keras's int8 layers) instead of failing."""
    from tensorflow.python.framework import op_def_library

    monkeypatch.delattr(op_def_library, "_apply_op_helper")
    assert onednn_int8_available.__wrapped__() is False
