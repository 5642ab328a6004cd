"""Sampling written with core TensorFlow ops only: what an exported graph decodes with
when the export asks for `strategy="sample"` (internal to `generate`'s portable loop).

keras-hub's `RandomSampler` writes each token with XLA's dynamic-update-slice and draws
from a `SeedGenerator`'s variable, neither of which a TF Serving graph should hold (the
op is not linked there; a variable shared by concurrent requests would race). Here the
step's logits (after `logits_processors`: repetition penalty, temperature, top-k, top-p,
min-p) are drawn from with `tf.random.stateless_categorical`, its seed the pair
`(seed, position)`: a fixed `seed` gives the same tokens for the same batch every time;
`seed=None` draws a new base seed per call (each request its own sample).
"""

from keras import ops

from keras_attn.layers.cache_writes import update_positions


def sample_loop(next, prompt, cache, index, mask, end_token_id, pad_token_id, seed, write):
    """Returns `(batch, max_length)` tokens: each row's prompt, then tokens drawn one by
    one until every row has drawn `end_token_id` (padding after it) or is full.

    Args:
        next: `next(prompt, cache, index) -> (logits, hidden, cache)`, the processed
            logits of position `index` given the tokens before it.
        prompt: `(batch, max_length)` int32, each row's prompt right-padded.
        cache: a tuple of tensors (or `()`).
        index: the first position to fill (the shortest prompt's length).
        mask: `(batch, max_length)` bool, True at prompt positions (kept, not drawn).
        end_token_id: int or None.
        pad_token_id: what a finished row appends.
        seed: int or None (a fresh base seed each call).
        write: `update_positions`' method (`"scatter"`: core ops).
    """
    import tensorflow as tf

    rows, max_length = ops.shape(prompt)[0], prompt.shape[1]
    if seed is None:
        base = tf.random.uniform([2], maxval=tf.int64.max, dtype=tf.int64)
    else:
        base = tf.constant([int(seed) % 2**63, 0], tf.int64)  # any Python int
    finished = tf.zeros([rows], tf.bool)

    def cond(prompt, cache, index, finished):
        return tf.logical_not(tf.reduce_all(finished))

    def body(prompt, cache, index, finished):
        logits, _, cache = next(prompt, cache, index)
        step = base + tf.stack([tf.constant(0, tf.int64), tf.cast(index, tf.int64)])
        drawn = tf.random.stateless_categorical(
            tf.cast(logits, tf.float32), 1, seed=step, dtype=tf.int32
        )[:, 0]
        forced = mask[:, index]
        token = tf.where(forced, tf.cast(prompt[:, index], tf.int32), drawn)
        token = tf.where(finished, tf.fill([rows], tf.constant(pad_token_id, tf.int32)), token)
        if end_token_id is not None:
            ended = tf.logical_and(tf.equal(token, end_token_id), tf.logical_not(forced))
            finished = tf.logical_or(finished, ended)
        prompt = update_positions(prompt, tf.cast(token, prompt.dtype)[:, None], index, write)
        return prompt, cache, index + 1, finished

    prompt, _, _, _ = tf.while_loop(
        cond,
        body,
        (prompt, cache, index, finished),
        maximum_iterations=max_length - index,
    )
    return prompt
