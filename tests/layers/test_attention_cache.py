"""Key/value caches: decoding one position at a time equals the full causal pass."""

import numpy as np
import pytest
from keras import ops

from keras_attn.layers import MultiHeadAttention, TransformerDecoderBlock
from keras_attn.layers.scoring import lookup
from tests.helpers import ALL_BACKENDS, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

BATCH, SRC, TGT, DIM, HEADS = 2, 6, 7, 16, 4


def _x(seed, length):
    return np.random.default_rng(seed).normal(size=(BATCH, length, DIM)).astype("float32")


@pytest.mark.parametrize("score", sorted(lookup.SCORES))
def test_self_attention_cache_matches_full_causal_pass(score):
    layer = MultiHeadAttention(HEADS, DIM // HEADS, score=score)
    x = _x(0, TGT)
    full = to_numpy(layer(x, x, use_causal_mask=True))
    cache = layer.compute_cache(np.zeros_like(x))
    steps = []
    for i in range(TGT):
        out, cache = layer(
            x[:, i : i + 1],
            x[:, i : i + 1],
            use_causal_mask=True,
            cache=cache,
            cache_update_index=i,
        )
        steps.append(to_numpy(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)
    # The cache now holds the projections of every position.
    np.testing.assert_allclose(to_numpy(cache), to_numpy(layer.compute_cache(x)), atol=1e-6)


def test_prefill_then_steps_and_scores():
    layer = MultiHeadAttention(HEADS, DIM // HEADS)
    x = _x(1, TGT)
    full, full_scores = layer(x, x, use_causal_mask=True, return_attention_scores=True)
    cache = layer.compute_cache(np.zeros_like(x))
    prefix, scores, cache = layer(
        x[:, :4],
        x[:, :4],
        use_causal_mask=True,
        cache=cache,
        cache_update_index=0,
        return_attention_scores=True,
    )
    np.testing.assert_allclose(to_numpy(prefix), to_numpy(full)[:, :4], atol=1e-5)
    np.testing.assert_allclose(to_numpy(scores), to_numpy(full_scores)[:, :, :4], atol=1e-6)
    rest, cache = layer(
        x[:, 4:],
        x[:, 4:],
        use_causal_mask=True,
        cache=cache,
        cache_update_index=ops.convert_to_tensor(4),
    )
    np.testing.assert_allclose(to_numpy(rest), to_numpy(full)[:, 4:], atol=1e-5)


def test_cross_attention_cache_replaces_projection():
    layer = MultiHeadAttention(HEADS, DIM // HEADS, score="additive")
    query, source = _x(2, TGT), _x(3, SRC)
    padding = np.arange(SRC)[None] < np.array([[SRC], [3]])
    expected = layer(query, source, value_mask=padding)
    cached = layer(query, source, value_mask=padding, cache=layer.compute_cache(source))
    np.testing.assert_allclose(to_numpy(cached[0]), to_numpy(expected), atol=1e-6)


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("cross", [False, True])
def test_decoder_block_cached_steps_match_full_pass(norm_first, cross):
    block = TransformerDecoderBlock(HEADS, 32, norm_first=norm_first, dropout=0.3)
    target, source = _x(4, TGT), _x(5, SRC) if cross else None
    padding = np.arange(SRC)[None] < np.array([[SRC], [4]])
    encoder_args = dict(encoder_sequence=source, encoder_padding_mask=padding) if cross else {}
    full = to_numpy(block(target, **encoder_args))
    self_cache = block.self_attention.compute_cache(np.zeros_like(target))
    if cross:
        encoder_args["cross_attention_cache"] = block.cross_attention.compute_cache(source)
    steps = []
    for i in range(TGT):
        out, self_cache = block(
            target[:, i : i + 1],
            self_attention_cache=self_cache,
            self_attention_cache_update_index=i,
            **encoder_args,
        )
        steps.append(to_numpy(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-5)


def test_bad_cache_arguments():
    layer = MultiHeadAttention(HEADS, DIM // HEADS)
    x = _x(6, TGT)
    with pytest.raises(ValueError, match="cache_update_index` needs a `cache"):
        layer(x, x, cache_update_index=0)
    with pytest.raises(ValueError, match=r"Expected `cache` of shape \(batch, 2, length"):
        layer(
            x,
            x,
            cache=np.zeros((BATCH, 2, TGT, HEADS + 1, DIM // HEADS), "float32"),
            cache_update_index=0,
        )
    with pytest.raises(ValueError, match="key_dim == value_dim"):
        MultiHeadAttention(HEADS, 4, value_dim=8).compute_cache(x)
    block = TransformerDecoderBlock(HEADS, 32)
    block(x)
    with pytest.raises(ValueError, match="go together"):
        block(x[:, :1], self_attention_cache=block.self_attention.compute_cache(x))
    with pytest.raises(ValueError, match="has no cross-attention"):
        block(x, cross_attention_cache=np.zeros((BATCH, 2, SRC, HEADS, 4), "float32"))
