"""`DisentangledAttention` equals `transformers`' `DisentangledSelfAttention` (DeBERTa-v2/v3)
with copied weights, shared and separate position projections, c2p and p2c alone and
together, with padding; the log buckets equal `make_log_bucket_position`; on every
backend; bad arguments named."""

import keras
import numpy as np
import pytest
import torch
from transformers import DebertaV2Config
from transformers.models.deberta_v2 import modeling_deberta_v2 as reference

from keras_attn.layers import DisentangledAttention
from keras_attn.layers.disentangled_attention import log_bucket_positions
from tests.helpers import ALL_BACKENDS, gradients, max_abs_diff, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

HEADS, HEAD_DIM, WIDTH, BUCKETS, MAX_DISTANCE = 2, 8, 16, 8, 32


def _config(share, attention_types):
    return DebertaV2Config(
        hidden_size=WIDTH,
        num_attention_heads=HEADS,
        relative_attention=True,
        position_buckets=BUCKETS,
        max_relative_positions=MAX_DISTANCE,
        pos_att_type=list(attention_types),
        share_att_key=share,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )


def _copy(theirs, ours):
    """Their Linear layers into our projections; our output projection the identity."""

    def dense(layer, linear):
        kernel = linear.weight.detach().numpy().T.reshape(WIDTH, HEADS, HEAD_DIM)
        layer.kernel.assign(kernel)
        layer.bias.assign(linear.bias.detach().numpy().reshape(HEADS, HEAD_DIM))

    dense(ours.query_dense, theirs.query_proj)
    dense(ours.key_dense, theirs.key_proj)
    dense(ours.value_dense, theirs.value_proj)
    if ours.position_key_dense is not None:
        dense(ours.position_key_dense, theirs.pos_key_proj)
    if ours.position_query_dense is not None:
        dense(ours.position_query_dense, theirs.pos_query_proj)
    ours.output_dense.kernel.assign(np.eye(WIDTH).reshape(HEADS, HEAD_DIM, WIDTH))
    ours.output_dense.bias.assign(np.zeros(WIDTH))


@pytest.mark.parametrize(
    "share, attention_types",
    [(True, ("c2p", "p2c")), (False, ("c2p", "p2c")), (False, ("c2p",)), (True, ("p2c",))],
)
def test_equals_transformers_disentangled_self_attention(share, attention_types):
    torch.manual_seed(0)
    theirs = reference.DisentangledSelfAttention(_config(share, attention_types)).eval()
    with torch.no_grad():
        for parameter in theirs.parameters():
            parameter.add_(0.1 * torch.randn_like(parameter))
    ours = DisentangledAttention(
        HEADS,
        HEAD_DIM,
        position_buckets=BUCKETS,
        max_relative_positions=MAX_DISTANCE,
        attention_types=attention_types,
        share_position_projections=share,
    )
    rng = np.random.default_rng(0)
    length = 20  # past the exact distances (BUCKETS // 2): log buckets are used
    x = rng.normal(size=(2, length, WIDTH)).astype("float32")
    positions = rng.normal(size=(2 * BUCKETS, WIDTH)).astype("float32")
    padding = np.ones((2, length), "int32")
    padding[1, 13:] = 0
    ours(x, positions, padding_mask=padding)
    _copy(theirs, ours)
    mask = torch.from_numpy(padding[:, None, :, None] * padding[:, None, None, :]).bool()
    with torch.no_grad():
        expected, probabilities = theirs(
            torch.from_numpy(x),
            mask,
            output_attentions=True,
            rel_embeddings=torch.from_numpy(positions),
        )
    got, scores = ours(x, positions, padding_mask=padding, return_attention_scores=True)
    real = padding.astype(bool)  # their padded queries attend uniformly: not compared
    assert np.abs(to_numpy(got)[real] - expected.numpy()[real]).max() <= 1e-5
    assert np.abs(to_numpy(scores)[0] - probabilities.numpy()[0]).max() <= 1e-5


def test_log_buckets_equal_transformers_and_keep_near_distances():
    relative = np.arange(-300, 301)[None]
    expected = reference.make_log_bucket_position(torch.from_numpy(relative), 256, 512)
    got = to_numpy(log_bucket_positions(relative, 256, 512))
    np.testing.assert_array_equal(got, expected.numpy())
    near = np.arange(-127, 128)
    np.testing.assert_array_equal(to_numpy(log_bucket_positions(near, 256, 512)), near)


@pytest.mark.backends("tensorflow")
@pytest.mark.parametrize("buckets, longest", [(16, 48), (256, 512)])
def test_log_buckets_survive_grappler_at_the_longest_distance(buckets, longest):
    """At `max_relative_positions - 1` the formula is exactly a whole number; TensorFlow's
    graph optimiser (on in TF Serving, before ONNX and OpenVINO conversion) used to
    round it up a bucket: its graph's buckets are the eager ones and transformers'."""
    import tensorflow as tf

    relative = np.arange(-2 * longest, 2 * longest + 1)
    expected = reference.make_log_bucket_position(torch.from_numpy(relative), buckets, longest)
    graph = tf.function(lambda r: log_bucket_positions(r, buckets, longest))
    options = tf.config.optimizer.get_experimental_options()
    tf.config.optimizer.set_experimental_options({"disable_meta_optimizer": False})
    try:
        optimised = graph(tf.constant(relative)).numpy()
    finally:  # conftest.py's setting back
        tf.config.optimizer.set_experimental_options(options)
    np.testing.assert_array_equal(optimised, expected.numpy())
    np.testing.assert_array_equal(to_numpy(log_bucket_positions(relative, buckets, longest)),
                                  expected.numpy())  # fmt: skip


def test_every_weight_learns_and_the_config_round_trips():
    layer = DisentangledAttention(HEADS, HEAD_DIM, position_buckets=4, max_relative_positions=16)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 6, WIDTH)).astype("float32")
    positions = rng.normal(size=(8, WIDTH)).astype("float32")
    layer(x, positions)
    grads = gradients(lambda: keras.ops.sum(layer(x, positions) ** 2), layer.trainable_variables)
    assert len(grads) == 8 and all(np.abs(to_numpy(g)).max() > 0 for g in grads)
    config = layer.get_config()
    again = DisentangledAttention.from_config(config)
    again(x, positions)
    again.set_weights(layer.get_weights())
    assert again.get_config() == config
    assert max_abs_diff(again(x, positions), layer(x, positions)) == 0.0


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="attention_types"):
        DisentangledAttention(2, 8, attention_types=("c2c",))
    with pytest.raises(ValueError, match="max_relative_positions"):
        DisentangledAttention(2, 8, position_buckets=256, max_relative_positions=100)
    with pytest.raises(ValueError, match="num_heads"):
        DisentangledAttention(0, 8)
