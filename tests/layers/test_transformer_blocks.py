"""Encoder and decoder blocks: parity with torch's layers, masks, bad input."""

import keras
import numpy as np
import pytest
import torch

from keras_attn.layers import TransformerDecoderBlock, TransformerEncoderBlock
from tests.helpers import ALL_BACKENDS, max_abs_diff, run_layer_test, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

BATCH, SRC, TGT, DIM, HEADS, FF = 3, 7, 5, 32, 4, 64


def _x(seed, length):
    return np.random.default_rng(seed).normal(size=(BATCH, length, DIM)).astype("float32")


def _padding(lengths, length):
    return np.arange(length)[None, :] < np.array(lengths)[:, None]


def _t(x):
    return torch.from_numpy(np.ascontiguousarray(x))


def _copy_attention(ours, theirs):
    """Our MultiHeadAttention -> torch.nn.MultiheadAttention (torch: x @ W^T + b)."""
    qk, qb, kk, kb, vk, vb, ok, ob = [to_numpy(w) for w in ours.get_weights()]
    theirs.in_proj_weight.copy_(_t(np.concatenate([w.reshape(DIM, -1).T for w in (qk, kk, vk)])))
    theirs.in_proj_bias.copy_(_t(np.concatenate([qb.ravel(), kb.ravel(), vb.ravel()])))
    theirs.out_proj.weight.copy_(_t(ok.reshape(-1, DIM).T))
    theirs.out_proj.bias.copy_(_t(ob))


def _copy_dense(ours, theirs):
    theirs.weight.copy_(_t(to_numpy(ours.kernel).T))
    theirs.bias.copy_(_t(to_numpy(ours.bias)))


def _copy_norm(ours, theirs):
    # Random gains and offsets, so a swapped norm could not pass unnoticed.
    rng = np.random.default_rng(abs(hash(ours.name)) % 1000)
    ours.gamma.assign(rng.uniform(0.5, 1.5, DIM).astype("float32"))
    ours.beta.assign(rng.normal(0, 0.1, DIM).astype("float32"))
    theirs.weight.copy_(_t(to_numpy(ours.gamma)))
    theirs.bias.copy_(_t(to_numpy(ours.beta)))


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_encoder_block_parity_with_torch(norm_first, activation):
    x, padding = _x(0, SRC), _padding([7, 4, 1], SRC)
    block = TransformerEncoderBlock(HEADS, FF, activation=activation, norm_first=norm_first)
    block(x)
    torch_block = torch.nn.TransformerEncoderLayer(
        DIM,
        HEADS,
        FF,
        dropout=0.0,
        activation=activation,
        layer_norm_eps=1e-5,
        batch_first=True,
        norm_first=norm_first,
    ).eval()
    with torch.no_grad():
        _copy_attention(block.self_attention, torch_block.self_attn)
        _copy_dense(block.feedforward_intermediate_dense, torch_block.linear1)
        _copy_dense(block.feedforward_output_dense, torch_block.linear2)
        _copy_norm(block.self_attention_layer_norm, torch_block.norm1)
        _copy_norm(block.feedforward_layer_norm, torch_block.norm2)
        theirs = torch_block(_t(x), src_key_padding_mask=_t(~padding)).numpy()
        theirs_unmasked = torch_block(_t(x)).numpy()
    ours = to_numpy(block(x, padding_mask=padding))
    # torch's fast path writes zeros at padded positions; compare the real tokens.
    assert max_abs_diff(ours[padding], theirs[padding]) <= 1e-5
    assert max_abs_diff(block(x), theirs_unmasked) <= 1e-5


@pytest.mark.parametrize("activation", ["relu", "gelu"])
@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_block_parity_with_torch(norm_first, activation):
    target, source = _x(1, TGT), _x(2, SRC)
    target_padding, source_padding = _padding([5, 3, 2], TGT), _padding([7, 2, 5], SRC)
    block = TransformerDecoderBlock(HEADS, FF, activation=activation, norm_first=norm_first)
    block(target, source)
    torch_block = torch.nn.TransformerDecoderLayer(
        DIM,
        HEADS,
        FF,
        dropout=0.0,
        activation=activation,
        layer_norm_eps=1e-5,
        batch_first=True,
        norm_first=norm_first,
    ).eval()
    with torch.no_grad():
        _copy_attention(block.self_attention, torch_block.self_attn)
        _copy_attention(block.cross_attention, torch_block.multihead_attn)
        _copy_dense(block.feedforward_intermediate_dense, torch_block.linear1)
        _copy_dense(block.feedforward_output_dense, torch_block.linear2)
        _copy_norm(block.self_attention_layer_norm, torch_block.norm1)
        _copy_norm(block.cross_attention_layer_norm, torch_block.norm2)
        _copy_norm(block.feedforward_layer_norm, torch_block.norm3)
        theirs = torch_block(
            _t(target),
            _t(source),
            tgt_mask=torch.triu(torch.ones(TGT, TGT, dtype=torch.bool), 1),
            tgt_key_padding_mask=_t(~target_padding),
            memory_key_padding_mask=_t(~source_padding),
            tgt_is_causal=True,
        ).numpy()
    ours = block(
        target, source, decoder_padding_mask=target_padding, encoder_padding_mask=source_padding
    )
    assert max_abs_diff(ours, theirs) <= 1e-5


def test_decoder_block_without_encoder_is_a_causal_gpt_block():
    block = TransformerDecoderBlock(HEADS, FF, norm_first=True)
    x = _x(3, TGT)
    base = to_numpy(block(x))
    assert not hasattr(block, "cross_attention")
    changed = x.copy()
    changed[:, 3:] = 0.0
    np.testing.assert_array_equal(to_numpy(block(changed))[:, :3], base[:, :3])
    with pytest.raises(ValueError, match="built without cross-attention"):
        block(x, _x(4, SRC))


def test_keras_masks_are_used_and_propagated():
    ids = keras.Input((None,), dtype="int32")
    embedded = keras.layers.Embedding(30, DIM, mask_zero=True)(ids)
    encoded = TransformerEncoderBlock(HEADS, FF)(embedded)
    decoded = TransformerDecoderBlock(HEADS, FF)(embedded, encoded)
    assert getattr(decoded, "_keras_mask", None) is not None
    model = keras.Model(ids, decoded)
    rng = np.random.default_rng(5)
    tokens = rng.integers(1, 30, (2, 6)) * _padding([6, 3], 6)
    out = to_numpy(model(tokens))
    # More padding changes nothing at the real tokens: the masks were honoured.
    padded = to_numpy(model(np.concatenate([tokens, np.zeros((2, 2), int)], 1)))
    np.testing.assert_allclose(padded[0, :6], out[0], atol=1e-5)
    np.testing.assert_allclose(padded[1, :3], out[1, :3], atol=1e-5)


def test_encoder_block_layer_test(tmp_path):
    run_layer_test(
        TransformerEncoderBlock,
        {
            "num_heads": 2,
            "intermediate_dim": 16,
            "dropout": 0.1,
            "norm_first": True,
            "score": "cosine",
        },
        {"inputs": _x(6, SRC)},
        expected_output_shape=(BATCH, SRC, DIM),
        tmp_path=tmp_path,
    )


def test_decoder_block_layer_test(tmp_path):
    run_layer_test(
        TransformerDecoderBlock,
        {"num_heads": 2, "intermediate_dim": 16, "score": "additive", "activation": "gelu"},
        {"decoder_sequence": _x(7, TGT), "encoder_sequence": _x(8, SRC)},
        expected_output_shape=(BATCH, TGT, DIM),
        tmp_path=tmp_path,
    )


def test_llama_shaped_block_rms_norms_a_gated_feed_forward_without_biases(tmp_path):
    """`normalization="rms_norm"`, `gated_feedforward`, `use_bias=False`: Llama's block.
    Each sub-layer against its formula (the whole block against `transformers`' Llama:
    tests/models/llama)."""
    kwargs = dict(
        num_heads=HEADS,
        intermediate_dim=FF,
        activation="silu",
        norm_first=True,
        normalization="rms_norm",
        gated_feedforward=True,
        use_bias=False,
        num_key_value_heads=2,
        rotary_max_wavelength=500.0,
        rotary_scaling_factor=2.0,
        layer_norm_epsilon=1e-6,
    )
    block = TransformerDecoderBlock(**kwargs)
    x = _x(30, TGT)
    block(x)
    assert not [w.path for w in block.weights if "bias" in w.path]
    assert block.self_attention.rotary.scaling_factor == 2.0
    scale = np.random.default_rng(31).normal(size=DIM).astype("float32")
    block.feedforward_layer_norm.scale.assign(scale)
    rms = x / np.sqrt((x**2).mean(-1, keepdims=True) + 1e-6) * scale
    np.testing.assert_allclose(to_numpy(block.feedforward_layer_norm(x)), rms, atol=1e-5)
    gate, up, down = (
        to_numpy(block.feedforward_gate_dense.kernel),
        to_numpy(block.feedforward_intermediate_dense.kernel),
        to_numpy(block.feedforward_output_dense.kernel),
    )
    z = x @ gate
    expected = (z / (1 + np.exp(-z)) * (x @ up)) @ down
    assert max_abs_diff(block._feedforward(x), expected) < 1e-5
    run_layer_test(
        TransformerDecoderBlock,
        kwargs,
        {"decoder_sequence": x},
        expected_output_shape=(BATCH, TGT, DIM),
        tmp_path=tmp_path,
    )


def test_qkv_bias_puts_biases_on_query_key_and_value_only():
    """`qkv_bias=True` with `use_bias=False`: Qwen 2's block (biases on the attention's
    query, key and value projections, none on its output or the feed-forward net); the
    biases shift each projection by their values (the whole block against `transformers`'
    Qwen 2: tests/models/llama)."""
    kwargs = dict(
        num_heads=HEADS,
        intermediate_dim=FF,
        norm_first=True,
        normalization="rms_norm",
        gated_feedforward=True,
        use_bias=False,
        qkv_bias=True,
    )
    block = TransformerDecoderBlock(**kwargs)
    x = _x(32, TGT)
    block(x)
    attention = block.self_attention
    biased = sorted(w.path.split("/")[-2] for w in block.weights if w.path.endswith("bias"))
    assert biased == ["key", "query", "value"]
    assert attention.output_bias is False and attention.use_bias is True
    bias = np.random.default_rng(33).normal(size=attention.query_dense.bias.shape)
    attention.query_dense.bias.assign(bias.astype("float32"))
    kernel = to_numpy(attention.query_dense.kernel)
    expected = np.einsum("abc,cde->abde", x, kernel) + bias
    assert max_abs_diff(attention.query_dense(x), expected) < 1e-5
    clone = TransformerDecoderBlock.from_config(block.get_config())
    clone(x)
    assert [w.path for w in clone.weights] == [w.path for w in block.weights]
    assert TransformerDecoderBlock(**{**kwargs, "qkv_bias": None}).qkv_bias is None


def test_each_attention_gets_its_own_copy_of_a_score_template():
    from keras_attn.layers import GeneralScore

    block = TransformerDecoderBlock(HEADS, FF, score=GeneralScore())
    block(_x(9, TGT), _x(10, SRC))
    assert block.self_attention.score_layer is not block.cross_attention.score_layer
    assert type(block.cross_attention.score_layer) is GeneralScore
    clone = TransformerDecoderBlock.from_config(block.get_config())
    clone(_x(9, TGT), _x(10, SRC))
    clone.set_weights(block.get_weights())
    np.testing.assert_array_equal(
        to_numpy(clone(_x(9, TGT), _x(10, SRC))), to_numpy(block(_x(9, TGT), _x(10, SRC)))
    )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_heads": 0, "intermediate_dim": 8}, "num_heads=0"),
        ({"num_heads": 2, "intermediate_dim": -8}, "intermediate_dim=-8"),
        ({"num_heads": 2, "intermediate_dim": 8, "dropout": -0.1}, "dropout=-0.1"),
        ({"num_heads": 2, "intermediate_dim": 8, "score": "luong"}, "score='luong'"),
        ({"num_heads": 2, "intermediate_dim": 8, "layer_norm_epsilon": 0}, "layer_norm_epsilon=0"),
        ({"num_heads": 2, "intermediate_dim": 8, "normalization": "rms"}, "normalization='rms'"),
        (
            {"num_heads": 2, "intermediate_dim": 8, "rotary_scaling_factor": 0},
            "rotary_scaling_factor=0",
        ),
    ],
)
@pytest.mark.parametrize("cls", [TransformerEncoderBlock, TransformerDecoderBlock])
def test_bad_constructor_arguments(cls, kwargs, match):
    with pytest.raises(ValueError, match=match):
        cls(**kwargs)


def test_bad_inputs_raise_value_errors():
    with pytest.raises(ValueError, match=r"divisible by `num_heads`.*num_heads=5"):
        TransformerEncoderBlock(5, FF)(_x(11, SRC))
    with pytest.raises(ValueError, match=r"padding_mask.shape=\(3, 4\)"):
        TransformerEncoderBlock(HEADS, FF)(_x(12, SRC), padding_mask=np.ones((BATCH, 4), bool))
    block = TransformerEncoderBlock(HEADS, FF)
    block(_x(13, SRC))
    with pytest.raises(ValueError, match=r"was built for last dimensions"):
        block(np.ones((BATCH, SRC, 16), "float32"))
    decoder = TransformerDecoderBlock(HEADS, FF)
    decoder(_x(14, TGT), _x(15, SRC))
    with pytest.raises(ValueError, match="built with cross-attention"):
        decoder(_x(14, TGT))
    with pytest.raises(ValueError, match=r"encoder_padding_mask.shape=\(3, 2\)"):
        decoder(_x(14, TGT), _x(15, SRC), encoder_padding_mask=np.ones((BATCH, 2), bool))
    with pytest.raises(ValueError, match="need an `encoder_sequence`"):
        TransformerDecoderBlock(HEADS, FF)(_x(14, TGT), encoder_padding_mask=np.ones((BATCH, SRC)))


def test_symbolic_calls_give_the_outputs_specs_and_check_as_call_does():
    """Functional models call the blocks on `keras.Input`s: the specs come from
    `compute_output_spec` (not a trace of `call`), with `call`'s checks."""
    x, memory = keras.Input((SRC, DIM)), keras.Input((TGT, DIM))
    encoder = TransformerEncoderBlock(HEADS, FF)
    outputs, scores = encoder(x, padding_mask=keras.Input((SRC,)), return_attention_scores=True)
    assert (outputs.shape, scores.shape) == ((None, SRC, DIM), (None, HEADS, SRC, SRC))
    model = keras.Model(x, encoder(x))
    assert model(_x(16, SRC)).shape == (BATCH, SRC, DIM)
    with pytest.raises(ValueError, match=r"padding_mask.shape=\(None, 4\)"):
        encoder(x, padding_mask=keras.Input((4,)))
    with pytest.raises(ValueError, match="attention_mask"):
        encoder(x, attention_mask=keras.Input((SRC, 4)))
    decoder = TransformerDecoderBlock(HEADS, FF)
    assert decoder(memory, x).shape == (None, TGT, DIM)
    with pytest.raises(ValueError, match="built with cross-attention"):
        decoder(memory)
    with pytest.raises(ValueError, match=r"encoder_padding_mask.shape=\(None, 2\)"):
        decoder(memory, x, encoder_padding_mask=keras.Input((2,)))
    with pytest.raises(ValueError, match="decoder_attention_mask"):
        decoder(memory, x, decoder_attention_mask=keras.Input((TGT, TGT + 1)))
    causal = TransformerDecoderBlock(HEADS, FF)
    assert causal(memory).shape == (None, TGT, DIM)
    with pytest.raises(ValueError, match="cross-attention"):
        causal(memory, cross_attention_cache=keras.Input((2, SRC, HEADS, DIM // HEADS)))
