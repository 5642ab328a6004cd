"""TransformerXLBlock: one position at a time with the earlier inputs as memory equals
the full causal pass (post- and pre-LN); padding keys change nothing; the query stream
placed by a `target_mapping` equals the full query stream at those positions; the
content stream does not depend on the query stream; serialisation; bad arguments
named."""

import numpy as np
import pytest

from keras_attn.layers import TransformerXLBlock
from tests.helpers import ALL_BACKENDS, max_abs_diff, run_layer_test, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)
BATCH, LENGTH, WIDTH = 2, 6, 16


def _x(seed, length=LENGTH):
    return np.random.default_rng(seed).normal(size=(BATCH, length, WIDTH)).astype("float32")


def test_layer_contract(tmp_path):
    output = run_layer_test(
        TransformerXLBlock,
        {"num_heads": 2, "intermediate_dim": 32, "activation": "gelu"},
        {"inputs": _x(0), "memory": _x(1, 3)},
        call_kwargs={"use_causal_mask": True},
        expected_output_shape=(BATCH, LENGTH, WIDTH),
        tmp_path=tmp_path,
    )
    assert np.isfinite(to_numpy(output)).all()


@pytest.mark.parametrize("norm_first", [False, True])
def test_one_position_at_a_time_with_memory_equals_the_causal_pass(norm_first):
    block = TransformerXLBlock(2, 32, norm_first=norm_first)
    x = _x(2)
    full = block(x, use_causal_mask=True)
    steps = [block(x[:, :1], use_causal_mask=True)]
    for i in range(1, LENGTH):
        steps.append(block(x[:, i : i + 1], memory=x[:, :i], use_causal_mask=True))
    assert max_abs_diff(np.concatenate([to_numpy(s) for s in steps], axis=1), full) < 1e-5


def test_padding_keys_change_nothing():
    block = TransformerXLBlock(2, 32)
    x = _x(6)
    padded = np.concatenate([x, _x(7, 3)], axis=1)  # 3 padding positions after each row
    padding_mask = np.arange(LENGTH + 3)[None].repeat(BATCH, 0) < LENGTH
    full = block(padded, memory=_x(8, 2), padding_mask=padding_mask, use_causal_mask=False)
    alone = block(x, memory=_x(8, 2))
    assert max_abs_diff(to_numpy(full)[:, :LENGTH], alone) < 1e-5


def _two_stream_masks(seed):
    rng = np.random.default_rng(seed)
    query = rng.random((BATCH, LENGTH, LENGTH)) < 0.6
    query[:, np.arange(LENGTH), np.arange(LENGTH)] = False  # a query never sees its token
    query[:, :, 0] = True  # and every query sees something
    content = query.copy()
    content[:, np.arange(LENGTH), np.arange(LENGTH)] = True
    segments = rng.random((BATCH, LENGTH, LENGTH)) < 0.5
    return content, query, segments


def test_target_mapping_places_the_query_stream_at_its_positions():
    block = TransformerXLBlock(2, 32, segment_attention=True)
    content, query, segments = _two_stream_masks(3)
    x, g_full = _x(4), _x(5)
    common = dict(attention_mask=content, segment_matrix=segments, query_attention_mask=query)
    h_full, out_full = block(x, query_stream=g_full, **common)
    positions = np.array([[4, 1, 2], [0, 5, 3]])
    mapping = np.eye(LENGTH, dtype="float32")[positions]  # (batch, 3, length)
    g = np.take_along_axis(g_full, positions[..., None], axis=1)
    h, out = block(x, query_stream=g, target_mapping=mapping, **common)
    expected = np.take_along_axis(to_numpy(out_full), positions[..., None], axis=1)
    assert max_abs_diff(out, expected) < 1e-5
    # The content stream is the same call without a query stream.
    h_alone = block(x, attention_mask=content, segment_matrix=segments)
    assert max_abs_diff(h, h_alone) < 1e-6 and max_abs_diff(h_full, h_alone) < 1e-6


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"num_heads": 0, "intermediate_dim": 8}, "num_heads"),
        ({"num_heads": 2, "intermediate_dim": 0}, "intermediate_dim"),
        ({"num_heads": 2, "intermediate_dim": 8, "dropout": 1.0}, "dropout"),
        ({"num_heads": 2, "intermediate_dim": 8, "clamp_length": -1}, "clamp_length"),
        ({"num_heads": 3, "intermediate_dim": 8}, "divisible by `num_heads`"),
    ],
)
def test_bad_arguments_are_named(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TransformerXLBlock(**kwargs)(_x(0))


def test_query_stream_arguments_are_checked():
    block = TransformerXLBlock(2, 32)
    with pytest.raises(ValueError, match="query_attention_mask"):
        block(_x(0), query_stream=_x(1))
    with pytest.raises(ValueError, match="need a `query_stream`"):
        block(_x(0), target_mapping=np.eye(LENGTH, dtype="float32")[None, :2].repeat(BATCH, 0))
