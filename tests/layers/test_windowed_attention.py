"""`window=W`: sliding-window attention equals full attention under the band mask
`|i - j| <= W` (causal: `i - W <= j <= i`) with padding, every scoring, the blocks and
the key/value cache; blockwise under XLA with unknown lengths; bad windows named."""

import keras
import numpy as np
import pytest

from keras_attn.layers import MultiHeadAttention, TransformerDecoderBlock, TransformerEncoderBlock
from tests.helpers import ALL_BACKENDS, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)

RNG = np.random.default_rng(0)


def _band(length, window, causal):
    i, j = np.arange(length)[:, None], np.arange(length)[None]
    band = np.abs(i - j) <= window
    return band & (j <= i) if causal else band


def _copy(layer, x, **kwargs):
    """An attention layer without a window holding `layer`'s weights."""
    config = {**layer.get_config(), "window": None, **kwargs}
    full = type(layer).from_config(config)
    full.build(x.shape, x.shape) if isinstance(layer, MultiHeadAttention) else full.build(x.shape)
    full.set_weights(layer.get_weights())
    return full


@pytest.mark.parametrize(
    "length, window, causal, score",
    [
        (150, 5, False, "scaled_dot"),  # three blocks of 64, the last one partial
        (150, 70, True, "scaled_dot"),  # a window wider than the minimum block
        (37, 3, False, "additive"),  # shorter than one block
        (200, 64, True, "general"),
        (129, 1, False, "cosine"),
    ],
)
def test_window_equals_the_band_mask(length, window, causal, score):
    x = RNG.normal(size=(2, length, 16)).astype("float32")
    mask = np.ones((2, length), bool)
    mask[1, length - 30 :] = False
    layer = MultiHeadAttention(2, 8, window=window, score=score)
    windowed = layer(x, x, query_mask=mask, value_mask=mask, use_causal_mask=causal)
    full = _copy(layer, x)
    band = np.broadcast_to(_band(length, window, causal), (2, length, length))
    expected = full(x, x, query_mask=mask, value_mask=mask, attention_mask=band)
    np.testing.assert_allclose(to_numpy(windowed), to_numpy(expected), atol=1e-5)
    # The scores, when asked for, come from the band-masked full form: zero off the band.
    _, scores = layer(x, x, value_mask=mask, use_causal_mask=causal, return_attention_scores=True)
    assert np.all(to_numpy(scores)[:, :, ~_band(length, window, causal)] == 0.0)


@pytest.mark.backends("tensorflow")  # lengths unknown when compiled: a TensorFlow graph
def test_blockwise_under_xla_with_unknown_lengths():
    import tensorflow as tf

    layer = MultiHeadAttention(2, 8, window=4)
    x = RNG.normal(size=(3, 90, 16)).astype("float32")
    eager = layer(x, x, use_causal_mask=True)

    @tf.function(jit_compile=True, input_signature=[tf.TensorSpec([None, None, 16], tf.float32)])
    def compiled(inputs):
        return layer(inputs, inputs, use_causal_mask=True)

    np.testing.assert_allclose(to_numpy(compiled(x)), to_numpy(eager), atol=1e-5)
    np.testing.assert_allclose(
        to_numpy(compiled(x[:, :70])),
        to_numpy(layer(x[:, :70], x[:, :70], use_causal_mask=True)),
        atol=1e-5,
    )


def test_blocks_and_cached_decoding_with_a_window():
    length, window = 100, 6
    x = RNG.normal(size=(2, length, 16)).astype("float32")
    padding = np.ones((2, length), bool)
    padding[1, 70:] = False
    band = np.broadcast_to(_band(length, window, False), (2, length, length))
    encoder = TransformerEncoderBlock(2, 32, window=window)
    got = encoder(x, padding_mask=padding)
    expected = _copy(encoder, x)(x, padding_mask=padding, attention_mask=band)
    np.testing.assert_allclose(to_numpy(got)[padding], to_numpy(expected)[padding], atol=1e-5)

    decoder = TransformerDecoderBlock(2, 32, window=window)
    full = decoder(x, use_causal_mask=True)
    expected = _copy(decoder, x)(x, decoder_attention_mask=band, use_causal_mask=True)
    np.testing.assert_allclose(to_numpy(full), to_numpy(expected), atol=1e-5)
    cache = decoder.self_attention.compute_cache(np.zeros((2, length, 16), "float32"))
    steps = []
    for t in range(length):
        out, cache = decoder(
            x[:, t : t + 1],
            self_attention_cache=cache,
            self_attention_cache_update_index=t,
            use_causal_mask=True,
        )
        steps.append(to_numpy(out))
    np.testing.assert_allclose(np.concatenate(steps, axis=1), to_numpy(full), atol=1e-5)


def test_window_serialises_and_bad_windows_are_named():
    block = TransformerDecoderBlock(2, 32, window=6)
    again = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(block))
    assert again.window == 6
    layer = MultiHeadAttention(2, 8, window=3)
    assert MultiHeadAttention.from_config(layer.get_config()).window == 3
    for bad in (0, -2, 1.5):
        with pytest.raises(ValueError, match="window"):
            MultiHeadAttention(2, 8, window=bad)
    with pytest.raises(ValueError, match="window=0"):
        TransformerEncoderBlock(2, 32, window=0)
