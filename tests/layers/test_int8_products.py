"""The decoders' int8 products: Keras's int8 `Dense`/`EinsumDense` multiplied through
`row_products`' products and an int8 token table's logits through
`decoder_embedding.reverse_logits` compute what the layers' own calls compute, on one
row (multiplied as two) and on many, int8 inputs or weights only, every backend."""

import warnings

import keras
import numpy as np
import pytest
from keras.quantizers import Int8QuantizationConfig

from keras_attn.layers import row_products
from keras_attn.models import LlamaLanguageModel
from keras_attn.models.decoder_embedding import reverse_logits
from tests.helpers import ALL_BACKENDS, max_abs_diff, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

PROJECTIONS = {  # name: (layer, input shape, input_axes)
    "dense": (lambda: keras.layers.Dense(12, activation="gelu"), (2, 5, 8), 1),
    "query": (
        lambda: keras.layers.EinsumDense("abc,cde->abde", (None, 3, 4), bias_axes="de"),
        (2, 5, 8),
        1,
    ),
    "output": (
        lambda: keras.layers.EinsumDense("abcd,cde->abe", (None, 6), bias_axes="e"),
        (2, 5, 3, 4),
        2,
    ),
}


def _quantized(layer, weights_only):
    if weights_only:
        layer.quantize(None, config=Int8QuantizationConfig(activation_quantizer=None))
    else:
        layer.quantize("int8")
    return layer


@pytest.mark.parametrize("weights_only", [False, True])
@pytest.mark.parametrize("name", list(PROJECTIONS))
def test_int8_projections_equal_the_layers_own_calls(name, weights_only):
    make, shape, input_axes = PROJECTIONS[name]
    x = np.random.default_rng(0).normal(size=shape).astype("float32")
    layer = make()
    layer(x)
    _quantized(layer, weights_only)
    assert row_products._int8_kernel(layer, input_axes) is not None
    assert row_products.row_kernels([layer], input_axes)[0] is not None  # not its own call
    for inputs in (x, x[:1, :1]):  # many rows; one row (multiplied as two)
        ours = row_products.project(layer, inputs, input_axes=input_axes)
        assert max_abs_diff(ours, layer(inputs)) <= 1e-5
    layer.enable_lora(2)  # Keras's own call adds the adapters: left to it
    assert row_products._int8_kernel(layer, input_axes) is None
    assert row_products.row_kernels([layer], input_axes) is None


def test_int8_feedforward_equals_the_layers_own_calls():
    x = np.random.default_rng(1).normal(size=(2, 3, 8)).astype("float32")
    first, gate, second = (
        keras.layers.Dense(16),
        keras.layers.Dense(16, "silu"),
        keras.layers.Dense(8),
    )
    second(first(x) * gate(x))
    for layer in (first, gate, second):
        _quantized(layer, False)
    expected = second(gate(x) * first(x))
    assert max_abs_diff(row_products.feedforward(first, second, x, gate=gate), expected) <= 1e-5


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("weights_only", [False, True])
def test_int8_token_table_logits_equal_keras_reverse_call(tie, weights_only):
    model = LlamaLanguageModel(
        50, num_layers=1, num_heads=4, hidden_dim=16, intermediate_dim=32, tie_word_embeddings=tie
    )
    ids = np.random.default_rng(2).integers(1, 50, (2, 5)).astype("int32")
    float_logits = to_numpy(model(ids))
    with warnings.catch_warnings():  # layers Keras leaves float (norms) warn
        warnings.simplefilter("ignore")
        _quantized(model, weights_only)  # Keras's `Model.quantize`, in place
    table = model.token_embedding
    assert table.quantization_mode == "int8"
    hidden = np.random.default_rng(3).normal(size=(2, 5, 16)).astype("float32")
    for h in (hidden, hidden[:1, :1]):
        assert max_abs_diff(reverse_logits(table, h), table(h, reverse=True)) <= 1e-5
    assert max_abs_diff(model(ids), float_logits) <= 0.1  # int8 close to float


@pytest.mark.parametrize("weights_only", [False, True])
def test_a_transposed_int8_kernel_gives_what_the_kernel_gives(weights_only):
    """`int8_product(..., transposed=True)` on the `(out, in)` table (a tied embedding's)
    equals the product on the `(in, out)` kernel, one row and several, int8 inputs or
    weights only (the latter's branch is not reached by `reverse_logits` today)."""
    layer = keras.layers.Dense(6)
    x = np.random.default_rng(2).normal(size=(3, 8)).astype("float32")
    layer(x)
    _quantized(layer, weights_only)
    quantizer = None if weights_only else layer.inputs_quantizer
    kernel, scale = layer._kernel, layer.kernel_scale
    for rows in (x, x[:1]):
        plain = row_products.int8_product(rows, kernel, scale, quantizer)
        table = keras.ops.transpose(kernel)
        turned = row_products.int8_product(rows, table, scale, quantizer, transposed=True)
        assert max_abs_diff(turned, plain) <= 1e-5
        assert max_abs_diff(plain, to_numpy(layer(rows)) - to_numpy(layer.bias)) <= 1e-5
