"""Grouped-query and multi-query attention (`MultiHeadAttention(num_key_value_heads=K)`)
and its rotary embedding: against `keras.layers.GroupQueryAttention` (weights
interchangeable) and `transformers`' Llama attention (RoPE, GQA, the causal mask);
K-head caches, windows, biases, every scoring function; bad arguments named."""

import keras
import numpy as np
import pytest
import torch
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding

from keras_attn.layers import MultiHeadAttention, TransformerDecoderBlock, head_products
from tests.helpers import ALL_BACKENDS, max_abs_diff, run_layer_test, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

HEADS, HEAD_DIM, WIDTH = 4, 8, 32


def _inputs(batch=2, length=9, seed=0):
    return np.random.default_rng(seed).normal(size=(batch, length, WIDTH)).astype("float32")


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_weights_and_outputs_are_keras_group_query_attentions(kv_heads):
    """`set_weights(keras_layer.get_weights())`, same shapes and order; outputs with a
    padding mask, an attention mask and the causal mask within 1e-5."""
    x, y = _inputs(), _inputs(length=7, seed=1)
    theirs = keras.layers.GroupQueryAttention(HEAD_DIM, HEADS, kv_heads, seed=0)
    ours = MultiHeadAttention(HEADS, HEAD_DIM, num_key_value_heads=kv_heads)
    theirs(x, y), ours(x, y)  # build
    assert [w.shape for w in ours.get_weights()] == [w.shape for w in theirs.get_weights()]
    ours.set_weights(theirs.get_weights())
    rng = np.random.default_rng(2)
    attention_mask = rng.random((2, 9, 7)) > 0.3
    attention_mask[:, :, 0] = True  # every query keeps a key (Keras's NaN-free range)
    for kwargs in ({}, {"attention_mask": attention_mask}):
        assert max_abs_diff(ours(x, y, **kwargs), theirs(x, y, **kwargs)) <= 1e-5
    causal = max_abs_diff(ours(x, x, use_causal_mask=True), theirs(x, x, use_causal_mask=True))
    assert causal <= 1e-5
    _, scores = ours(x, y, return_attention_scores=True)
    assert tuple(scores.shape) == (2, HEADS, 9, 7)


@pytest.mark.parametrize("kv_heads", [2, 1])
def test_equals_llamas_attention_with_rope_and_the_causal_mask(kv_heads):
    """Llama's attention (`transformers`, eager, no biases), weights copied: RoPE on the
    queries and keys, `kv_heads` key/value heads, causal; max abs <= 1e-5."""
    config = LlamaConfig(
        hidden_size=WIDTH,
        num_attention_heads=HEADS,
        num_key_value_heads=kv_heads,
        head_dim=HEAD_DIM,
        max_position_embeddings=64,
        attention_bias=False,
        rope_theta=500.0,
    )
    config._attn_implementation = "eager"
    llama = LlamaAttention(config, layer_idx=0).eval()
    x = _inputs(length=11)
    ours = MultiHeadAttention(
        HEADS,
        HEAD_DIM,
        use_bias=False,
        num_key_value_heads=kv_heads,
        rotary_max_wavelength=500.0,
    )
    ours(x, x)
    weight = {n: getattr(llama, f"{n}_proj").weight.detach().numpy().T for n in "qkvo"}
    ours.query_dense.kernel.assign(weight["q"].reshape(WIDTH, HEADS, HEAD_DIM))
    ours.key_dense.kernel.assign(weight["k"].reshape(WIDTH, kv_heads, HEAD_DIM))
    ours.value_dense.kernel.assign(weight["v"].reshape(WIDTH, kv_heads, HEAD_DIM))
    ours.output_dense.kernel.assign(weight["o"].reshape(HEADS, HEAD_DIM, WIDTH))
    hidden = torch.from_numpy(x)
    positions = torch.arange(11)[None].expand(2, -1)
    cos_sin = LlamaRotaryEmbedding(config)(hidden, positions)
    causal = torch.full((11, 11), float("-inf")).triu(1)[None, None].expand(2, 1, -1, -1)
    with torch.no_grad():
        theirs = llama(hidden, position_embeddings=cos_sin, attention_mask=causal)[0].numpy()
    assert max_abs_diff(ours(x, x, use_causal_mask=True), theirs) <= 1e-5


@pytest.mark.parametrize("kv_heads", [2, 1])
@pytest.mark.parametrize("rotary", [None, 10000.0])
def test_cached_decoding_keeps_kv_heads_and_equals_the_full_pass(kv_heads, rotary):
    layer = MultiHeadAttention(
        HEADS, HEAD_DIM, num_key_value_heads=kv_heads, rotary_max_wavelength=rotary
    )
    x = _inputs(length=6)
    full = to_numpy(layer(x, x, use_causal_mask=True))
    cache = layer.compute_cache(np.zeros_like(x))
    assert tuple(cache.shape) == (2, 2, 6, kv_heads, HEAD_DIM)
    steps = []
    for index in range(6):
        row = x[:, index : index + 1]
        out, cache = layer(row, row, use_causal_mask=True, cache=cache, cache_update_index=index)
        steps.append(to_numpy(out))
    assert max_abs_diff(np.concatenate(steps, axis=1), full) <= 1e-5
    with pytest.raises(ValueError, match=r"\(batch, 2, length, num_heads, head_dim\)"):
        layer(x[:, :1], x[:, :1], cache=np.zeros((2, 2, 6, HEADS * 2, HEAD_DIM), "float32"),
              cache_update_index=0)  # fmt: skip


def _shared_heads_copy(layer, kv_heads):
    """A full `MultiHeadAttention` whose key/value kernels repeat `layer`'s K heads:
    grouped-query attention spelled out."""
    full = MultiHeadAttention(
        HEADS, HEAD_DIM, score=layer.score, window=layer.window, position_bias=layer.position_bias
    )
    x = _inputs()
    full(x, x)
    repeats = HEADS // kv_heads
    for name in ("query_dense", "key_dense", "value_dense", "output_dense"):
        for theirs, mine in zip(
            getattr(layer, name).weights, getattr(full, name).weights, strict=True
        ):
            value = to_numpy(theirs)
            if name in ("key_dense", "value_dense"):
                value = np.repeat(value, repeats, axis=-2)
            mine.assign(value)
    for theirs, mine in zip(layer.score_layer.weights, full.score_layer.weights, strict=True):
        mine.assign(to_numpy(theirs))
    if layer.position_bias_layer is not None:
        full.position_bias_layer.set_weights(layer.position_bias_layer.get_weights())
    return full


@pytest.mark.parametrize("score", ["dot", "additive", "cosine", "general"])
def test_every_score_equals_full_attention_with_repeated_heads(score):
    layer = MultiHeadAttention(HEADS, HEAD_DIM, score=score, num_key_value_heads=2)
    x = _inputs()
    layer(x, x)
    full = _shared_heads_copy(layer, 2)
    assert max_abs_diff(layer(x, x), full(x, x)) <= 1e-5


@pytest.mark.parametrize("options", [{"window": 2}, {"position_bias": "alibi"}])
def test_windows_and_position_biases_take_kv_heads(options):
    layer = MultiHeadAttention(HEADS, HEAD_DIM, num_key_value_heads=1, **options)
    x = _inputs(length=20)
    layer(x, x)
    full = _shared_heads_copy(layer, 1)
    mask = np.ones((2, 20), bool)
    mask[1, 15:] = False
    for kwargs in ({}, {"use_causal_mask": True}):
        ours = layer(x, x, query_mask=mask, value_mask=mask, **kwargs)
        assert max_abs_diff(ours, full(x, x, query_mask=mask, value_mask=mask, **kwargs)) <= 1e-5


def test_fewer_kv_heads_mean_fewer_weights_and_a_smaller_cache():
    sizes = {}
    for kv_heads in (4, 2, 1):
        layer = MultiHeadAttention(HEADS, HEAD_DIM, num_key_value_heads=kv_heads)
        x = _inputs()
        layer(x, x)
        sizes[kv_heads] = (layer.count_params(), np.size(to_numpy(layer.compute_cache(x))))
    # query/output: 2 * (32 * 32 + bias); key/value: 2 * (32 * 8K + 8K)
    assert sizes[4][0] - sizes[1][0] == 2 * (WIDTH * HEAD_DIM + HEAD_DIM) * 3
    assert sizes[4][1] == 4 * sizes[1][1] == 2 * sizes[2][1]


def test_layer_contract_and_config(tmp_path):
    run_layer_test(
        MultiHeadAttention,
        {
            "num_heads": HEADS,
            "key_dim": HEAD_DIM,
            "num_key_value_heads": 2,
            "rotary_max_wavelength": 100.0,
            "rotary_scaling_factor": 2.0,
        },
        {"query": _inputs(length=5), "value": _inputs(length=5, seed=1)},
        expected_output_shape=(2, 5, WIDTH),
        expected_num_trainable_weights=8,
        tmp_path=tmp_path,
        unchanged_weights=("key/bias",),  # q . b_k is the same for every key
    )
    config = MultiHeadAttention(HEADS, HEAD_DIM, num_key_value_heads=1).get_config()
    assert config["num_key_value_heads"] == 1 and config["rotary_max_wavelength"] is None
    assert MultiHeadAttention(HEADS, HEAD_DIM).num_key_value_heads == HEADS


def test_blocks_take_num_key_value_heads():
    block = TransformerDecoderBlock(HEADS, 64, num_key_value_heads=2, rotary_max_wavelength=1e4)
    x = _inputs()
    block(x)
    assert tuple(block.self_attention.key_dense.kernel.shape) == (WIDTH, 2, HEAD_DIM)
    assert block.self_attention.rotary is not None
    clone = TransformerDecoderBlock.from_config(block.get_config())
    assert clone.get_config()["num_key_value_heads"] == 2
    with pytest.raises(ValueError, match="num_key_value_heads"):
        TransformerDecoderBlock(HEADS, 64, num_key_value_heads=3)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_key_value_heads": 0}, "num_key_value_heads"),
        ({"num_key_value_heads": -2}, "num_key_value_heads"),
        ({"num_key_value_heads": 3}, r"divide `num_heads`.*num_key_value_heads=3, num_heads=4"),
        ({"num_key_value_heads": 2.0}, "num_key_value_heads"),
        ({"rotary_max_wavelength": 0}, "rotary_max_wavelength"),
        ({"rotary_scaling_factor": -1.0}, "rotary_scaling_factor"),
        ({"key_dim": 7, "rotary_max_wavelength": 1e4}, r"even `key_dim`.*key_dim=7"),
    ],
)
def test_bad_arguments_are_named_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(HEADS, **{"key_dim": HEAD_DIM, **kwargs})


@pytest.mark.parametrize("kv_heads", [2, 1])
def test_query_groups_are_scored_without_repeating_keys_and_values(kv_heads, monkeypatch):
    """Grouped-query attention scores the query heads of one key/value head as one
    product (no copy of the keys and values per head, nor of a cache every decoding
    step): the outputs and probabilities equal the repeated form's, over a mask and a
    cached decoding step; a position bias (different per head) keeps the repeated form."""
    from keras_attn.layers import multi_head_attention

    repeats = []
    original = multi_head_attention.repeat_heads
    for module in (multi_head_attention, head_products):  # the fused path's, the scores'
        monkeypatch.setattr(
            module, "repeat_heads", lambda t, n: repeats.append(n) or original(t, n)
        )
    layer = MultiHeadAttention(HEADS, HEAD_DIM, num_key_value_heads=kv_heads)
    x = _inputs()
    mask = np.tril(np.ones((9, 9), bool))[None].repeat(2, axis=0)
    cache = np.zeros((2, 2, 9, kv_heads, HEAD_DIM), "float32")
    cache[:, :, :4] = np.random.default_rng(3).normal(size=(2, 2, 4, kv_heads, HEAD_DIM))

    def full():
        return [to_numpy(t) for t in layer(x, x, attention_mask=mask, return_attention_scores=True)]

    def step():  # PyTorch's fused kernel (no scores returned) takes repeated heads
        return [to_numpy(t) for t in layer(x[:, 4:5], x[:, 4:5], cache=cache, cache_update_index=4)]

    grouped = full()
    assert not repeats
    grouped += step()
    monkeypatch.setattr(head_products, "groups_queries", lambda layer, key: False)
    repeats.clear()
    repeated = full() + step()
    assert repeats
    for a, b in zip(grouped, repeated, strict=True):
        assert a.shape == b.shape and max_abs_diff(a, b) <= 1e-6
    biased = MultiHeadAttention(
        HEADS, HEAD_DIM, num_key_value_heads=kv_heads, position_bias="alibi"
    )
    biased(x, x)
    assert not head_products.groups_queries(biased, np.zeros((1, 1, kv_heads, HEAD_DIM)))
