"""Stop strings inside a generation SavedModel: what `keras_attn.models.stop_strings` does
in Python, in TensorFlow ops (RE2 and the tokenizer's detokenization), so that a served
reply ends where `generate(text, stop_strings=...)` ends it: the first token whose text
completes a string found by bisection, the ids after it padding, the text cut right after
the string.
"""

import string

import tensorflow as tf

_PLAIN = set(string.ascii_letters + string.digits)


def re2_literal(text):
    """`text` as an RE2 pattern that matches it literally: letters, digits and every
    non-ASCII character as they are, any other character as `\\x{..}`."""
    return "".join(c if c in _PLAIN or ord(c) > 127 else f"\\x{{{ord(c):x}}}" for c in text)


def stop_tokens(tokens, starts, stop_strings, detokenize, end_token_id, pad_token_id):
    """`(tokens, extras)`: `tokens` `(batch, length)` int32 whose generated ids begin at
    `starts` `(batch,)`, with every id after a row's stopping token turned to padding, and
    per row the text the stopping token holds past the string (`""`: none), which the
    caller takes off the row's text. `detokenize`: `(batch, length)` ids -> UTF-8 strings
    (the end token, else the padding, left out); `end_token_id`: `None` where rows run to
    their length."""
    length = tokens.shape[1]
    alternatives = "(?:" + "|".join(re2_literal(s) for s in stop_strings) + ")"
    positions = tf.range(length)[None, :]
    generated = positions >= starts[:, None]
    first_end = tf.fill(tf.shape(starts), length)  # no end token: the rows' full length
    if end_token_id is not None:
        ends = tf.logical_and(generated, tf.equal(tokens, end_token_id))
        first_end = tf.where(
            tf.reduce_any(ends, axis=1), tf.argmax(tf.cast(ends, tf.int32), 1, tf.int32), length
        )
    count = first_end - starts  # the generated ids before the end token

    # What stands for the ids left out: the end token where there is one (the byte-level
    # texts leave out the end token only, which a GGUF file's padding may not be).
    filler = pad_token_id if end_token_id is None else end_token_id

    def text_of(kept):
        """Each row's text of its first `kept` generated ids."""
        keep = tf.logical_and(generated, positions < (starts + kept)[:, None])
        text = detokenize(tf.where(keep, tokens, filler))
        return tf.strings.unicode_transcode(
            text, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
        )

    def holds(kept):
        return tf.strings.regex_full_match(text_of(kept), f"(?s).*{alternatives}.*")

    found = holds(count)
    low, high = tf.ones_like(count), count
    for _ in range(max(length, 1).bit_length()):  # bisection: the text only grows
        middle = (low + high) // 2
        hit, open_ = holds(middle), low < high
        high = tf.where(tf.logical_and(open_, hit), middle, high)
        low = tf.where(tf.logical_and(open_, tf.logical_not(hit)), middle + 1, low)
    kept = tf.where(found, high, count)
    text = text_of(kept)
    cut = tf.strings.regex_replace(text, f"(?s)^(.*?{alternatives}).*$", r"\1")
    cut_length = tf.strings.length(cut)
    extras = tf.where(
        found, tf.strings.substr(text, cut_length, tf.strings.length(text) - cut_length), ""
    )
    after = tf.logical_and(found[:, None], positions >= (starts + kept)[:, None])
    return tf.where(after, pad_token_id, tokens), extras


def without_extras(texts, extras):
    """`texts` without their ending `extras` (bytes; a text that does not end with its
    extra is kept whole)."""
    text_length, extra_length = tf.strings.length(texts), tf.strings.length(extras)
    start = tf.maximum(text_length - extra_length, 0)
    ends_with = tf.equal(tf.strings.substr(texts, start, extra_length), extras)
    cut = tf.logical_and(ends_with, extra_length > 0)
    return tf.where(cut, tf.strings.substr(texts, tf.zeros_like(start), start), texts)
