"""Relative-position biases: T5's buckets and bias against `transformers`' T5 attention
(the bias alone, and MultiHeadAttention with it against T5Attention end to end), ALiBi's
slopes against the paper's rule and BLOOM's tensor in `transformers`; shift invariance,
cached decoding, the blocks, serialisation; bad arguments named."""

import math

import keras
import numpy as np
import pytest
import torch
from keras import ops
from transformers import T5Config
from transformers.models.bloom.modeling_bloom import build_alibi_tensor
from transformers.models.t5.modeling_t5 import T5Attention

from keras_attn.layers import (
    AlibiBias,
    MultiHeadAttention,
    PositionBias,
    RelativePositionBias,
    TransformerDecoderBlock,
    TransformerEncoderBlock,
)
from tests.helpers import ALL_BACKENDS, max_abs_diff, run_layer_test, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)
HEADS, D_MODEL, D_KV = 4, 16, 4


def _t5_attention(bidirectional, num_buckets=32, max_distance=128):
    config = T5Config(
        d_model=D_MODEL,
        d_kv=D_KV,
        num_heads=HEADS,
        relative_attention_num_buckets=num_buckets,
        relative_attention_max_distance=max_distance,
        dropout_rate=0.0,
        is_decoder=not bidirectional,
    )
    torch.manual_seed(0)
    return T5Attention(config, has_relative_attention_bias=True, layer_idx=0).eval()


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (8, 16), (64, 50), (12, 7)])
def test_buckets_equal_t5s(bidirectional, num_buckets, max_distance):
    layer = RelativePositionBias(HEADS, num_buckets, max_distance, bidirectional)
    distances = np.arange(-400, 401)
    ours = to_numpy(layer.buckets(np.zeros(1, "int32"), distances))[0]
    theirs = T5Attention._relative_position_bucket(
        torch.from_numpy(distances), bidirectional, num_buckets, max_distance
    ).numpy()
    np.testing.assert_array_equal(ours, theirs)


@pytest.mark.parametrize("bidirectional", [True, False])
def test_bias_equals_t5s_compute_bias_with_an_offset(bidirectional):
    t5 = _t5_attention(bidirectional)
    layer = RelativePositionBias(HEADS, bidirectional=bidirectional)
    layer.build()
    layer.embeddings.assign(t5.relative_attention_bias.weight.detach().numpy())
    for query_length, key_length, offset in ((300, 300, 0), (1, 260, 259), (7, 200, 40)):
        with torch.no_grad():
            theirs = t5.compute_bias(query_length, key_length, past_seen_tokens=offset)[0]
        ours = layer(np.arange(query_length) + offset, np.arange(key_length))
        assert max_abs_diff(ours, theirs.numpy()) == 0.0


def test_multi_head_attention_with_t5_bias_is_t5s_attention():
    """Dot scores without scaling or biases, plus the bias: T5's self-attention."""
    t5 = _t5_attention(bidirectional=True)
    layer = MultiHeadAttention(HEADS, D_KV, use_bias=False, score="dot", position_bias="t5")
    x = np.random.default_rng(0).normal(size=(2, 150, D_MODEL)).astype("float32")
    layer(x, x)  # build
    weight = {name: getattr(t5, name).weight.detach().numpy().T for name in "qkvo"}
    layer.query_dense.kernel.assign(weight["q"].reshape(D_MODEL, HEADS, D_KV))
    layer.key_dense.kernel.assign(weight["k"].reshape(D_MODEL, HEADS, D_KV))
    layer.value_dense.kernel.assign(weight["v"].reshape(D_MODEL, HEADS, D_KV))
    layer.output_dense.kernel.assign(weight["o"].reshape(HEADS, D_KV, D_MODEL))
    layer.position_bias_layer.embeddings.assign(t5.relative_attention_bias.weight.detach().numpy())
    with torch.no_grad():
        theirs = t5(torch.from_numpy(x))[0].numpy()
    assert max_abs_diff(layer(x, x), theirs) <= 1e-5


def _alibi_slopes_by_the_papers_rule(heads):
    """Press et al.: for 2^k heads, 2^(-8/n) ... 2^(-8); otherwise the closest power of
    two's slopes, then every other slope of twice that many heads."""
    if math.log2(heads).is_integer():
        return [2 ** (-8 * (h + 1) / heads) for h in range(heads)]
    closest = 2 ** math.floor(math.log2(heads))
    extra = _alibi_slopes_by_the_papers_rule(2 * closest)[0::2]
    return _alibi_slopes_by_the_papers_rule(closest) + extra[: heads - closest]


@pytest.mark.parametrize("heads", [1, 2, 6, 8, 12, 16])
def test_alibi_slopes_and_bias(heads):
    layer = AlibiBias(heads)
    np.testing.assert_allclose(layer.slopes(), _alibi_slopes_by_the_papers_rule(heads), rtol=1e-12)
    # BLOOM's ALiBi tensor is slope_h * key position (the softmax drops the per-query
    # constant): the same slopes.
    bloom = build_alibi_tensor(torch.ones(1, 5), heads, torch.float32)[:, 0, 1].numpy()
    np.testing.assert_allclose(layer.slopes(), bloom, rtol=1e-6)
    bias = to_numpy(layer(np.arange(4) + 3, np.arange(9)))  # (heads, 4, 9)
    i, j = np.arange(4)[:, None] + 3, np.arange(9)[None, :]
    for h, slope in enumerate(layer.slopes()):
        np.testing.assert_allclose(bias[h], -slope * np.abs(i - j), rtol=1e-6)


@pytest.mark.parametrize("bias", ["t5", "t5_causal", "alibi"])
def test_shifting_every_position_changes_nothing(bias):
    layer = MultiHeadAttention(2, 8, position_bias=bias)
    x = np.random.default_rng(1).normal(size=(2, 9, 16)).astype("float32")
    layer(x, x)
    bias_layer = layer.position_bias_layer
    at_zero = to_numpy(bias_layer(np.arange(9), np.arange(9)))
    shifted = to_numpy(bias_layer(np.arange(9) + 37, np.arange(9) + 37))
    np.testing.assert_array_equal(shifted, at_zero)


@pytest.mark.parametrize("bias", ["t5_causal", "alibi"])
def test_cached_decoding_equals_the_full_causal_pass(bias):
    layer = MultiHeadAttention(2, 8, position_bias=bias)
    x = np.random.default_rng(2).normal(size=(2, 7, 16)).astype("float32")
    full = to_numpy(layer(x, x, use_causal_mask=True))
    cache = layer.compute_cache(np.zeros_like(x))
    for t in range(7):
        token = x[:, t : t + 1]
        step, cache = layer(token, token, use_causal_mask=True, cache=cache, cache_update_index=t)
        np.testing.assert_allclose(to_numpy(step)[:, 0], full[:, t], atol=1e-5)


def test_the_bias_changes_the_output_and_its_table_trains(tmp_path):
    x = np.random.default_rng(3).normal(size=(2, 6, 16)).astype("float32")
    plain = MultiHeadAttention(2, 8)
    biased = MultiHeadAttention(2, 8, position_bias="t5")
    plain(x, x)
    biased(x, x)
    biased.position_bias_layer.embeddings.assign(
        np.random.default_rng(4).normal(size=(32, 2)).astype("float32")
    )
    plain.set_weights(biased.get_weights()[:-1])  # the table comes last
    assert max_abs_diff(plain(x, x), biased(x, x)) > 1e-3
    run_layer_test(  # a training step moves the table too; .keras round trip
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 8, "position_bias": "t5"},
        {"query": x, "value": x},
        expected_output_shape=(2, 6, 16),
        expected_num_trainable_weights=9,
        tmp_path=tmp_path,
        unchanged_weights=("key/bias",),  # cancels in the softmax under scaled_dot
    )


def test_blocks_take_a_bias_and_the_decoder_uses_causal_buckets(tmp_path):
    encoder = TransformerEncoderBlock(2, 32, position_bias="t5")
    decoder = TransformerDecoderBlock(2, 32, position_bias="t5")
    x = np.random.default_rng(5).normal(size=(2, 6, 16)).astype("float32")
    encoder(x)
    decoder(x, x)  # with cross-attention
    assert encoder.self_attention.position_bias_layer.bidirectional
    assert not decoder.self_attention.position_bias_layer.bidirectional
    assert decoder.cross_attention.position_bias_layer is None
    inputs = keras.Input((None, 16))
    model = keras.Model(inputs, TransformerEncoderBlock(2, 32, position_bias="alibi")(inputs))
    path = tmp_path / "block.keras"
    model.save(path)
    np.testing.assert_allclose(
        to_numpy(keras.saving.load_model(path)(x)), to_numpy(model(x)), atol=1e-6
    )


def test_an_instance_is_a_template_and_configs_round_trip():
    template = RelativePositionBias(2, num_buckets=16, max_distance=64, bidirectional=False)
    first = MultiHeadAttention(2, 8, position_bias=template)
    second = MultiHeadAttention.from_config(first.get_config())
    x = np.ones((1, 3, 16), "float32")
    first(x, x)
    second(x, x)
    assert first.position_bias_layer is not template
    assert first.position_bias_layer.embeddings is not second.position_bias_layer.embeddings
    assert second.position_bias_layer.get_config()["max_distance"] == 64
    assert ops.shape(second.position_bias_layer.embeddings) == (16, 2)


@keras.saving.register_keras_serializable("tests")
class _Recency(PositionBias):
    """A scheme of one's own: keys after the query cost 1 per position."""

    def call(self, query_positions, key_positions):
        later = ops.maximum(self._relative(query_positions, key_positions), 0)
        return ops.repeat(-ops.cast(later, "float32")[None], self.num_heads, axis=0)


def test_a_subclass_plugs_in_and_is_saved_by_name(tmp_path):
    x = np.random.default_rng(6).normal(size=(2, 5, 16)).astype("float32")
    query, value = keras.Input((None, 16)), keras.Input((None, 16))
    outputs = MultiHeadAttention(2, 8, position_bias=_Recency(2))(
        query, value, return_attention_scores=True
    )
    model = keras.Model([query, value], outputs)
    _, scores = model([x, x])
    plain = MultiHeadAttention(2, 8)
    plain(x, x)
    plain.set_weights(model.layers[2].get_weights())
    _, plain_scores = plain(x, x, return_attention_scores=True)
    # The bias is added to the scores: the probabilities' log-ratios move by it.
    ratio = np.log(to_numpy(scores)) - np.log(to_numpy(plain_scores))
    ratio -= ratio[..., :1]
    np.testing.assert_allclose(ratio[0, 0, 0], -np.arange(5), atol=1e-4)
    path = tmp_path / "recency.keras"
    model.save(path)
    restored = keras.saving.load_model(path)
    assert type(restored.layers[2].position_bias_layer) is _Recency
    np.testing.assert_allclose(to_numpy(restored([x, x])[0]), to_numpy(model([x, x])[0]), atol=1e-6)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="position_bias='rope'"):
        MultiHeadAttention(2, 8, position_bias="rope")
    with pytest.raises(TypeError, match="position_bias=3"):
        MultiHeadAttention(2, 8, position_bias=3)
    with pytest.raises(ValueError, match="num_buckets=5, bidirectional=True"):
        RelativePositionBias(2, num_buckets=5)
    with pytest.raises(ValueError, match="max_distance=8"):
        RelativePositionBias(2, num_buckets=32, max_distance=8)
    with pytest.raises(ValueError, match="num_heads=0"):
        AlibiBias(0)
    with pytest.raises(ValueError, match="num_heads=-1"):
        PositionBias(-1)
    with pytest.raises(ValueError, match="4 heads.*num_heads=2"):
        MultiHeadAttention(4, 8, position_bias=AlibiBias(2))(np.ones((1, 2, 8)), np.ones((1, 2, 8)))
