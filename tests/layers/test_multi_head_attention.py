"""MultiHeadAttention: parity with torch and Keras, the paper's formula, bad input."""

import keras
import numpy as np
import pytest
import torch

from keras_attn.layers import MultiHeadAttention, scoring
from tests import references
from tests.helpers import ALL_BACKENDS, max_abs_diff, run_layer_test, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

BATCH, Q_LEN, K_LEN, DIM, HEADS = 3, 5, 7, 16, 4


def _inputs(seed=0, q_len=Q_LEN, k_len=K_LEN, dim=DIM):
    rng = np.random.default_rng(seed)
    query = rng.normal(size=(BATCH, q_len, dim)).astype("float32")
    value = rng.normal(size=(BATCH, k_len, dim)).astype("float32")
    return query, value


def _padding(lengths, length):
    return np.arange(length)[None, :] < np.array(lengths)[:, None]  # True = real token


def _torch_mha_from(layer, dim):
    """A torch.nn.MultiheadAttention holding `layer`'s weights (torch: x @ W^T + b)."""
    qk, qb, kk, kb, vk, vb, ok, ob = [to_numpy(w) for w in layer.get_weights()]
    mha = torch.nn.MultiheadAttention(dim, layer.num_heads, batch_first=True)
    with torch.no_grad():
        mha.in_proj_weight.copy_(
            torch.from_numpy(np.concatenate([w.reshape(dim, -1).T for w in (qk, kk, vk)]))
        )
        mha.in_proj_bias.copy_(
            torch.from_numpy(np.concatenate([qb.ravel(), kb.ravel(), vb.ravel()]))
        )
        mha.out_proj.weight.copy_(torch.from_numpy(ok.reshape(-1, dim).T))
        mha.out_proj.bias.copy_(torch.from_numpy(ob))
    return mha.eval()


@pytest.mark.parametrize("mask_kind", ["none", "padding", "causal", "padding+causal"])
def test_parity_with_torch_multihead_attention(mask_kind):
    query, _ = _inputs()
    value = np.random.default_rng(1).normal(size=(BATCH, Q_LEN, DIM)).astype("float32")
    layer = MultiHeadAttention(num_heads=HEADS, key_dim=DIM // HEADS)
    padding = _padding([5, 3, 1], Q_LEN) if "padding" in mask_kind else None
    causal = "causal" in mask_kind
    ours, our_scores = layer(
        query, value, value_mask=padding, use_causal_mask=causal, return_attention_scores=True
    )
    mha = _torch_mha_from(layer, DIM)
    with torch.no_grad():
        theirs, their_scores = mha(
            torch.from_numpy(query),
            torch.from_numpy(value),
            torch.from_numpy(value),
            key_padding_mask=None if padding is None else torch.from_numpy(~padding),
            attn_mask=torch.triu(torch.ones(Q_LEN, Q_LEN, dtype=torch.bool), 1) if causal else None,
            need_weights=True,
            average_attn_weights=False,
        )
    assert max_abs_diff(ours, theirs.numpy()) <= 1e-5
    assert max_abs_diff(our_scores, their_scores.numpy()) <= 1e-5


def test_parity_with_torch_when_query_and_key_lengths_differ():
    query, value = _inputs(2)
    layer = MultiHeadAttention(num_heads=HEADS, key_dim=DIM // HEADS)
    ours, our_scores = layer(query, value, return_attention_scores=True)
    with torch.no_grad():
        theirs, their_scores = _torch_mha_from(layer, DIM)(
            torch.from_numpy(query),
            torch.from_numpy(value),
            torch.from_numpy(value),
            average_attn_weights=False,
        )
    assert our_scores.shape == (BATCH, HEADS, Q_LEN, K_LEN)
    assert max_abs_diff(ours, theirs.numpy()) <= 1e-5
    assert max_abs_diff(our_scores, their_scores.numpy()) <= 1e-5


def _keras_pair(**kwargs):
    theirs = keras.layers.MultiHeadAttention(**kwargs)
    ours = MultiHeadAttention(**kwargs)
    return ours, theirs


@pytest.mark.parametrize(
    "case",
    ["none", "attention_mask", "causal", "keras_masks", "value_dim+output_shape", "separate_key"],
)
def test_parity_with_keras_multi_head_attention(case):
    query, value = _inputs(3)
    kwargs = dict(num_heads=HEADS, key_dim=8)
    if case == "value_dim+output_shape":
        kwargs.update(value_dim=6, output_shape=10)
    ours, theirs = _keras_pair(**kwargs)
    call = dict(return_attention_scores=True)
    key = None
    if case == "attention_mask":
        mask = np.random.default_rng(4).random((BATCH, Q_LEN, K_LEN)) > 0.4
        mask[:, :, 0] = True
        call["attention_mask"] = mask
    if case == "causal":
        value = np.random.default_rng(5).normal(size=(BATCH, Q_LEN, DIM)).astype("float32")
        call["use_causal_mask"] = True
    if case == "separate_key":
        key = np.random.default_rng(6).normal(size=(BATCH, K_LEN, 12)).astype("float32")
        call["key"] = key
    theirs_out = theirs(query, value, **call)
    ours.build(query.shape, value.shape, None if key is None else key.shape)
    ours.set_weights(theirs.get_weights())
    if case == "keras_masks":
        # Keras masks (from an Embedding with mask_zero) on query and value are honoured.
        q_ids = keras.Input((Q_LEN,), dtype="int32")
        v_ids = keras.Input((K_LEN,), dtype="int32")
        embed = keras.layers.Embedding(20, DIM, mask_zero=True)
        out_theirs = theirs(embed(q_ids), embed(v_ids), return_attention_scores=True)
        out_ours = ours(embed(q_ids), embed(v_ids), return_attention_scores=True)
        model = keras.Model([q_ids, v_ids], [*out_theirs, *out_ours])
        rng = np.random.default_rng(7)
        ids_q = rng.integers(1, 20, (BATCH, Q_LEN)) * _padding([5, 4, 2], Q_LEN)
        ids_v = rng.integers(1, 20, (BATCH, K_LEN)) * _padding([7, 3, 5], K_LEN)
        t_out, t_scores, o_out, o_scores = model([ids_q, ids_v])
        assert float(np.abs(to_numpy(o_scores)).sum()) > 0 and np.all(
            to_numpy(o_scores)[1, :, :, 3:] == 0
        )
        assert max_abs_diff(o_out, t_out) <= 1e-5 and max_abs_diff(o_scores, t_scores) <= 1e-5
        return
    ours_out = ours(query, value, **call)
    assert max_abs_diff(ours_out[0], theirs_out[0]) <= 1e-5
    assert max_abs_diff(ours_out[1], theirs_out[1]) <= 1e-5


def test_symbolic_scores_shape_is_right_when_lengths_differ():
    query, value = keras.Input((Q_LEN, DIM)), keras.Input((K_LEN, DIM))
    _, scores = MultiHeadAttention(HEADS, 8)(query, value, return_attention_scores=True)
    assert tuple(scores.shape) == (None, HEADS, Q_LEN, K_LEN)


@pytest.mark.parametrize("name", sorted(scoring.SCORES))
def test_every_score_matches_the_paper_formula_end_to_end(name):
    query, value = _inputs(8)
    key = np.random.default_rng(9).normal(size=(BATCH, K_LEN, 12)).astype("float32")
    mask = np.random.default_rng(10).random((BATCH, Q_LEN, K_LEN)) > 0.3
    mask[0, 1] = False  # a query with every key masked
    layer = MultiHeadAttention(HEADS, 6, value_dim=5, score=name)
    output, probabilities = layer(
        query, value, key=key, attention_mask=mask, return_attention_scores=True
    )
    w = [to_numpy(v, "float64") for v in layer.weights]
    names = [
        "query_kernel",
        "query_bias",
        "key_kernel",
        "key_bias",
        "value_kernel",
        "value_bias",
        "output_kernel",
        "output_bias",
    ]
    weights = dict(zip(names, w[:8], strict=True))
    score = layer.score_layer

    def head_score(h, q, k):
        if name == "dot":
            return references.dot(q, k)
        if name == "scaled_dot":
            return references.scaled_dot(q, k)
        if name == "cosine":
            return references.cosine(q, k, float(score.temperature[h]))
        if name == "general":
            return references.general(q, k, to_numpy(score.kernel[h], "float64"))
        return references.additive(
            q,
            k,
            to_numpy(score.query_kernel[h], "float64"),
            to_numpy(score.key_kernel[h], "float64"),
            to_numpy(score.score_vector[h, :, 0], "float64"),
        )

    expected, expected_probabilities = references.multi_head_attention(
        query.astype("float64"),
        value.astype("float64"),
        key.astype("float64"),
        weights,
        head_score,
        mask,
    )
    assert max_abs_diff(probabilities, expected_probabilities) <= 1e-5
    assert max_abs_diff(output, expected) <= 1e-5


def test_the_same_output_with_and_without_the_scores_returned():
    """On PyTorch a call that returns no scores runs the fused kernel
    (`ops.dot_product_attention`), one that does the einsum-and-softmax path: equal,
    also with padding, a causal mask and a query whose keys are all masked (zero)."""
    query, value = _inputs(13)
    layer = MultiHeadAttention(HEADS, 8)
    mask = np.ones((BATCH, Q_LEN, K_LEN), bool)
    mask[0, 1] = False  # every key masked for one query
    for kwargs in (
        {},
        {"value_mask": _padding([7, 3, 5], K_LEN)},
        {"attention_mask": mask, "use_causal_mask": True},
    ):
        fused = to_numpy(layer(query, value, **kwargs))
        reference, _ = layer(query, value, return_attention_scores=True, **kwargs)
        np.testing.assert_allclose(fused, to_numpy(reference), atol=1e-5, err_msg=str(kwargs))
    bias = to_numpy(layer.output_dense.bias)
    np.testing.assert_allclose(fused[0, 1], np.broadcast_to(bias, fused[0, 1].shape), atol=1e-6)


def test_dropout_applies_in_training_only_and_scores_are_before_dropout():
    query, value = _inputs(11)
    layer = MultiHeadAttention(HEADS, 8, dropout=0.5, seed=3)
    inference, scores = layer(query, value, return_attention_scores=True)
    trained, train_scores = layer(query, value, return_attention_scores=True, training=True)
    np.testing.assert_allclose(to_numpy(scores), to_numpy(train_scores), atol=1e-6)
    assert max_abs_diff(inference, trained) > 1e-3
    np.testing.assert_allclose(to_numpy(layer(query, value)), to_numpy(inference), atol=1e-6)


def test_layer_test(tmp_path):
    query, value = _inputs(12)
    run_layer_test(
        MultiHeadAttention,
        {"num_heads": 2, "key_dim": 4, "score": "general", "dropout": 0.1},
        {"query": query, "value": value},
        expected_output_shape=(BATCH, Q_LEN, DIM),
        expected_num_trainable_weights=9,
        tmp_path=tmp_path,
        unchanged_weights=("key/bias",),  # q^T W b_k is the same for every key
    )


def test_score_instance_is_a_template_and_round_trips():
    template = scoring.AdditiveScore(units=3)
    layer = MultiHeadAttention(2, 4, score=template)
    query, value = _inputs(13)
    layer(query, value)
    assert layer.score_layer is not template and layer.score_layer.units == 3
    clone = MultiHeadAttention.from_config(layer.get_config())
    clone(query, value)
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(
        to_numpy(clone(query, value)), to_numpy(layer(query, value)), atol=1e-6
    )
    assert clone.score_layer.units == 3


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_heads": 0, "key_dim": 4}, "num_heads=0"),
        ({"num_heads": 2, "key_dim": -1}, "key_dim=-1"),
        ({"num_heads": 2, "key_dim": 4.0}, "key_dim=4.0"),
        ({"num_heads": 2, "key_dim": 4, "value_dim": 0}, "value_dim=0"),
        ({"num_heads": 2, "key_dim": 4, "dropout": 1.0}, r"dropout=1.0"),
        ({"num_heads": 2, "key_dim": 4, "output_shape": (3, 0)}, r"output_shape=\(3, 0\)"),
        ({"num_heads": 2, "key_dim": 4, "score": "bilinear"}, "score='bilinear'"),
    ],
)
def test_bad_constructor_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        MultiHeadAttention(**kwargs)


def test_bad_inputs_raise_value_errors_naming_the_argument():
    query, value = _inputs(14)
    layer = MultiHeadAttention(2, 4)
    layer(query, value)
    with pytest.raises(ValueError, match=r"was built for last dimensions.*query.shape=\(3, 5, 8\)"):
        layer(query[..., :8], value)
    with pytest.raises(ValueError, match="key.shape=.*value.shape="):
        MultiHeadAttention(2, 4)(query, value, key=value[:, :3])
    with pytest.raises(ValueError, match=r"attention_mask.shape=\(3, 5, 6\)"):
        MultiHeadAttention(2, 4)(query, value, attention_mask=np.ones((BATCH, Q_LEN, 6), bool))
    wrong_batch = np.ones((BATCH + 1, Q_LEN, value.shape[1]), bool)  # was the backend's error
    with pytest.raises(
        ValueError, match=r"\(3, 5, 7\)\. Received: attention_mask.shape=\(4, 5, 7\)"
    ):
        MultiHeadAttention(2, 4)(query, value, attention_mask=wrong_batch)
    with pytest.raises(ValueError, match=r"query.shape=\(3, 16\)"):
        MultiHeadAttention(2, 4)(query[:, 0], value)
    with pytest.raises(ValueError, match=r"value_mask.shape=\(3, 4\)"):
        MultiHeadAttention(2, 4)(query, value, value_mask=np.ones((BATCH, 4), bool))
    # A value batch of 1 is not broadcast over the queries' (Keras's layer refuses it).
    for other in (value[:1], value[:2]):
        with pytest.raises(ValueError, match=r"same batch size.*query.shape=\(3, 5, 16\)"):
            MultiHeadAttention(2, 4)(query, other)
    with pytest.raises(ValueError, match=r"same batch size.*key.shape=\(1, "):
        MultiHeadAttention(2, 4)(query, value, key=value[:1])
    import keras

    if keras.backend.backend() == "tensorflow":  # torch's einsum broadcasts it (Keras 3.15)
        with pytest.raises(Exception):  # noqa: B017  (the reference refuses it: TF's error)
            keras.layers.MultiHeadAttention(2, 4)(query, value[:1])


def test_lora_projections_match_keras():
    # The projections run as 2-D matrix products on the EinsumDense kernels; a LoRA
    # projection is called as a layer instead, so LoRA still applies.
    query, value = _inputs(3)
    ours, theirs = _keras_pair(num_heads=HEADS, key_dim=8)
    theirs(query, value)
    ours.build(query.shape, value.shape)
    ours.set_weights(theirs.get_weights())
    rng = np.random.default_rng(8)
    for mine, keras_dense in (
        (ours.query_dense, theirs._query_dense),
        (ours.output_dense, theirs._output_dense),
    ):
        mine.enable_lora(2)
        keras_dense.enable_lora(2)
        for a, b in (
            (mine.lora_kernel_a, keras_dense.lora_kernel_a),
            (mine.lora_kernel_b, keras_dense.lora_kernel_b),
        ):
            weights = rng.normal(size=a.shape).astype("float32")
            a.assign(weights)
            b.assign(weights)
    before = ours(query, value)
    assert max_abs_diff(before, theirs(query, value)) <= 1e-5
    ours.query_dense.lora_kernel_b.assign(np.zeros(ours.query_dense.lora_kernel_b.shape, "float32"))
    assert max_abs_diff(ours(query, value), before) > 1e-3  # the LoRA weights are used
