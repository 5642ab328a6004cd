"""Stop strings: where a generated text ends, as `transformers`' `stop_strings` ends it.

Generation stops at the first token whose text completes one of the strings; the text
returned ends with that string (a token that runs past it is cut inside, so nothing after
the string is returned). The strings are searched in the continuation's text only, never
in the prompt. Decoding itself runs to its end token or length (the loop is compiled
once per setting, not per string); the tokens after the stopping one become padding, so
the ids, the text and the log-probabilities agree.
"""

from keras_attn.api_export import keras_attn_export

# A request may carry a few strings (OpenAI's API takes 4, llama.cpp's server any): each
# is searched in every prefix the search below decodes, hence the bounds.
MAX_STOP_STRINGS = 16
MAX_STOP_LENGTH = 256  # characters


def check_stop_strings(value):
    """`value` (`None`, a string, or a list / tuple of strings) as a tuple of strings, or
    a `TypeError` / `ValueError` naming `stop_strings` and what it takes."""
    if value is None:
        return None
    if isinstance(value, str):
        value = (value,)
    if not isinstance(value, (list, tuple)) or not all(isinstance(s, str) for s in value):
        raise TypeError(
            "Expected `stop_strings` to be a string or a list of strings. Received: "
            f"stop_strings={value!r:.200}"
        )
    if not 1 <= len(value) <= MAX_STOP_STRINGS:
        raise ValueError(
            f"Expected 1 to {MAX_STOP_STRINGS} `stop_strings`. Received: {len(value)} strings"
        )
    for text in value:
        if not 1 <= len(text) <= MAX_STOP_LENGTH:
            raise ValueError(
                f"Expected each of `stop_strings` to hold 1 to {MAX_STOP_LENGTH} characters. "
                f"Received: a string of {len(text)}"
            )
        if "\ufffd" in text:  # what a cut UTF-8 sequence decodes to, not a character typed
            raise ValueError(
                "Expected `stop_strings` without U+FFFD (what a token ending inside a "
                f"character decodes to). Received: {text!r:.300}"
            )
    return tuple(value)


@keras_attn_export("keras_attn.models.stop_string_end")
def stop_string_end(text, stop_strings):
    """Where `text` ends by `stop_strings`: the end of the occurrence of any of them that
    ends first, or `None` where none occurs.

    Args:
        text: a string.
        stop_strings: a list of strings.

    Returns:
        An index into `text` (the string occupies the characters before it), or `None`.

    Example:

    >>> from keras_attn.models import stop_string_end
    >>> text = "Q: two? A: 2\\nQ: three?"
    >>> text[: stop_string_end(text, ["\\nQ:", "?"])]
    'Q: two?'
    >>> stop_string_end("no stop here", ["###"]) is None
    True
    """
    ends = [text.find(s) + len(s) for s in stop_strings if s in text]
    return min(ends) if ends else None


def stop_at_strings(detokenize, generated, stop_strings):
    """`(count, text)`: how many of the `generated` ids to keep, and their text ended at
    the first stop string; `(len(generated), None)` where none occurs (`detokenize`: ids
    -> str). The first stopping token is found by bisection: a text only grows as tokens
    are added, so whether it holds a stop string changes once."""
    generated = list(generated)
    if not stop_strings or not generated:
        return len(generated), None
    if stop_string_end(detokenize(generated), stop_strings) is None:
        return len(generated), None
    low, high = 1, len(generated)  # the string occurs within the first `high` ids
    while low < high:
        middle = (low + high) // 2
        if stop_string_end(detokenize(generated[:middle]), stop_strings) is None:
            low = middle + 1
        else:
            high = middle
    text = detokenize(generated[:high])
    return high, text[: stop_string_end(text, stop_strings)]


def stop_rows(tokens, prompt_lengths, stop_strings, detokenize, end_token_id, pad_token_id):
    """Generated rows ended at their first stop string: `(tokens, extras)`, the ids after
    each row's stopping token turned to `pad_token_id` (a copy), and per row the text its
    last kept token holds past the string (`""`: none), for the caller to take off the
    row's text (`detokenize`: a generated id list -> its text)."""
    import numpy as np

    tokens = np.array(tokens)
    extras = []
    for row, length in zip(tokens, prompt_lengths, strict=True):
        generated = row[length:].tolist()
        if end_token_id in generated:
            generated = generated[: generated.index(end_token_id)]
        count, text = stop_at_strings(detokenize, generated, stop_strings)
        extra = ""
        if text is not None:
            row[length + count :] = pad_token_id
            extra = detokenize(generated[:count])[len(text) :]
        extras.append(extra)
    return tokens, extras


def without_extra(text, extra):
    """`text` without its ending `extra` (what the stopping token holds past the string)."""
    return text[: len(text) - len(extra)] if extra and text.endswith(extra) else text
