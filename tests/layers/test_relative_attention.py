"""RelativeMultiHeadAttention (Transformer-XL, XLNet's segment term) against
`transformers`' XLNet attention with the same weights (with and without memory, a
permutation-style mask, segments); the scores depend only on relative positions; no
gradient reaches the memory; one position at a time with the earlier ones as memory
equals the full causal pass; masks, serialisation; bad arguments named."""

import keras
import numpy as np
import pytest
import torch
from keras import ops
from transformers import XLNetConfig, XLNetModel

from keras_attn.layers import RelativeMultiHeadAttention, relative_sinusoids
from tests.helpers import ALL_BACKENDS, gradients, max_abs_diff, run_layer_test, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)
BATCH, HEADS, HEAD_DIM, D_MODEL = 2, 2, 8, 16


def _x(seed, length):
    return np.random.default_rng(seed).normal(size=(BATCH, length, D_MODEL)).astype("float32")


def _xlnet_attention():
    config = XLNetConfig(
        vocab_size=50, d_model=D_MODEL, n_layer=1, n_head=HEADS, d_head=HEAD_DIM, d_inner=32,
        dropout=0.0, attn_type="bi", clamp_len=-1,
    )  # fmt: skip
    torch.manual_seed(0)
    model = XLNetModel(config).eval()
    attention = model.layer[0].rel_attn
    with torch.no_grad():  # larger than the 0.02 initialisation, so every term matters
        for name in ("q", "k", "v", "o", "r", "r_r_bias", "r_s_bias", "r_w_bias", "seg_embed"):
            torch.nn.init.normal_(getattr(attention, name), std=0.3)
    return model, attention


def _ours_like(attention):
    layer = RelativeMultiHeadAttention(HEADS, HEAD_DIM, segment_attention=True)
    layer.build((None, None, D_MODEL))
    weight = {name: parameter.detach().numpy() for name, parameter in attention.named_parameters()}
    layer.query_dense.kernel.assign(weight["q"])
    layer.key_dense.kernel.assign(weight["k"])
    layer.value_dense.kernel.assign(weight["v"])
    layer.position_dense.kernel.assign(weight["r"])
    layer.output_dense.kernel.assign(np.transpose(weight["o"], (1, 2, 0)))
    layer.content_bias.assign(weight["r_w_bias"])
    layer.position_bias.assign(weight["r_r_bias"])
    layer.segment_bias.assign(weight["r_s_bias"])
    layer.segment_embeddings.assign(weight["seg_embed"])
    return layer


@pytest.mark.parametrize("memory_length", [0, 3])
def test_equals_xlnets_relative_attention(memory_length):
    model, attention = _xlnet_attention()
    layer = _ours_like(attention)
    length = 5
    h, memory = _x(0, length), _x(1, memory_length)
    rng = np.random.default_rng(2)
    key_length = memory_length + length
    blocked = rng.random((BATCH, length, key_length)) < 0.4  # a permutation-style mask
    blocked[:, np.arange(length), memory_length + np.arange(length)] = False  # itself
    segments = rng.integers(0, 2, (BATCH, length))
    key_segments = np.concatenate([np.zeros((BATCH, memory_length), int), segments], 1)
    different = segments[:, :, None] != key_segments[:, None, :]  # (batch, q, k)

    seq_first = lambda a: torch.from_numpy(np.ascontiguousarray(np.swapaxes(a, 0, 1)))  # noqa: E731
    with torch.no_grad():
        r = model.relative_positional_encoding(length, key_length, bsz=BATCH)
        seg_mat = torch.nn.functional.one_hot(
            torch.from_numpy(np.transpose(different, (1, 2, 0))).long(), 2
        ).float()  # (q, k, batch, 2)
        mask = torch.from_numpy(np.transpose(blocked, (1, 2, 0))[..., None].astype("float32"))
        theirs, _ = attention(
            seq_first(h), None, mask, None, r, seg_mat,
            mems=seq_first(memory) if memory_length else None,
        )  # fmt: skip
    theirs = np.swapaxes(theirs.numpy(), 0, 1)  # LayerNorm(h + attention output)
    ours = layer(
        h,
        memory=memory if memory_length else None,
        attention_mask=~blocked,
        segment_matrix=different,
    )
    norm = keras.layers.LayerNormalization(epsilon=attention.layer_norm.eps)
    norm.build((None, D_MODEL))
    norm.set_weights([attention.layer_norm.weight.detach().numpy(),
                      attention.layer_norm.bias.detach().numpy()])  # fmt: skip
    assert max_abs_diff(norm(h + to_numpy(ours)), theirs) <= 1e-5


def test_relative_sinusoids_are_xlnets_encodings():
    model, _ = _xlnet_attention()
    with torch.no_grad():
        theirs = model.relative_positional_encoding(4, 9)[:, 0].numpy()  # distances 9 .. -3
    ours = relative_sinusoids(np.arange(9, -4, -1), D_MODEL)
    assert max_abs_diff(ours, theirs) <= 1e-5


def test_scores_depend_only_on_relative_positions():
    """Masked memory in front shifts every query and key by the same amount: the scores
    over the real keys do not change."""
    layer = RelativeMultiHeadAttention(HEADS, HEAD_DIM)
    x = _x(3, 6)
    _, base = layer(x, use_causal_mask=True, return_attention_scores=True)
    for shift in (1, 4, 11):
        _, shifted = layer(
            x,
            memory=_x(4, shift),
            memory_mask=np.zeros((BATCH, shift), bool),
            use_causal_mask=True,
            return_attention_scores=True,
        )
        shifted = to_numpy(shifted)
        np.testing.assert_array_equal(shifted[..., :shift], 0.0)
        np.testing.assert_allclose(shifted[..., shift:], to_numpy(base), atol=1e-6)


def test_no_gradient_reaches_the_memory():
    layer = RelativeMultiHeadAttention(HEADS, HEAD_DIM)
    x = _x(5, 4)
    memory = keras.Variable(_x(6, 3))
    layer(x, memory=memory)
    weights = [memory, *layer.trainable_weights]
    grads = gradients(lambda: ops.sum(layer(x, memory=memory) ** 2), weights)
    assert grads[0] is None or not np.any(to_numpy(grads[0]))
    assert all(g is not None and np.any(to_numpy(g)) for g in grads[1:])


def test_one_position_at_a_time_with_memory_equals_the_full_causal_pass():
    layer = RelativeMultiHeadAttention(HEADS, HEAD_DIM)
    x, memory = _x(7, 6), _x(8, 2)
    full = to_numpy(layer(x, memory=memory, use_causal_mask=True))
    for t in range(6):
        earlier = np.concatenate([memory, x[:, :t]], axis=1)  # the cache: earlier inputs
        step = layer(x[:, t : t + 1], memory=earlier, use_causal_mask=True)
        np.testing.assert_allclose(to_numpy(step)[:, 0], full[:, t], atol=1e-5)


def test_masks_clamp_and_keras_round_trip(tmp_path):
    layer = RelativeMultiHeadAttention(HEADS, HEAD_DIM, clamp_length=2)
    x, memory = _x(9, 5), _x(10, 3)
    padding = np.arange(5)[None] < np.array([[5], [3]])
    memory_mask = np.array([[True, True, False], [True, True, True]])
    _, scores = layer(
        x, memory=memory, value_mask=padding, memory_mask=memory_mask,
        return_attention_scores=True,
    )  # fmt: skip
    scores = to_numpy(scores)
    assert np.all(scores[0, :, :, 2] == 0) and np.all(scores[1, :, :, 6:] == 0)
    np.testing.assert_allclose(scores.sum(-1), 1.0, atol=1e-5)
    run_layer_test(
        RelativeMultiHeadAttention,
        {"num_heads": HEADS, "key_dim": HEAD_DIM, "use_bias": True, "clamp_length": 3},
        {"query": x, "memory": memory},
        expected_output_shape=(BATCH, 5, D_MODEL),
        expected_num_trainable_weights=11,
        tmp_path=tmp_path,
        unchanged_weights=("key/bias",),  # (q + u) · b_k is the same for every key
    )


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="num_heads=0"):
        RelativeMultiHeadAttention(0, 8)
    with pytest.raises(ValueError, match="clamp_length=-1"):
        RelativeMultiHeadAttention(2, 8, clamp_length=-1)
    layer = RelativeMultiHeadAttention(2, 8)
    with pytest.raises(ValueError, match="even"):
        layer(np.ones((1, 3, 5), "float32"))
    with pytest.raises(ValueError, match="memory.shape=\\(1, 2, 4\\)"):
        layer(np.ones((1, 3, 8), "float32"), memory=np.ones((1, 2, 4), "float32"))
    with pytest.raises(ValueError, match="segment_matrix"):
        layer(np.ones((1, 3, 8), "float32"), segment_matrix=np.ones((1, 3, 3), bool))
    with pytest.raises(ValueError, match="memory_mask"):
        layer(np.ones((1, 3, 8), "float32"), memory_mask=np.ones((1, 2), bool))
