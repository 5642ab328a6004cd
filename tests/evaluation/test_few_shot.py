"""Few-shot evaluation: completion log-likelihoods equal `transformers`' GPT-2 (a random,
perturbed model saved with `save_pretrained`), with batching and left truncation; the
prompts, the normalisations and the accuracy follow GPT-3's description."""

import warnings

import numpy as np
import pytest
import torch

from keras_attn.evaluation import completion_log_likelihoods, evaluate_few_shot, few_shot_prompt
from keras_attn.models import GPTLanguageModel
from tests.models.gpt.test_gpt2_checkpoint import _perturbed

VOCABULARY = 61


@pytest.fixture(scope="module")
def gpt2(tmp_path_factory):
    """`(ours, theirs)`: one random GPT-2 of 16 positions in both libraries."""
    import transformers

    config = transformers.GPT2Config(
        vocab_size=VOCABULARY, n_positions=16, n_embd=32, n_layer=2, n_head=4
    )
    theirs = _perturbed(transformers.GPT2LMHeadModel(config))
    folder = tmp_path_factory.mktemp("gpt2")
    theirs.save_pretrained(folder)
    return GPTLanguageModel.from_pretrained(folder), theirs


def _reference(theirs, context, completion, max_length=16):
    """`transformers`, one pair at a time, no padding: the completion's summed log-probs."""
    ids = (context + completion)[-max_length:]
    with torch.no_grad():
        logits = theirs(torch.tensor([ids])).logits[0].double()
    log_probabilities = torch.log_softmax(logits, -1)
    n = len(completion)
    positions = range(len(ids) - n - 1, len(ids) - 1)
    return sum(float(log_probabilities[t, ids[t + 1]]) for t in positions)


def test_log_likelihoods_equal_transformers_gpt2_in_batches(gpt2):
    ours, theirs = gpt2
    rng = np.random.default_rng(0)
    contexts = [rng.integers(1, VOCABULARY, n).tolist() for n in (1, 3, 7, 10, 2)]
    completions = [rng.integers(1, VOCABULARY, n).tolist() for n in (1, 2, 4, 3, 5)]
    expected = [_reference(theirs, c, w) for c, w in zip(contexts, completions, strict=True)]
    for batch_size in (1, 2, 8):  # padding on the right changes nothing
        found = completion_log_likelihoods(ours, contexts, completions, batch_size=batch_size)
        np.testing.assert_allclose(found.values, expected, atol=1e-5, rtol=0)
    assert found.token_counts.tolist() == [1, 2, 4, 3, 5] and not found.truncated.any()


def test_decoders_score_only_the_completion_positions_as_the_full_logits_would():
    """The decoder-only models' path (logits only where a completion token is predicted:
    Gemma 3's vocabulary made full logits gigabytes) equals the full logits' sums, for
    a Llama and a Gemma with windows and completions of different lengths in a batch."""
    import keras

    from keras_attn.models import GemmaLanguageModel, LlamaLanguageModel

    keras.utils.set_random_seed(0)
    models = [
        LlamaLanguageModel(VOCABULARY, 2, 4, 32, 64, num_key_value_heads=2),
        GemmaLanguageModel(VOCABULARY, 2, 2, 32, 64, head_dim=16, window=3, global_every=2),
    ]
    rng = np.random.default_rng(0)
    contexts = [list(rng.integers(1, VOCABULARY, n)) for n in (5, 9, 1, 12)]
    completions = [list(rng.integers(1, VOCABULARY, n)) for n in (1, 3, 2, 1)]
    for model in models:
        found = completion_log_likelihoods(model, contexts, completions, batch_size=3).values
        batch = [(c + w, len(w), False) for c, w in zip(contexts, completions, strict=True)]
        length = max(len(ids) for ids, _, _ in batch)
        token_ids = np.zeros((len(batch), length), "int32")
        for row, (ids, _, _) in enumerate(batch):
            token_ids[row, : len(ids)] = ids
        logits = np.asarray(model(token_ids), "float64")
        logits -= logits.max(-1, keepdims=True)
        log_probabilities = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
        expected = [
            sum(
                log_probabilities[row, t, ids[t + 1]] for t in range(len(ids) - n - 1, len(ids) - 1)
            )
            for row, (ids, n, _) in enumerate(batch)
        ]
        np.testing.assert_allclose(found, expected, atol=1e-5)
        positions = np.array([[0, 4], [3, 3], [7, 1], [12, 0]])  # 13 positions
        picked = np.asarray(model.logits_at(token_ids, positions))
        full = np.asarray(model(token_ids))
        np.testing.assert_allclose(
            picked, np.take_along_axis(full, positions[..., None], 1), atol=1e-5
        )


def test_a_prompt_too_long_is_cut_from_the_left_and_said_so(gpt2):
    ours, theirs = gpt2
    context, completion = list(range(1, 20)), [7, 8, 9]  # 22 tokens, 16 positions
    with pytest.warns(
        UserWarning, match=r"1 of 2 \(context, completion\) pairs were longer than the model's 16"
    ):
        found = completion_log_likelihoods(ours, [context, [3]], [completion, [4]])
    assert found.truncated.tolist() == [True, False]
    np.testing.assert_allclose(found.values[0], _reference(theirs, context, completion), atol=1e-5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a caller that counts the cuts itself: no warning
        quiet = completion_log_likelihoods(ours, [context], [completion], warn_cut=False)
    assert quiet.truncated.tolist() == [True] and quiet.values[0] == found.values[0]
    with pytest.raises(ValueError, match="completions shorter than max_length=16"):
        completion_log_likelihoods(ours, [[1]], [list(range(16))])
    with pytest.raises(ValueError, match="non-empty context and completion.*pair 1"):
        completion_log_likelihoods(ours, [[1], []], [[2], [3]])
    with pytest.raises(ValueError, match="as many completions as contexts"):
        completion_log_likelihoods(ours, [[1]], [])


def test_prompts_hold_the_description_the_demonstrations_and_the_query():
    prompt = few_shot_prompt(
        "Review: {text}\nSentiment:{label}",
        [("dull", " bad"), ("fun", " good")],
        "moving",
        description="Is each review good or bad?",
    )
    assert prompt == (
        "Is each review good or bad?\n\nReview: dull\nSentiment: bad\n\n"
        "Review: fun\nSentiment: good\n\nReview: moving\nSentiment:"
    )
    for bad in ("{text} {label} {text}", "{label}: {text}", "{text} {answer}"):
        with pytest.raises(ValueError, match="one \\{text\\} and one \\{label\\}"):
            few_shot_prompt(bad, [], "x")


def _character_tokenizer(seen):
    def tokenize(texts):
        seen.extend(texts)
        return [[1 + ord(c) % (VOCABULARY - 1) for c in text] for text in texts]

    return tokenize


def test_scores_normalisations_and_accuracy_follow_their_definitions(gpt2):
    ours, _ = gpt2
    queries = [("ab", 0), ("cd", 1), ("ef", 0), ("gh", 1), ("ij", 0)]
    words = [" n", " yes"]  # completions of different lengths
    seen = []
    tokenize = _character_tokenizer(seen)
    results = {
        mode: evaluate_few_shot(
            ours, tokenize, queries, words, "{text}={label}", shots=1, normalization=mode, seed=3
        )
        for mode in ("none", "length", "unconditional", "calibrated")
    }
    prompts = seen[:5]
    for (text, _), prompt in zip(queries, prompts, strict=True):
        lines = prompt.split("\n\n")
        assert len(lines) == 2 and lines[-1] == f"{text}="  # a demonstration, then the query
        assert all(not line.startswith(text) for line in lines[:-1])  # never the query itself
    contexts, word_ids = tokenize(prompts), tokenize(words)
    plain = np.array([completion_log_likelihoods(ours, [c, c], word_ids).values for c in contexts])
    np.testing.assert_allclose(results["none"].scores, plain, atol=1e-5)
    lengths = np.array([len(w) for w in word_ids])
    np.testing.assert_allclose(results["length"].scores, plain / lengths, atol=1e-5)
    baseline = completion_log_likelihoods(ours, tokenize(["Answer:"]) * 2, word_ids).values
    np.testing.assert_allclose(results["unconditional"].scores, plain - baseline, atol=1e-5)
    # Calibrated: the same demonstrations with "N/A" in the query's place, subtracted.
    free = [p.rsplit("\n\n", 1)[0] + "\n\nN/A=" for p in prompts]
    assert all(f in seen for f in free)
    free_scores = [
        completion_log_likelihoods(ours, [c, c], word_ids).values for c in tokenize(free)
    ]
    np.testing.assert_allclose(results["calibrated"].scores, plain - free_scores, atol=1e-5)
    # The recency diagnostic: answers equal to the label of the last example shown.
    shown = np.array([words.index(p.split("\n\n")[-2].split("=")[1]) for p in prompts])
    for result in results.values():
        assert result.last_shown == float((result.predictions == shown).mean())
    for result in results.values():
        labels = np.array([label for _, label in queries])
        assert result.accuracy == float((result.scores.argmax(1) == labels).mean())
        assert result.truncated == 0 and result.shots == 1  # 14 tokens at most: no cut


def test_start_ids_open_every_prompt_and_not_the_answers(gpt2):
    """`start_ids` (Gemma's `<bos>`) go before every prompt, the content-free ones and
    the unconditional one too, never before the label words."""
    ours, _ = gpt2
    queries, words = [("ab", 0), ("cd", 1), ("ef", 0)], [" n", " yes"]
    seen = []
    tokenize = _character_tokenizer(seen)
    start = [0]
    for mode in ("none", "calibrated", "unconditional"):
        seen.clear()
        result = evaluate_few_shot(
            ours, tokenize, queries, words, "{text}={label}", shots=1, seed=3,
            normalization=mode, start_ids=start,
        )  # fmt: skip
        word_ids = tokenize(words)
        contexts = [start + c for c in tokenize(seen[:3])]
        plain = np.array(
            [completion_log_likelihoods(ours, [c, c], word_ids).values for c in contexts]
        )
        if mode == "calibrated":
            free = [start + c for c in tokenize([p[:-3] + "N/A=" for p in seen[:3]])]
            plain -= [completion_log_likelihoods(ours, [c, c], word_ids).values for c in free]
        if mode == "unconditional":
            after = [start + tokenize(["Answer:"])[0]] * 2
            plain -= completion_log_likelihoods(ours, after, word_ids).values
        np.testing.assert_allclose(result.scores, plain, atol=1e-5, err_msg=mode)


def test_bad_arguments_are_named(gpt2):
    ours, _ = gpt2
    tokenize = _character_tokenizer([])
    queries = [("a", 0), ("b", 1)]
    with pytest.raises(ValueError, match="shots.*<= the 1 demonstrations available"):
        evaluate_few_shot(ours, tokenize, queries, [" x", " y"], "{text}{label}", shots=2)
    with pytest.raises(ValueError, match="normalization"):
        evaluate_few_shot(ours, tokenize, queries, [" x", " y"], "{text}{label}", normalization="z")
    with pytest.raises(ValueError, match="label indices in \\[0, 2\\)"):
        evaluate_few_shot(ours, tokenize, [("a", 2)], [" x", " y"], "{text}{label}")
    with pytest.raises(ValueError, match="two or more `label_words`"):
        evaluate_few_shot(ours, tokenize, queries, [" x"], "{text}{label}")
