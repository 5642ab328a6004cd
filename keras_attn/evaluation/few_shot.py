"""Zero- and few-shot evaluation in context (GPT-2, GPT-3): prompts, scoring, accuracy."""

import dataclasses
import string

import numpy as np

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_non_negative_int
from keras_attn.evaluation.log_likelihood import completion_log_likelihoods

NORMALIZATIONS = ("none", "length", "unconditional", "calibrated")
# Zhao et al. (2021)'s content-free input: the query of the `"calibrated"` baseline.
CONTENT_FREE = "N/A"


@keras_attn_export("keras_attn.evaluation.few_shot_prompt", serializable=False)
def few_shot_prompt(template, demonstrations, query, description="", separator="\n\n"):
    """The context a model completes: a task description, K solved examples, the query.

    GPT-3's in-context format (Brown et al., 2020, figure 2.1): each demonstration is
    the template filled with its text and its answer, the query the template filled
    with its text and cut before the answer, which the candidates then complete.

    Args:
        template: a format string with one `{text}` and one `{label}`, the label last
            (e.g. `"Review: {text}\\nSentiment:{label}"`, the label words then
            starting with a space: `" good"`).
        demonstrations: a list of `(text, label word)` pairs, in prompt order.
        query: the text to answer.
        description: a line stating the task, first (GPT-2's zero-shot cue); `""`: none.
        separator: between the description and the examples.

    Returns:
        The context string.

    Raises:
        ValueError: a template without exactly one `{text}` and `{label}`, the label last.

    Example:

    >>> from keras_attn.evaluation import few_shot_prompt
    >>> print(few_shot_prompt("Q: {text}\\nA:{label}", [("2+2", " 4")], "3+3", separator="\\n"))
    Q: 2+2
    A: 4
    Q: 3+3
    A:
    """
    prefix = check_template(template)
    parts = [description] if description else []
    parts += [template.format(text=text, label=label) for text, label in demonstrations]
    parts.append(prefix.format(text=query))
    return separator.join(parts)


def check_template(template):
    """The template's part before `{label}`; a ValueError unless it is well formed."""
    if not isinstance(template, str):
        raise TypeError(f"Expected `template` to be a str. Received: {type(template).__name__}")
    fields = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
    if sorted(fields) != ["label", "text"] or not template.endswith("{label}"):
        raise ValueError(
            "Expected a `template` with one {text} and one {label}, the label last. "
            f"Received: template={template!r}"
        )
    return template[: -len("{label}")]


@dataclasses.dataclass(frozen=True)
class FewShotResult:
    """What `evaluate_few_shot` found.

    Attributes:
        accuracy: the share of queries whose best-scored label is theirs.
        predictions: the chosen label index per query.
        scores: `(queries, labels)` normalised log-likelihoods.
        truncated: queries whose prompt was cut from the left to fit the model.
        shots: demonstrations per prompt.
        normalization: how candidates' log-likelihoods were compared.
        last_shown: the share of queries answered with the label of the prompt's last
            demonstration (`None` at zero shots): far above how often that is the
            right answer, the model copies the nearest example (the recency bias of
            Zhao et al., 2021) instead of reading the query.
    """

    accuracy: float
    predictions: np.ndarray
    scores: np.ndarray
    truncated: int
    shots: int
    normalization: str
    last_shown: float = None


@keras_attn_export("keras_attn.evaluation.evaluate_few_shot", serializable=False)
def evaluate_few_shot(
    model,
    tokenize,
    queries,
    label_words,
    template,
    shots=0,
    demonstrations=None,
    normalization="none",
    description="",
    separator="\n\n",
    unconditional_context="Answer:",
    seed=0,
    max_length=None,
    batch_size=8,
    start_ids=(),
):
    """Accuracy of a causal LM answering in context, with no gradient step.

    For every query, `shots` demonstrations are drawn at random (without replacement,
    never the query itself) from `demonstrations`, the prompt is built with
    `few_shot_prompt`, and each label word is scored as a completion by its
    log-likelihood (`completion_log_likelihoods`); the best wins. GPT-3's options
    for comparing candidates of different lengths: `"length"` divides by the
    completion's tokens, `"unconditional"` subtracts the completion's log-likelihood
    after `unconditional_context` alone (`P(completion | context) /
    P(completion | "Answer:")`). `"calibrated"` is Zhao et al. (2021)'s contextual
    calibration: each query's prompt is scored again with the content-free text
    `"N/A"` in the query's place (the same demonstrations, in the same order), and
    that log-likelihood is subtracted, so a label the demonstrations favour whatever
    the query says loses its head start (twice the forward passes).

    Args:
        model: a causal language model (`completion_log_likelihoods`).
        tokenize: `tokenize(list of str) -> list of token-id lists`, the model's
            tokenizer without special tokens.
        queries: a list of `(text, label index)` to answer.
        label_words: the completion of each label index (e.g. `[" bad", " good"]`).
        template: see `few_shot_prompt`.
        shots: demonstrations per prompt (K; 0: zero-shot).
        demonstrations: the `(text, label index)` pool they come from (default:
            `queries`, the query itself left out).
        normalization: `"none"`, `"length"`, `"unconditional"` or `"calibrated"`.
        description: the task's description line (`few_shot_prompt`).
        separator: between the prompt's parts.
        unconditional_context: the context of the `"unconditional"` normalisation.
        seed: of the demonstrations' draw.
        max_length: the model's window (default: its `max_sequence_length`).
        batch_size: sequences per forward pass.
        start_ids: token ids put before every prompt, as the model read them before
            every text in training (Gemma's `<bos>`: `start_ids_of(model)`); none by
            default.

    Returns:
        A `FewShotResult`.

    Example:

    >>> from keras_attn.evaluation import evaluate_few_shot
    >>> from keras_attn.models import GPTLanguageModel
    >>> model = GPTLanguageModel(20, 1, 2, 16, 32, max_sequence_length=32)
    >>> def tokenize(texts):  # one id per character, for the example
    ...     return [[3 + ord(c) % 17 for c in text] for text in texts]
    >>> queries = [("ab", 0), ("ba", 1), ("aa", 0), ("bb", 1)]
    >>> result = evaluate_few_shot(model, tokenize, queries, [" x", " y"], "{text}:{label}",
    ...                            shots=2)
    >>> result.scores.shape, result.shots, 0.0 <= result.accuracy <= 1.0
    ((4, 2), 2, True)
    """
    check_template(template)
    check_non_negative_int("shots", shots)
    if normalization not in NORMALIZATIONS:
        raise ValueError(
            f"Expected `normalization` in {NORMALIZATIONS}. Received: {normalization!r}"
        )
    if len(label_words) < 2:
        raise ValueError(f"Expected two or more `label_words`. Received: {label_words!r}")
    pool = queries if demonstrations is None else demonstrations
    available = len(pool) - (1 if demonstrations is None else 0)
    if shots > available:
        raise ValueError(
            f"Expected `shots` <= the {available} demonstrations available. Received: {shots}"
        )
    for text, label in [*queries, *pool]:
        if not 0 <= label < len(label_words):
            raise ValueError(
                f"Expected label indices in [0, {len(label_words)}). Received: {label!r} "
                f"for {text[:40]!r}"
            )
    rng = np.random.default_rng(seed)
    contexts, content_free, last = [], [], []
    for index, (text, _) in enumerate(queries):
        candidates = [i for i in range(len(pool)) if demonstrations is not None or i != index]
        drawn = rng.choice(candidates, size=shots, replace=False) if shots else []
        shown = [(pool[i][0], label_words[pool[i][1]]) for i in drawn]
        contexts.append(few_shot_prompt(template, shown, text, description, separator))
        content_free.append(few_shot_prompt(template, shown, CONTENT_FREE, description, separator))
        last.append(pool[drawn[-1]][1] if shots else -1)
    start_ids = [int(i) for i in start_ids]

    def prompts(texts):  # each after the start token(s) the model reads first
        return [start_ids + list(ids) for ids in tokenize(texts)]

    context_ids = prompts(contexts)
    word_ids = tokenize(list(label_words))

    def scored_after(prompt_ids):
        pairs = [(c, w) for c in prompt_ids for w in word_ids]
        return completion_log_likelihoods(  # cut prompts: counted per query, in `truncated`
            model,
            *zip(*pairs, strict=True),
            max_length=max_length,
            batch_size=batch_size,
            warn_cut=False,
        )

    scored = scored_after(context_ids)
    scores = scored.values.reshape(len(queries), len(label_words))
    if normalization == "calibrated":
        baseline = scored_after(prompts(content_free)).values.reshape(scores.shape)
        scores = scores - baseline
    if normalization == "length":
        scores = scores / scored.token_counts.reshape(scores.shape)
    elif normalization == "unconditional":
        (unconditional,) = prompts([unconditional_context])
        baseline = completion_log_likelihoods(
            model, [unconditional] * len(word_ids), word_ids, max_length, batch_size
        )
        scores = scores - baseline.values[None, :]
    predictions = scores.argmax(axis=1)
    labels = np.array([label for _, label in queries])
    truncated = int(scored.truncated.reshape(scores.shape).any(axis=1).sum())
    last_shown = float((predictions == np.array(last)).mean()) if shots else None
    return FewShotResult(
        float((predictions == labels).mean()),
        predictions,
        scores,
        truncated,
        shots,
        normalization,
        last_shown,
    )
