"""The logits processors against `transformers`' of the same names, one by one and in
`transformers`' order, and wired into decoding: a random Llama's greedy tokens with a
repetition penalty equal `transformers`' `generate`, and sampled tokens stay inside
what the filters keep."""

import numpy as np
import pytest
import torch

from keras_attn.models import (
    GenerationConfig,
    from_pretrained,
    min_p_filter,
    repetition_penalty,
    top_k_filter,
    top_p_filter,
)
from keras_attn.models.logits_processors import processors

generation = pytest.importorskip("transformers.generation.logits_process")


def _logits(seed, ties=False):
    rng = np.random.default_rng(seed)
    if ties:  # integer logits: many equal to the k-th
        return rng.integers(-3, 4, (4, 40)).astype("float32")
    return (3 * rng.standard_normal((4, 40))).astype("float32")


def _theirs(processor, logits, ids=None):
    ids = torch.zeros((len(logits), 1), dtype=torch.long) if ids is None else torch.tensor(ids)
    return processor(ids, torch.tensor(logits)).numpy()


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("ties", [False, True])
def test_each_filter_equals_transformers(seed, ties):
    logits = _logits(seed, ties)
    for k in (1, 5, 40, 100):
        expected = _theirs(generation.TopKLogitsWarper(k), logits)
        np.testing.assert_allclose(np.asarray(top_k_filter(logits, k)), expected, atol=1e-6)
    for p in (0.05, 0.5, 0.9, 1.0):
        expected = _theirs(generation.TopPLogitsWarper(p), logits)
        if not ties:  # ties at the cut are ordered by the sort, which may differ
            np.testing.assert_allclose(np.asarray(top_p_filter(logits, p)), expected, atol=1e-6)
    for p in (0.0, 0.05, 0.3, 1.0):
        expected = _theirs(generation.MinPLogitsWarper(p), logits)
        np.testing.assert_allclose(np.asarray(min_p_filter(logits, p)), expected, atol=1e-6)


def test_the_repetition_penalty_equals_transformers_on_the_tokens_it_counts():
    logits = _logits(2)
    ids = np.random.default_rng(3).integers(0, 40, (4, 9))
    for penalty in (0.5, 1.0, 1.3, 2.0):
        expected = _theirs(generation.RepetitionPenaltyLogitsProcessor(penalty), logits, ids)
        np.testing.assert_allclose(
            np.asarray(repetition_penalty(logits, ids, penalty)), expected, atol=1e-6
        )
        # Only the first 5 positions count: as `transformers` given those 5.
        expected = _theirs(generation.RepetitionPenaltyLogitsProcessor(penalty), logits, ids[:, :5])
        mask = np.arange(9)[None, :] < 5
        np.testing.assert_allclose(
            np.asarray(repetition_penalty(logits, ids, penalty, mask)), expected, atol=1e-6
        )


def test_a_configs_processors_run_in_transformers_order():
    logits, ids = _logits(4), np.random.default_rng(5).integers(0, 40, (4, 6))
    config = GenerationConfig(
        strategy="sample", temperature=0.7, top_k=12, top_p=0.8, min_p=0.05, repetition_penalty=1.2
    )
    chain = generation.LogitsProcessorList(
        [
            generation.RepetitionPenaltyLogitsProcessor(1.2),
            generation.TemperatureLogitsWarper(0.7),
            generation.TopKLogitsWarper(12),
            generation.TopPLogitsWarper(0.8),
            generation.MinPLogitsWarper(0.05),
        ]
    )
    expected = _theirs(chain, logits, ids)
    ours = processors(config)(logits, ids, np.ones((1, 6), bool))
    np.testing.assert_allclose(np.asarray(ours), expected, rtol=1e-6, atol=1e-6)
    assert processors(GenerationConfig()) is None  # greedy alone: nothing to do
    # Greedy takes the penalty only (temperature and filters are sampling's).
    greedy = processors(GenerationConfig(temperature=0.5, top_k=3, repetition_penalty=1.2))
    expected = _theirs(generation.RepetitionPenaltyLogitsProcessor(1.2), logits, ids)
    np.testing.assert_allclose(np.asarray(greedy(logits, ids, None)), expected, atol=1e-6)


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """A random `transformers` Llama and ours read from its folder."""
    import transformers

    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=61, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
    )  # fmt: skip
    theirs = transformers.LlamaForCausalLM(config).eval()
    folder = tmp_path_factory.mktemp("llama")
    theirs.save_pretrained(folder)
    return theirs, from_pretrained(folder)


@pytest.mark.slow
def test_greedy_with_a_repetition_penalty_gives_transformers_tokens(llama):
    theirs, ours = llama
    prompt, found = np.array([[5, 9, 9, 30, 7]]), []
    for penalty in (1.0, 1.8):
        with torch.no_grad():
            expected = theirs.generate(
                torch.tensor(prompt), max_new_tokens=14, do_sample=False,
                repetition_penalty=penalty, eos_token_id=None, pad_token_id=0,
            )  # fmt: skip
        tokens = ours.generate(prompt, max_length=19, strategy="greedy", repetition_penalty=penalty)
        np.testing.assert_array_equal(np.asarray(tokens), expected.numpy())
        found.append(np.asarray(tokens))
    assert not np.array_equal(*found)  # the penalty changed the continuation
    # The exported graph's decoder (one beam, core TensorFlow ops): the same tokens.
    config = GenerationConfig(max_length=19, repetition_penalty=1.8)
    function = ours.decode_function(config, jit_compile=False, portable=True)
    padded = np.pad(prompt, ((0, 0), (0, 14)), constant_values=ours.pad_token_id)
    tokens, _ = function(padded.astype("int32"), np.array([5], "int32"))
    np.testing.assert_array_equal(np.asarray(tokens), found[1])


@pytest.mark.slow
def test_sampled_tokens_stay_inside_what_the_filters_keep(llama):
    theirs, ours = llama
    prompt = np.array([[5, 9, 9, 30, 7]] * 3)
    options = dict(max_length=17, strategy="sample", top_k=3, min_p=0.3, seed=4)
    tokens = np.asarray(ours.generate(prompt, **options))
    np.testing.assert_array_equal(tokens, np.asarray(ours.generate(prompt, **options)))
    with torch.no_grad():
        logits = theirs(torch.tensor(tokens)).logits.numpy()
    for step in range(5, 17):  # each token among the 3 likeliest and above min-p's floor
        kept = min_p_filter(top_k_filter(logits[:, step - 1], 3), 0.3)
        chosen = np.take_along_axis(np.asarray(kept), tokens[:, step : step + 1], axis=1)
        assert np.isfinite(chosen).all(), step


@pytest.mark.parametrize(
    "settings, match",
    [
        (dict(min_p=1.5), "min_p"),
        (dict(min_p=-0.1), "min_p"),
        (dict(repetition_penalty=0.0), "repetition_penalty"),
        (dict(repetition_penalty=float("nan")), "repetition_penalty"),
        (dict(repetition_penalty=float("inf")), "repetition_penalty"),
        (dict(min_p=float("nan")), "min_p"),
        (dict(strategy="beam", num_beams=2, repetition_penalty=1.2), "beam search"),
    ],
)
def test_bad_settings_are_named(settings, match):
    with pytest.raises(ValueError, match=match):
        GenerationConfig(**settings)


def test_keras_hubs_sampler_names_and_instances_mean_our_settings():
    from keras_hub import samplers

    from keras_attn.models.generation_config import sampler_settings

    assert sampler_settings("top_k") == {"strategy": "sample", "top_k": 5}  # keras-hub's k
    assert sampler_settings("beam") == {"strategy": "beam", "num_beams": 5}
    found = sampler_settings(samplers.TopPSampler(p=0.5, k=9, temperature=0.7, seed=2))
    assert found == {"strategy": "sample", "top_p": 0.5, "top_k": 9, "temperature": 0.7, "seed": 2}
    for bad in ("contrastive", "nucleus", samplers.ContrastiveSampler()):
        with pytest.raises(ValueError, match="`sampler` to be one of"):
            sampler_settings(bad)
    with pytest.raises(ValueError, match="one beam returned"):
        sampler_settings(samplers.BeamSampler(return_all_beams=True))


@pytest.mark.slow
def test_generate_takes_a_keras_hub_sampler(llama):
    from keras_hub import samplers

    _, ours = llama
    prompt = np.array([[5, 9, 9, 30, 7]] * 2)
    named = ours.generate(prompt, max_length=12, sampler="top_k", seed=3)
    np.testing.assert_array_equal(
        named, ours.generate(prompt, max_length=12, strategy="sample", top_k=5, seed=3)
    )
    sampler = samplers.TopPSampler(p=0.5, temperature=0.7, seed=2)
    np.testing.assert_array_equal(
        ours.generate(prompt, max_length=12, sampler=sampler),
        ours.generate(prompt, max_length=12, strategy="sample", top_p=0.5, temperature=0.7, seed=2),
    )
    greedy = ours.generate(prompt, max_length=12)
    np.testing.assert_array_equal(ours.generate(prompt, max_length=12, sampler="greedy"), greedy)
