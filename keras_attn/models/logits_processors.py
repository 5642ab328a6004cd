"""What decoding does to a step's logits before it chooses, as `transformers` does it: the
repetition penalty (every strategy but beam search), then, when sampling, temperature,
top-k, top-p and min-p, in that order. Each function equals the `transformers`
`LogitsProcessor` of its name on the same logits (tests/models/test_logits_processors.py),
in `keras.ops` (any backend, inside XLA-compiled decoding loops)."""

from keras import ops

from keras_attn.api_export import keras_attn_export

NEGATIVE_INFINITY = float("-inf")


@keras_attn_export("keras_attn.models.repetition_penalty")
def repetition_penalty(logits, tokens, penalty, mask=None):
    """CTRL's repetition penalty (Keskar et al., 2019), as `transformers`'
    `RepetitionPenaltyLogitsProcessor`: the logit of every token that occurs in `tokens`
    is divided by `penalty` where positive, multiplied by it where negative.

    Args:
        logits: `(batch, vocabulary)` float.
        tokens: `(batch, length)` int, the ids so far.
        penalty: a float > 0 (1: none; above 1 discourages repeats).
        mask: bool, which of `tokens` count, broadcast to their shape (`None`: all).

    Returns:
        The penalised logits, `(batch, vocabulary)`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import repetition_penalty
    >>> logits = np.array([[2.0, -1.0, 0.5]], "float32")
    >>> np.asarray(repetition_penalty(logits, np.array([[0, 1]]), 2.0)).tolist()
    [[1.0, -2.0, 0.5]]
    """
    logits = ops.convert_to_tensor(logits)
    tokens = ops.cast(tokens, "int32")
    batch, vocabulary = ops.shape(logits)[0], logits.shape[-1]
    counts = ops.ones_like(tokens, "float32")
    if mask is not None:  # broadcast to the tokens' shape
        counts = counts * ops.cast(mask, "float32")
    rows = ops.broadcast_to(ops.arange(batch, dtype="int32")[:, None], ops.shape(tokens))
    indices = ops.reshape(ops.stack([rows, tokens], axis=-1), (-1, 2))
    seen = ops.scatter(indices, ops.reshape(counts, (-1,)), (batch, vocabulary)) > 0
    penalised = ops.where(logits < 0, logits * penalty, logits / penalty)
    return ops.where(seen, penalised, logits)


@keras_attn_export("keras_attn.models.top_k_filter")
def top_k_filter(logits, k):
    """`transformers`' `TopKLogitsWarper`: logits below the `k`-th largest become -inf
    (ties with it stay).

    Args:
        logits: `(batch, vocabulary)` float.
        k: an int >= 1 (above the vocabulary: all stay).

    Returns:
        The filtered logits.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import top_k_filter
    >>> np.asarray(top_k_filter(np.array([[1.0, 3.0, 2.0]], "float32"), 2)).tolist()
    [[-inf, 3.0, 2.0]]
    """
    logits = ops.convert_to_tensor(logits)
    k = min(int(k), logits.shape[-1])
    threshold = ops.top_k(logits, k)[0][..., -1:]
    return ops.where(logits < threshold, NEGATIVE_INFINITY, logits)


@keras_attn_export("keras_attn.models.top_p_filter")
def top_p_filter(logits, p):
    """`transformers`' `TopPLogitsWarper` (nucleus, Holtzman et al., 2019): in ascending
    order of logit, the tokens whose cumulative probability is at most `1 - p` become -inf;
    the most likely token always stays.

    Args:
        logits: `(batch, vocabulary)` float.
        p: a float in (0, 1].

    Returns:
        The filtered logits.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import top_p_filter
    >>> logits = np.log(np.array([[0.1, 0.6, 0.3]], "float32"))
    >>> np.isinf(np.asarray(top_p_filter(logits, 0.8))).tolist()
    [[True, False, False]]
    """
    logits = ops.convert_to_tensor(logits)
    order = ops.argsort(logits, axis=-1)  # ascending
    ascending = ops.take_along_axis(logits, order, axis=-1)
    cumulative = ops.cumsum(ops.softmax(ascending, axis=-1), axis=-1)
    remove = cumulative <= 1 - p
    keep_last = ops.arange(logits.shape[-1]) == logits.shape[-1] - 1
    remove = ops.logical_and(remove, ops.logical_not(keep_last))
    remove = ops.take_along_axis(remove, ops.argsort(order, axis=-1), axis=-1)  # back in place
    return ops.where(remove, NEGATIVE_INFINITY, logits)


@keras_attn_export("keras_attn.models.min_p_filter")
def min_p_filter(logits, p):
    """`transformers`' `MinPLogitsWarper` (Nguyen et al., 2024; llama.cpp's `min_p`):
    tokens less likely than `p` times the most likely one become -inf.

    Args:
        logits: `(batch, vocabulary)` float.
        p: a float in [0, 1].

    Returns:
        The filtered logits.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import min_p_filter
    >>> logits = np.log(np.array([[0.05, 0.6, 0.35]], "float32"))
    >>> np.isinf(np.asarray(min_p_filter(logits, 0.1))).tolist()
    [[True, False, False]]
    """
    logits = ops.convert_to_tensor(logits)
    probabilities = ops.softmax(logits, axis=-1)
    floor = p * ops.max(probabilities, axis=-1, keepdims=True)
    return ops.where(probabilities < floor, NEGATIVE_INFINITY, logits)


def processors(config):
    """`(logits, tokens, mask) -> logits` for a `GenerationConfig`'s settings, or `None`
    where it changes nothing (greedy or beam search without a repetition penalty)."""
    sample = config.strategy == "sample"
    steps = []
    if config.repetition_penalty != 1.0:
        steps.append(lambda x, t, m: repetition_penalty(x, t, config.repetition_penalty, m))
    if sample and config.temperature != 1.0:
        steps.append(lambda x, t, m: x / config.temperature)
    if sample and config.top_k is not None:
        steps.append(lambda x, t, m: top_k_filter(x, config.top_k))
    if sample and config.top_p is not None and config.top_p < 1.0:
        steps.append(lambda x, t, m: top_p_filter(x, config.top_p))
    if sample and config.min_p is not None:
        steps.append(lambda x, t, m: min_p_filter(x, config.min_p))
    if not steps:
        return None

    def process(logits, tokens, mask):
        logits = ops.cast(logits, "float32")
        for step in steps:
            logits = step(logits, tokens, mask)
        return logits

    return process
