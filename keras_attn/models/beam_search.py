"""Beam search with end tokens and GNMT's length penalty (internal to `generate`).

keras-hub's `BeamSampler` ranks by raw log-probability and keeps extending (and
scoring) a beam after its end token. Here a finished beam stays in the beam set
unchanged (it only appends padding, at no cost) and competes with the live ones on
`log P(Y) / lp(Y)`, `lp(Y) = ((5 + |Y|) / 6) ** alpha` (Wu et al., 2016; the
Transformer paper decodes with alpha = 0.6 and 4 beams); alpha = 0 ranks by log P.
"""

from keras import ops

from keras_attn.layers.cache_writes import update_positions

_NEG = -1e9  # a finite "impossible": -inf - -inf would make NaNs


def length_penalty_factor(lengths, alpha):
    """GNMT's `((5 + |Y|) / 6) ** alpha` for generated lengths `|Y|`."""
    return ops.power((5.0 + ops.cast(lengths, "float32")) / 6.0, alpha)


def beam_search(
    next,
    prompt,
    cache,
    index,
    mask,
    num_beams,
    end_token_id,
    alpha,
    pad_token_id,
    temperature=1.0,
    write="slice",
):
    """Returns `(tokens, log_probs)` of the best beam of each example.

    Args:
        next: `next(prompt, cache, index) -> (logits, hidden, cache)`, the logits of
            position `index` given the tokens before it (keras-hub's convention).
        prompt: `(batch * num_beams, max_length)` int, each example's row repeated
            `num_beams` times, padded.
        cache: a tuple of tensors with `batch * num_beams` rows (or `()`).
        index: first position to fill.
        mask: `(batch * num_beams, max_length)` bool, True at prompt positions
            (forced, not scored).
        num_beams: beams per example.
        end_token_id: int or None.
        alpha: length-penalty exponent.
        pad_token_id: what a finished beam appends.
        temperature: logits are divided by it before the softmax.
        write: how chosen tokens are written into `prompt` (`update_positions`'s
            `method`: `"scatter"` keeps the graph to core TensorFlow ops).

    Returns:
        `tokens` `(batch, max_length)` and `log_probs` `(batch,)`, the total
        log-probability of the generated tokens (end token included).
    """
    rows, max_length = ops.shape(prompt)[0], prompt.shape[1]
    batch_size = rows // num_beams
    # Only the first copy of each example is live at the start.
    log_probs = ops.tile(ops.array([0.0] + [_NEG] * (num_beams - 1), "float32"), [batch_size])
    finished = ops.zeros((rows,), "bool")
    lengths = ops.zeros((rows,), "int32")
    # Row offsets of each example's beams, to turn a beam number into a row.
    offsets = ops.arange(batch_size, dtype="int32")[:, None] * num_beams  # (batch, 1)

    def cond(prompt, cache, index, log_probs, finished, lengths):
        return ops.logical_not(ops.all(finished))

    def body(prompt, cache, index, log_probs, finished, lengths):
        logits, _, cache = next(prompt, cache, index)
        scores = ops.log_softmax(ops.cast(logits, "float32") / temperature, axis=-1)
        vocabulary_size = ops.shape(scores)[-1]
        forced = mask[:, index]  # (rows,)

        def only(token):  # the scores that allow `token` alone
            return ops.where(ops.one_hot(token, vocabulary_size) > 0, 0.0, _NEG)

        # A prompt position allows only its token; a finished beam only padding.
        scores = ops.where(forced[:, None], only(prompt[:, index]), scores)
        scores = ops.where(
            finished[:, None], only(ops.full((rows,), pad_token_id, "int32")), scores
        )
        candidates = log_probs[:, None] + scores  # (rows, vocabulary)
        grows = ops.cast(ops.logical_not(ops.logical_or(forced, finished)), "int32")
        new_lengths = lengths + grows
        ranked = candidates / length_penalty_factor(new_lengths, alpha)[:, None]
        ranked = ops.reshape(ranked, (batch_size, num_beams * vocabulary_size))
        _, best = ops.top_k(ranked, k=num_beams, sorted=True)  # (batch, beams)
        source_rows = ops.reshape(offsets + best // vocabulary_size, (-1,))  # (rows,)
        tokens = ops.cast(ops.reshape(best % vocabulary_size, (-1,)), prompt.dtype)

        def gather(x):  # each new beam's row of the old beams
            return ops.take(x, source_rows, axis=0)

        prompt, cache = gather(prompt), tuple(gather(c) for c in cache)
        log_probs = ops.take_along_axis(
            ops.reshape(candidates, (-1,)),
            source_rows * vocabulary_size + ops.cast(tokens, "int32"),
            axis=0,
        )
        was_finished, was_forced = gather(finished), gather(forced)
        lengths = gather(new_lengths)
        if end_token_id is not None:
            finished = ops.logical_or(
                was_finished, ops.logical_and(tokens == end_token_id, ops.logical_not(was_forced))
            )
        prompt = update_positions(prompt, tokens[:, None], index, write)
        return prompt, cache, index + 1, log_probs, finished, lengths

    prompt, _, _, log_probs, _, lengths = ops.while_loop(
        cond,
        body,
        (prompt, cache, index, log_probs, finished, lengths),
        maximum_iterations=max_length - index,
    )
    ranked = ops.reshape(log_probs / length_penalty_factor(lengths, alpha), (batch_size, num_beams))
    best_rows = ops.reshape(offsets, (-1,)) + ops.cast(ops.argmax(ranked, axis=1), "int32")
    return ops.take(prompt, best_rows, axis=0), ops.take(log_probs, best_rows, axis=0)
