"""How likely a causal language model finds a completion after a context (GPT-3's scoring)."""

import dataclasses
import warnings

import keras
import numpy as np

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int


@dataclasses.dataclass(frozen=True)
class LogLikelihoods:
    """What `completion_log_likelihoods` measured, one entry per (context, completion).

    Attributes:
        values: `sum_t log p(completion_t | context, completion_<t)`, float64.
        token_counts: the completion's tokens (the per-token normalisation divides by it).
        truncated: whether the context was cut from the left to fit the model.
    """

    values: np.ndarray
    token_counts: np.ndarray
    truncated: np.ndarray


@keras_attn_export("keras_attn.evaluation.completion_log_likelihoods", serializable=False)
def completion_log_likelihoods(
    model, contexts, completions, max_length=None, batch_size=8, warn_cut=True
):
    """Log-likelihoods of token-id completions after token-id contexts.

    GPT-3's multiple-choice scoring (Brown et al., 2020, section 2.4): the model reads
    `context + completion` once and the log-probabilities of the completion's tokens
    are summed. A pair longer than the model's limit loses tokens from the left of its
    context (the most recent ones are kept, as GPT-3 fits its demonstrations into the
    window), and a warning says how many pairs were cut. Pairs are batched, padded on
    the right (a causal model's earlier positions never see the padding).

    Args:
        model: a causal language model: `model(token_ids)` on `(batch, length)` ids
            gives next-token logits `(batch, length, vocabulary)` (`GPTLanguageModel`,
            `TransformerXL`, a Hugging Face GPT-2 loaded with `from_pretrained`).
        contexts: a list of token-id lists, each non-empty.
        completions: a list of token-id lists, each non-empty, as long as `contexts`.
        max_length: the longest sequence the model reads (default: the model's
            `max_sequence_length`; `None` there: no limit).
        batch_size: pairs per forward pass.
        warn_cut: warn how many pairs were cut (`False` for a caller that reports
            `truncated` itself, in its own units).

    Returns:
        A `LogLikelihoods`.

    Raises:
        ValueError: lists of different lengths, an empty context or completion, or a
            completion that alone does not fit in `max_length`.

    Example:

    >>> from keras_attn.evaluation import completion_log_likelihoods
    >>> from keras_attn.models import GPTLanguageModel
    >>> model = GPTLanguageModel(50, 1, 2, 16, 32, max_sequence_length=8)
    >>> scores = completion_log_likelihoods(model, [[5, 6], [5, 6]], [[7], [8, 9]])
    >>> scores.token_counts.tolist(), bool((scores.values < 0).all())
    ([1, 2], True)
    """
    if len(contexts) != len(completions):
        raise ValueError(
            "Expected as many completions as contexts. Received: "
            f"{len(contexts)} contexts, {len(completions)} completions"
        )
    check_positive_int("batch_size", batch_size)
    if max_length is None:
        max_length = getattr(model, "max_sequence_length", None)
    check_positive_int("max_length", max_length, allow_none=True)
    pairs = []
    for index, (context, completion) in enumerate(zip(contexts, completions, strict=True)):
        context, completion = [int(i) for i in context], [int(i) for i in completion]
        if not context or not completion:
            raise ValueError(
                "Expected a non-empty context and completion. Received: pair "
                f"{index} with {len(context)} context and {len(completion)} completion tokens"
            )
        if max_length is not None and len(completion) >= max_length:
            raise ValueError(
                f"Expected completions shorter than max_length={max_length}. "
                f"Received: pair {index} with {len(completion)} completion tokens"
            )
        ids = context + completion
        keep = len(ids) if max_length is None else min(len(ids), max_length)
        pairs.append((ids[len(ids) - keep :], len(completion), keep < len(ids)))
    values = np.zeros(len(pairs))
    for start in range(0, len(pairs), batch_size):
        batch = pairs[start : start + batch_size]
        values[start : start + len(batch)] = _score_batch(model, batch)
    truncated = np.array([cut for _, _, cut in pairs], bool)
    if warn_cut and truncated.any():
        warnings.warn(
            f"{int(truncated.sum())} of {len(pairs)} (context, completion) pairs were longer "
            f"than the model's "
            f"{max_length} positions: their contexts lost tokens from the left",
            stacklevel=2,
        )
    return LogLikelihoods(values, np.array([n for _, n, _ in pairs]), truncated)


def _score_batch(model, batch):
    """The summed completion log-probabilities of one batch of `(ids, n, cut)`."""
    length = max(len(ids) for ids, _, _ in batch)
    token_ids = np.zeros((len(batch), length), "int32")
    for row, (ids, _, _) in enumerate(batch):
        token_ids[row, : len(ids)] = ids
    if hasattr(model, "logits_at"):  # the decoder-only models (GPT's, Llama's, Gemma's)
        return _score_completions_only(model, batch, token_ids)
    logits = model(token_ids, training=False)
    log_probabilities = keras.ops.log_softmax(keras.ops.cast(logits, "float32"), axis=-1)
    # Position t's logits predict token t + 1.
    targets = keras.ops.expand_dims(keras.ops.convert_to_tensor(token_ids[:, 1:]), -1)
    picked = keras.ops.take_along_axis(log_probabilities[:, :-1], targets, axis=-1)
    picked = keras.ops.convert_to_numpy(picked)[..., 0].astype("float64")
    sums = []
    for row, (ids, n, _) in enumerate(batch):
        sums.append(picked[row, len(ids) - 1 - n : len(ids) - 1].sum())
    return sums


def _score_completions_only(model, batch, token_ids):
    """`_score_batch` for the decoder-only models (GPT's, Llama's, Gemma's): the decoder
    over every position, but logits only where a completion token is predicted. Gemma
    3's 262,144-word vocabulary made the full logits of 8 prompts of 16 shots 5.9 GB."""
    longest = max(n for _, n, _ in batch)
    positions = np.zeros((len(batch), longest), "int32")
    targets = np.zeros((len(batch), longest), "int32")
    for row, (ids, n, _) in enumerate(batch):
        # Position t predicts token t + 1; rows with a shorter completion repeat their
        # last position (left out of the sum below).
        span = np.arange(len(ids) - 1 - n, len(ids) - 1)
        positions[row] = np.concatenate([span, np.full(longest - n, span[-1])])
        targets[row] = token_ids[row, positions[row] + 1]
    logits = keras.ops.cast(model.logits_at(token_ids, positions), "float32")
    log_probabilities = keras.ops.log_softmax(logits, axis=-1)
    picked = keras.ops.take_along_axis(log_probabilities, targets[..., None], axis=-1)
    picked = keras.ops.convert_to_numpy(picked)[..., 0].astype("float64")
    return [picked[row, :n].sum() for row, (_, n, _) in enumerate(batch)]
