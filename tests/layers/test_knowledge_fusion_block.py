"""ERNIE's `KnowledgeFusionBlock` (issue 60, acceptance 3): equal to the paper's
equations transcribed loop by loop on three backends; a token without an entity does
not depend on the entity inputs; the layer's round trips and its refusals."""

import math

import numpy as np
import pytest

from keras_attn.layers import KnowledgeFusionBlock
from tests import references
from tests.helpers import ALL_BACKENDS, run_layer_test, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)
BATCH, LENGTH, TOKEN_DIM, ENTITY_DIM, HEADS, ENTITY_HEADS, FUSED = 2, 6, 8, 6, 2, 3, 12


def _inputs(seed=0):
    rng = np.random.default_rng(seed)
    tokens = rng.normal(size=(BATCH, LENGTH, TOKEN_DIM)).astype("float32")
    entities = rng.normal(size=(BATCH, LENGTH, ENTITY_DIM)).astype("float32")
    padding = np.arange(LENGTH)[None] < np.array([[LENGTH], [4]])
    entity_mask = np.array([[0, 1, 0, 1, 1, 0], [1, 0, 0, 1, 0, 0]], bool)
    return tokens, entities, padding, entity_mask


def _gelu(x):
    return 0.5 * x * (1.0 + math.erf(x / math.sqrt(2.0)))


def _layer_norm(x, gamma, beta, epsilon):
    mean = sum(x) / len(x)
    variance = sum((v - mean) ** 2 for v in x) / len(x)
    return [
        (v - mean) / math.sqrt(variance + epsilon) * g + b
        for v, g, b in zip(x, gamma, beta, strict=True)
    ]


def _sublayer(x, mask, weights, prefix, epsilon):
    """`LayerNorm(x + MH-ATT(x))`, keys limited by `mask` (batch, length)."""
    w = {
        f"{name}_{kind}": weights[f"{prefix}/{layer}/{kind}"]
        for name, layer in (("query", "query"), ("key", "key"), ("value", "value"),
                            ("output", "attention_output"))
        for kind in ("kernel", "bias")
    }  # fmt: skip
    attended, _ = references.multi_head_attention(
        x, x, x, w, lambda h, q, k: references.scaled_dot(q, k),
        mask=np.repeat(mask[:, None, :], x.shape[1], axis=1),
    )  # fmt: skip
    gamma, beta = weights[f"{prefix}_layer_norm/gamma"], weights[f"{prefix}_layer_norm/beta"]
    return np.array([[_layer_norm(list(x[b, j] + attended[b, j]), gamma, beta, epsilon)
                      for j in range(x.shape[1])] for b in range(x.shape[0])])  # fmt: skip


def _paper(tokens, entities, padding, entity_mask, weights, epsilon, residual):
    """Zhang et al. (2019), equations 4 to 6, one token at a time; `residual`: the
    outputs of ERNIE's released code, `LayerNorm(x̃ + W h + b)`, in place of σ."""
    present = entity_mask & padding
    w_tilde = _sublayer(tokens.astype("float64"), padding, weights, "token_attention", epsilon)
    e_in = entities.astype("float64") * present[..., None]
    e_tilde = _sublayer(e_in, present, weights, "entity_attention", epsilon)
    wt, bt = weights["fusion_token_dense/kernel"], weights["fusion_token_dense/bias"]
    we = weights["fusion_entity_dense/kernel"]
    ot, obt = weights["token_output_dense/kernel"], weights["token_output_dense/bias"]
    oe, obe = weights["entity_output_dense/kernel"], weights["entity_output_dense/bias"]
    new_tokens = np.zeros(tokens.shape)
    new_entities = np.zeros(entities.shape)
    for b in range(tokens.shape[0]):
        for j in range(tokens.shape[1]):
            h = []
            for u in range(wt.shape[1]):
                total = bt[u] + sum(w_tilde[b, j, i] * wt[i, u] for i in range(wt.shape[0]))
                if present[b, j]:  # the token's entity: W̃_e ẽ_k
                    total += sum(e_tilde[b, j, i] * we[i, u] for i in range(we.shape[0]))
                h.append(_gelu(total))
            token = [
                obt[o] + sum(h[u] * ot[u, o] for u in range(len(h))) for o in range(ot.shape[1])
            ]
            entity = [
                obe[o] + sum(h[u] * oe[u, o] for u in range(len(h))) for o in range(oe.shape[1])
            ]
            if residual:
                token = _layer_norm(
                    [w_tilde[b, j, o] + token[o] for o in range(len(token))],
                    weights["token_output_layer_norm/gamma"],
                    weights["token_output_layer_norm/beta"],
                    epsilon,
                )
                entity = _layer_norm(
                    [e_tilde[b, j, o] + entity[o] for o in range(len(entity))],
                    weights["entity_output_layer_norm/gamma"],
                    weights["entity_output_layer_norm/beta"],
                    epsilon,
                )
            else:
                token, entity = [_gelu(v) for v in token], [_gelu(v) for v in entity]
            new_tokens[b, j] = token
            if present[b, j]:
                new_entities[b, j] = entity
    return new_tokens, new_entities


def _block(**kwargs):
    return KnowledgeFusionBlock(
        num_heads=HEADS, intermediate_dim=FUSED, entity_num_heads=ENTITY_HEADS, **kwargs
    )


@pytest.mark.parametrize("residual", [False, True])
def test_the_block_equals_the_papers_equations_loop_by_loop(residual):
    tokens, entities, padding, entity_mask = _inputs()
    block = _block(bias_initializer="random_normal", residual=residual)
    new_tokens, new_entities = block(
        tokens, entities, padding_mask=padding, entity_mask=entity_mask
    )
    weights = {w.path.split("/", 1)[1]: to_numpy(w).astype("float64") for w in block.weights}
    expected_tokens, expected_entities = _paper(
        tokens, entities, padding, entity_mask, weights, block.layer_norm_epsilon, residual
    )
    real = padding[..., None]
    np.testing.assert_allclose(to_numpy(new_tokens) * real, expected_tokens * real, atol=1e-5)
    np.testing.assert_allclose(to_numpy(new_entities), expected_entities, atol=1e-5)


def test_a_token_without_an_entity_ignores_the_entity_inputs():
    tokens, entities, padding, entity_mask = _inputs()
    block = _block()
    before, _ = block(tokens, entities, padding_mask=padding, entity_mask=entity_mask)
    other = entities + np.random.default_rng(5).normal(size=entities.shape).astype("float32")
    after, _ = block(tokens, other, padding_mask=padding, entity_mask=entity_mask)
    moved = np.abs(to_numpy(after) - to_numpy(before)).max(-1)
    without = ~entity_mask & padding
    assert moved[without].max() == 0.0  # bit for bit
    assert moved[entity_mask & padding].min() > 1e-4  # the fused tokens do move


def test_round_trips_and_refusals(tmp_path):
    tokens, entities, padding, entity_mask = _inputs()
    run_layer_test(
        KnowledgeFusionBlock,
        dict(num_heads=HEADS, intermediate_dim=FUSED, entity_num_heads=ENTITY_HEADS),
        dict(tokens=tokens, entities=entities, entity_mask=entity_mask),
        expected_output_shape=tokens.shape,
        tmp_path=tmp_path,
        # A key bias adds the same q·b_k to every key's score: its gradient is zero;
        # the fit trains the first output (the tokens), not the entities' projection.
        unchanged_weights=(
            "token_attention/key/bias",
            "entity_attention/key/bias",
            "entity_output_dense/kernel",
            "entity_output_dense/bias",
            "entity_output_layer_norm/gamma",
            "entity_output_layer_norm/beta",
        ),
    )
    with pytest.raises(
        ValueError, match="entity_dim \\(6\\) must be divisible by `entity_num_heads`"
    ):
        KnowledgeFusionBlock(num_heads=2, intermediate_dim=4, entity_num_heads=4)(tokens, entities)
    with pytest.raises(ValueError, match="`entities` of shape \\(batch, length, entity_dim\\)"):
        _block()(tokens, entities[0])
    with pytest.raises(ValueError, match="entity_mask"):
        _block()(tokens, entities, entity_mask=entity_mask[:, :3])
    with pytest.raises(ValueError, match="entity_num_heads"):
        KnowledgeFusionBlock(num_heads=2, intermediate_dim=4, entity_num_heads=0)
