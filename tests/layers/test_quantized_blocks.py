"""Weights kept in GGUF's blocks: every format made float exactly as `gguf`'s reference
dequantiser does, products equal to the float ones (on JAX's CPU backend through the
custom call), `BlockDense` / `BlockEmbedding` and a decoder block's `kernel_formats`
equal to float layers holding the same weights, configs and `.keras` files round-tripped,
bad arguments refused by name."""

import shutil

import keras
import numpy as np
import pytest
from gguf import GGMLQuantizationType, quants

from keras_attn.layers import BlockDense, BlockEmbedding, TransformerDecoderBlock
from keras_attn.layers.quantized_blocks import FORMATS, block_product, dequantize, native
from keras_attn.layers.quantized_blocks.block_formats import (
    check_kernel_formats,
    non_finite_scales,
    repack,
)
from keras_attn.layers.quantized_blocks.block_layers import NATIVE_ROWS
from tests.helpers import ALL_BACKENDS, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)


def random_blocks(name, rows, columns, seed=0):
    """Random bytes in format `name` with small finite half-precision scales (and, for
    Q4_1 / Q5_1 / Q4_K, minimums), every other bit pattern as it falls."""
    f = FORMATS[name]
    rng = np.random.default_rng(seed)
    blocks = rng.integers(0, 256, (rows, columns // f.weights, f.bytes), dtype=np.uint8)
    scales = rng.uniform(-0.05, 0.05, (rows, columns // f.weights, 2)).astype(np.float16)
    scales = scales.view(np.uint8).reshape(rows, -1, 4)
    if name == "Q6_K":
        blocks[..., 208:] = scales[..., :2]
    else:
        blocks[..., :4] = scales
    return blocks.reshape(rows, -1)


def reference(blocks, name, columns):
    return quants.dequantize(blocks, GGMLQuantizationType[name]).reshape(-1, columns)


@pytest.mark.parametrize("name", sorted(n for n, f in FORMATS.items() if not f.by_eights))
def test_every_format_dequantises_as_ggufs_reference(name):
    blocks = random_blocks(name, 6, 512)
    np.testing.assert_array_equal(
        to_numpy(dequantize(blocks, name, 512)), reference(blocks, name, 512)
    )


GGUF_FORMATS = sorted(name for name, f in FORMATS.items() if not f.by_eights)


@pytest.mark.parametrize("name", ["Q4_0", "Q4_1"])
def test_rows_repacked_by_eights_hold_the_same_weights(name):
    blocks = random_blocks(name, 16, 256)
    packed, packed_name = repack(blocks, name)
    assert packed_name == name + "x8" and packed.shape == blocks.shape
    assert not np.array_equal(packed, blocks)
    got = to_numpy(dequantize(packed, packed_name, 256))
    np.testing.assert_array_equal(got, reference(blocks, name, 256))
    with pytest.raises(ValueError, match="by eights"):
        repack(blocks[:12], name)


@pytest.mark.parametrize("name", sorted(FORMATS))
@pytest.mark.parametrize("rows", [7, 80])
def test_block_product_equals_the_float_product(name, rows):
    f = FORMATS[name]
    blocks = random_blocks(name.removesuffix("x8"), 72, 512, seed=rows)
    weights = reference(blocks, name.removesuffix("x8"), 512)
    if f.by_eights:
        blocks = repack(blocks, name.removesuffix("x8"))[0]
    x = np.random.default_rng(1).standard_normal((rows, 512)).astype("float32")
    if native.int8() and (f.by_eights or rows <= NATIVE_ROWS):
        x = int8_activations(x)  # what the custom call multiplies by, as llama.cpp does
    expected = x.astype("float64") @ weights.T.astype("float64")
    got = to_numpy(block_product(keras.ops.convert_to_tensor(x), blocks, name))
    np.testing.assert_allclose(got, expected, atol=2e-6 * np.abs(expected).max())


@pytest.mark.parametrize("name", ["Q8_0", "Q4_1x8"])
def test_a_large_matrix_shared_with_the_helper_threads_multiplies_whole(name):
    """Over 64 KiB of blocks, the custom call shares parts of the rows with its helper
    threads; 2,056 rows end in a part that is shorter."""
    gguf_name = name.removesuffix("x8")
    blocks = random_blocks(gguf_name, 2056, 1024, seed=3)
    weights = reference(blocks, gguf_name, 1024)
    if FORMATS[name].by_eights:
        blocks = repack(blocks, gguf_name)[0]
    x = as_multiplied(np.random.default_rng(4).standard_normal((2, 1024)).astype("float32"))
    expected = x.astype("float64") @ weights.T.astype("float64")
    got = to_numpy(block_product(keras.ops.convert_to_tensor(x), blocks, name))
    np.testing.assert_allclose(got, expected, atol=2e-6 * np.abs(expected).max())


def test_products_running_at_once_each_get_their_own_rows():
    """Threads multiplying at once (one holds the helper threads, the others multiply
    alone) each get their own rows' product, every time."""
    from concurrent.futures import ThreadPoolExecutor

    blocks = random_blocks("Q5_0", 1024, 1024, seed=6)
    weights = reference(blocks, "Q5_0", 1024).astype("float64")
    rng = np.random.default_rng(7)
    xs = [as_multiplied(rng.standard_normal((1, 1024)).astype("float32")) for _ in range(4)]

    def products(x):
        return [to_numpy(block_product(keras.ops.convert_to_tensor(x), blocks, "Q5_0"))
                for _ in range(10)]  # fmt: skip

    with ThreadPoolExecutor(4) as pool:
        answers = list(pool.map(products, xs))
    for x, got in zip(xs, answers, strict=True):
        expected = x.astype("float64") @ weights.T
        for answer in got:
            np.testing.assert_allclose(answer, expected, atol=2e-6 * np.abs(expected).max())


def test_a_non_finite_activation_gives_a_non_finite_row_as_the_float_product_does():
    blocks = repack(random_blocks("Q4_1", 8, 64), "Q4_1")[0]
    x = np.ones((2, 64), "float32")
    x[1, 3] = np.inf
    got = to_numpy(block_product(keras.ops.convert_to_tensor(x), blocks, "Q4_1x8"))
    assert np.isfinite(got[0]).all() and not np.isfinite(got[1]).any()


def int8_activations(x):
    """`x` rounded to int8 per block of 32 columns, step max|x| / 127 (float32 arithmetic,
    round half to even), as block_product.cc's `Quantize`."""
    blocks = x.reshape(-1, 32)
    top = np.abs(blocks).max(-1, keepdims=True)
    inverse = np.where(top > 0, np.float32(127) / np.maximum(top, 1e-30), 0).astype("float32")
    q = np.rint(blocks * inverse)
    return (q * (top / np.float32(127))).astype("float32").reshape(x.shape)


def as_multiplied(x):
    """`x` as the custom call multiplies a few rows by blocks: rounded to int8 per 32
    where it takes int8 products (rounding again gives the same values)."""
    return int8_activations(x) if native.int8() else x


def test_the_custom_call_is_in_use_on_jax_where_a_compiler_is():
    if keras.backend.backend() != "jax":
        assert not native.usable(keras.ops.zeros((1, 32))) and not native.int8()
        return
    in_use, reason = native.status()
    assert in_use == (shutil.which("g++") is not None), reason


def test_block_dense_equals_a_dense_with_the_weights_and_round_trips():
    blocks = random_blocks("Q4_K", 12, 256)
    layer = BlockDense((3, 4), "Q4_K", activation="relu", use_bias=True, name="p")
    layer.build((None, 5, 256))
    layer.blocks.assign(blocks)
    layer.bias.assign(np.arange(12, dtype="float32") / 10)
    x = as_multiplied(np.random.default_rng(2).standard_normal((2, 5, 256)).astype("float32"))
    weights = reference(blocks, "Q4_K", 256)
    expected = np.maximum(x @ weights.T + np.arange(12) / 10, 0).reshape(2, 5, 3, 4)
    np.testing.assert_allclose(to_numpy(layer(x)), expected, atol=2e-6 * np.abs(expected).max())
    again = BlockDense.from_config(layer.get_config())
    again.build((None, 5, 256))
    again.set_weights(layer.get_weights())
    np.testing.assert_array_equal(to_numpy(again(x)), to_numpy(layer(x)))


def test_block_dense_takes_lora_adapters_and_keeps_them_through_a_keras_file(tmp_path):
    """`enable_lora` adds float adapters on the frozen blocks, as on Keras's `Dense`:
    the output unchanged until `B` moves, then `x W + (alpha / rank) x A B`; the config
    keeps the rank, so a `.keras` file loads with its adapters."""
    blocks = random_blocks("Q8_0", 12, 64)
    layer = BlockDense(12, "Q8_0", use_bias=True, name="p")
    layer.build((None, 64))
    layer.blocks.assign(blocks)
    x = as_multiplied(np.random.default_rng(8).standard_normal((3, 64)).astype("float32"))
    before = to_numpy(layer(x))
    layer.enable_lora(2, lora_alpha=4)
    np.testing.assert_array_equal(to_numpy(layer(x)), before)
    assert [w.name for w in layer.trainable_weights] == ["bias", "lora_kernel_a", "lora_kernel_b"]
    b = np.random.default_rng(9).standard_normal((2, 12)).astype("float32")
    layer.lora_kernel_b.assign(b)
    a = to_numpy(layer.lora_kernel_a)
    expected = x @ reference(blocks, "Q8_0", 64).T + 2.0 * (x @ a @ b)
    np.testing.assert_allclose(to_numpy(layer(x)), expected, atol=2e-5)
    with pytest.raises(ValueError, match="already enabled"):
        layer.enable_lora(2)
    model = keras.Sequential([keras.Input((64,)), layer])
    model.save(tmp_path / "lora.keras")
    loaded = keras.saving.load_model(tmp_path / "lora.keras")
    assert loaded.layers[0].lora_enabled and loaded.layers[0].lora_alpha == 4
    np.testing.assert_array_equal(to_numpy(loaded(x)), to_numpy(model(x)))
    with pytest.raises(ValueError, match="lora_rank"):
        BlockDense(4, "Q8_0", lora_rank=0)


def test_block_dense_contracts_several_axes():
    blocks = random_blocks("Q8_0", 6, 64)
    layer = BlockDense(6, "Q8_0", input_axes=2)
    layer.build((None, 2, 32))
    layer.blocks.assign(blocks)
    x = as_multiplied(np.random.default_rng(3).standard_normal((4, 2, 32)).astype("float32"))
    expected = x.reshape(4, 64) @ reference(blocks, "Q8_0", 64).T
    np.testing.assert_allclose(to_numpy(layer(x)), expected, atol=1e-5)


def test_block_embedding_looks_up_and_reverses_as_its_float_table():
    blocks = random_blocks("Q5_0", 10, 64)
    table = BlockEmbedding(10, 64, "Q5_0", logit_soft_cap=3.0)
    table.build()
    table.blocks.assign(blocks)
    weights = reference(blocks, "Q5_0", 64)
    ids = np.array([[1, 9, 0]])
    np.testing.assert_array_equal(to_numpy(table(ids)), weights[ids])
    hidden = as_multiplied(np.random.default_rng(4).standard_normal((2, 64)).astype("float32"))
    expected = np.tanh(hidden @ weights.T / 3.0) * 3.0
    np.testing.assert_allclose(to_numpy(table(hidden, reverse=True)), expected, atol=1e-5)
    assert BlockEmbedding.from_config(table.get_config()).get_config() == table.get_config()


FORMATS_OF_A_BLOCK = {
    "query": "Q8_0",
    "key": "Q4_0",
    "value": "Q4_1",
    "attention_output": "Q5_0",
    "feedforward_gate_dense": "Q8_0",
    "feedforward_intermediate_dense": "Q4_1",
    "feedforward_output_dense": "Q4_0",
}


def _decoder_block(kernel_formats=None):
    return TransformerDecoderBlock(
        4, 64, norm_first=True, normalization="rms_norm", gated_feedforward=True,
        use_bias=False, activation="silu", num_key_value_heads=2,
        kernel_formats=kernel_formats, name="block",
    )  # fmt: skip


def _sublayer(block, name):
    attention = block.self_attention
    return {
        "query": attention.query_dense, "key": attention.key_dense,
        "value": attention.value_dense, "attention_output": attention.output_dense,
        "feedforward_gate_dense": block.feedforward_gate_dense,
        "feedforward_intermediate_dense": block.feedforward_intermediate_dense,
        "feedforward_output_dense": block.feedforward_output_dense,
    }[name]  # fmt: skip


def test_a_decoder_block_with_kernel_formats_equals_its_float_twin(tmp_path):
    # 72 rows: over NATIVE_ROWS, float products on every backend (int8 ones: above)
    x = np.random.default_rng(5).standard_normal((12, 6, 64)).astype("float32")
    assert 12 * 6 > NATIVE_ROWS
    float_block, kept = _decoder_block(), _decoder_block(FORMATS_OF_A_BLOCK)
    float_block(x), kept(x)
    for name, kind in FORMATS_OF_A_BLOCK.items():
        dense = _sublayer(float_block, name)
        kernel = to_numpy(dense.kernel)
        # (out rows, in): the attention's output contracts (heads, head_dim)
        if name == "attention_output":
            rows = kernel.reshape(-1, kernel.shape[-1]).T
        else:
            rows = kernel.reshape(kernel.shape[0], -1).T
        blocks = quants.quantize(np.ascontiguousarray(rows), GGMLQuantizationType[kind])
        _sublayer(kept, name).blocks.assign(blocks)
        dense.kernel.assign(reference(blocks, kind, rows.shape[1]).T.reshape(kernel.shape))
    for norm in ("self_attention_layer_norm", "feedforward_layer_norm"):
        getattr(kept, norm).set_weights(getattr(float_block, norm).get_weights())
    np.testing.assert_allclose(to_numpy(kept(x)), to_numpy(float_block(x)), atol=2e-5)
    model = keras.Sequential([keras.Input((6, 64)), kept])
    model.save(tmp_path / "kept.keras")
    loaded = keras.saving.load_model(tmp_path / "kept.keras")
    np.testing.assert_array_equal(to_numpy(loaded(x)), to_numpy(model(x)))
    assert loaded.layers[0].kernel_formats == FORMATS_OF_A_BLOCK


def test_bad_arguments_are_refused_by_name():
    with pytest.raises(ValueError, match="block format in"):
        BlockDense(4, "Q3_K")
    with pytest.raises(ValueError, match="output_shape"):
        BlockDense((4, 0), "Q8_0")
    with pytest.raises(ValueError, match="divisible by Q4_K's block of 256"):
        BlockDense(4, "Q4_K").build((None, 100))
    with pytest.raises(ValueError, match="input_dim"):
        BlockEmbedding(0, 32, "Q8_0")
    with pytest.raises(ValueError, match="not repacked by eights"):
        BlockEmbedding(16, 32, "Q4_1x8")
    with pytest.raises(ValueError, match="multiple of 8 outputs"):
        BlockDense(12, "Q4_0x8")
    with pytest.raises(ValueError, match="keys among"):
        check_kernel_formats({"querry": "Q8_0"}, ("query",))
    with pytest.raises(TypeError, match="dict"):
        _decoder_block(["Q8_0"])


def test_non_finite_scales_are_counted():
    blocks = random_blocks("Q4_1", 8, 64)
    assert non_finite_scales(blocks, "Q4_1") == 0
    broken = blocks.reshape(-1, 20).copy()
    broken[1, 0:2] = np.array([np.inf], np.float16).view(np.uint8)
    broken[2, 2:4] = np.array([np.nan], np.float16).view(np.uint8)
    assert non_finite_scales(broken.reshape(8, -1), "Q4_1") == 2
    packed, packed_name = repack(broken.reshape(8, -1), "Q4_1")
    assert non_finite_scales(packed, packed_name) == 2
