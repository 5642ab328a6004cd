"""GPTLanguageModel: causality, options, serialisation, and it learns a language;
grouped-query attention and rotary positions (a Llama-style decoder)."""

import keras
import numpy as np
import pytest

from keras_attn.models import GPTLanguageModel


def small(**kwargs):
    arguments = dict(
        vocabulary_size=30,
        num_layers=2,
        num_heads=2,
        hidden_dim=16,
        intermediate_dim=32,
        max_sequence_length=12,
        dropout=0.0,
    )
    arguments.update(kwargs)
    return GPTLanguageModel(**arguments)


@pytest.mark.parametrize("norm_first", [True, False])
def test_causal_and_round_trip(norm_first, tmp_path):
    model = small(norm_first=norm_first, position_embedding="sinusoidal", score="cosine")
    tokens = np.array([[5, 6, 7, 8, 9, 10]])
    logits = np.asarray(model(tokens))
    changed = tokens.copy()
    changed[0, 4:] = [20, 21]
    # Positions before the change see the same past, so give the same logits.
    np.testing.assert_allclose(np.asarray(model(changed))[0, :4], logits[0, :4], atol=1e-6)
    assert not np.allclose(np.asarray(model(changed))[0, 4:], logits[0, 4:])
    model.save(tmp_path / "gpt.keras")
    restored = keras.saving.load_model(tmp_path / "gpt.keras")
    np.testing.assert_allclose(restored(tokens), logits, atol=1e-6)
    assert restored.get_config() == model.get_config()


def test_output_is_tied_to_the_token_embedding():
    model = small()
    hidden = np.random.default_rng(0).normal(size=(1, 2, 16)).astype("float32")
    expected = hidden @ np.asarray(model.token_embedding.embeddings).T
    np.testing.assert_allclose(model._logits(hidden), expected, atol=1e-5)


@pytest.mark.slow
def test_learns_a_deterministic_language():
    """Counting sequences (k, k+1, k+2, ...): the next token is always knowable."""
    keras.utils.set_random_seed(0)
    model = small(vocabulary_size=24, max_sequence_length=10)
    model.compile(optimizer=keras.optimizers.Adam(3e-3))
    starts = np.random.default_rng(0).integers(1, 14, 2048)
    windows = (starts[:, None] + np.arange(11)[None]).astype("int32")
    model.fit(windows[:, :-1], windows[:, 1:], batch_size=64, epochs=6, verbose=0)
    result = model.generate([[3, 4], [9]], max_length=8)
    assert result.tolist() == [[3, 4, 5, 6, 7, 8, 9, 10], [9, 10, 11, 12, 13, 14, 15, 16]]


@pytest.mark.slow
@pytest.mark.parametrize("kv_heads", [1, 2])
def test_grouped_query_rotary_decoder_caches_kv_heads_and_round_trips(kv_heads, tmp_path):
    """`num_key_value_heads` K and `position_embedding="rotary"`: K heads per cache,
    cached decoding gives the tokens of full re-runs, no position table, and the model
    saves, loads and refuses GPT-2's layout."""
    model = small(num_heads=4, num_key_value_heads=kv_heads, position_embedding="rotary")
    assert model.position_embedding is None
    attention = model.transformer_layers[0].self_attention
    assert (attention.num_key_value_heads, attention.rotary_max_wavelength) == (kv_heads, 1e4)
    caches = model._empty_caches(3, 12)
    assert tuple(caches[0].shape) == (3, 2, 12, kv_heads, 4)
    prompt = [[5, 6, 7], [8], [9, 10]]
    for strategy in ("greedy", "beam"):
        cached = model.generate(prompt, max_length=12, strategy=strategy, jit_compile=False)
        rerun = model.generate(prompt, 12, strategy=strategy, use_cache=False, jit_compile=False)
        np.testing.assert_array_equal(cached, rerun)
    tokens = np.array([[5, 6, 7, 8, 9, 10]])
    model.save(tmp_path / "gqa.keras")
    restored = keras.saving.load_model(tmp_path / "gqa.keras")
    np.testing.assert_allclose(restored(tokens), model(tokens), atol=1e-6)
    assert restored.get_config()["num_key_value_heads"] == kv_heads
    with pytest.raises(ValueError, match="num_key_value_heads"):
        small(num_heads=4, num_key_value_heads=kv_heads, scale_embeddings=False).save_pretrained(
            tmp_path / "hf"
        )


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(hidden_dim=10, num_heads=4), "divisible"),
        (dict(num_heads=4, num_key_value_heads=3), "num_key_value_heads"),
        (dict(num_key_value_heads=0), "num_key_value_heads"),
        (dict(position_embedding="alibi"), "position_embedding"),
        (dict(max_sequence_length=0), "max_sequence_length"),
    ],
)
def test_bad_arguments(kwargs, match):
    with pytest.raises(ValueError, match=match):
        small(**kwargs)
