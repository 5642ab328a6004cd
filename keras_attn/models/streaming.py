"""Streaming: `generate(text, stream=True)` and `chat(..., stream=True)` yield the text as
it is decoded, one piece per token that completes characters.

Decoding runs token by token from Python: a compiled prefill reads the prompt into the
key/value caches and gives the first step's logits, then a compiled step per token (one
trace per setting and length, as `generate`'s loop). The step's logits go through the same
processors (`logits_processors`); greedy takes the arg-max, sampling draws from NumPy's
generator seeded with `seed` (so a seeded stream repeats itself; it is not the draw of
`generate`'s compiled loop). A piece is yielded only where the text so far ends in whole
characters: a token that ends inside a UTF-8 sequence (which decodes to U+FFFD) waits for
the next. The pieces joined are the text `generate` returns for the same greedy settings.
"""

import numpy as np
from keras import ops

from keras_attn.models import logits_processors, stop_strings
from keras_attn.models.decoder_compilation import compile_step


def make_stepper(model, config, jit_compile):
    """`(prefill, step)` for `config`: `prefill(buffer, length)` -> `(logits, caches)` of
    the prompt's last position, `step(buffer, caches, index)` -> the logits after the token
    at `index` and the caches with it; `buffer` `(1, max_length)` int32, the ids so far."""
    process = logits_processors.processors(config)

    def logits_after(buffer, hidden, index):
        logits = ops.cast(model._logits(hidden), "float32")
        if process is not None:  # the ids so far: positions up to `index`
            logits = process(logits, buffer, ops.arange(buffer.shape[1])[None, :] <= index)
        return logits[0]

    def prefill(buffer, length):
        caches = model._empty_caches(1, buffer.shape[1])
        hidden, caches = model._call_decoder(buffer, None, caches, 0)
        last = ops.take(hidden, length - 1, axis=1)
        return logits_after(buffer, last, length - 1), caches

    def step(buffer, caches, index):
        token = ops.slice(buffer, [0, index], [1, 1])
        hidden, caches = model._call_decoder(token, None, caches, index)
        return logits_after(buffer, hidden[:, 0], index), caches

    return compile_step(model, prefill, jit_compile), compile_step(model, step, jit_compile)


def stream_ids(model, ids, config, max_length, jit_compile):
    """The generated ids of one prompt `ids` (a list), yielded as they are chosen, to the
    end token (left out) or `max_length` ids in all."""
    key = ("stream", config.trace_key(), bool(jit_compile))
    functions = model.__dict__.setdefault("_generation_functions", {})
    if key not in functions:
        functions[key] = make_stepper(model, config, jit_compile)
    prefill, step = functions[key]
    buffer = np.full((1, max_length), model.pad_token_id, "int32")
    buffer[0, : len(ids)] = ids
    generator = np.random.default_rng(None if config.seed is None else config.seed % 2**64)
    logits, caches = prefill(ops.convert_to_tensor(buffer), ops.convert_to_tensor(len(ids)))
    for index in range(len(ids), max_length):
        values = np.asarray(ops.convert_to_numpy(logits), "float64")
        if config.strategy == "sample":
            probabilities = np.exp(values - values.max())
            token = int(generator.choice(len(values), p=probabilities / probabilities.sum()))
        else:
            token = int(values.argmax())
        if token == config.end_token_id:
            return
        buffer[0, index] = token
        yield token
        if index + 1 < max_length:
            logits, caches = step(
                ops.convert_to_tensor(buffer), caches, ops.convert_to_tensor(index)
            )


def stream_text(token_stream, detokenize, strings=None):
    """Text pieces of `token_stream`'s ids (`detokenize`: id list -> text): each piece
    ends in whole characters; with `strings` (stop strings) the text ends right after the
    first one and the stream stops there. The pieces joined are the whole text."""
    generated, sent = [], ""
    for token in token_stream:
        generated.append(token)
        text = detokenize(generated)
        end = stop_strings.stop_string_end(text, strings) if strings else None
        if end is not None:
            yield text[len(sent) : end]
            return
        whole = text.rstrip("\ufffd")  # a character still cut: wait for its next bytes
        if len(whole) > len(sent) and whole.startswith(sent):
            yield whole[len(sent) :]
            sent = whole
    text = detokenize(generated) if generated else ""
    if len(text) > len(sent):
        yield text[len(sent) :]


def generate_stream(model, prompt, max_length, config, jit_compile, return_log_probs, overrides):
    """`generate(..., stream=True)`: checked now, decoded as the iterator is read."""
    preprocessor = getattr(model, "preprocessor", None)
    if not isinstance(prompt, str) or not hasattr(preprocessor, "generate_preprocess"):
        raise ValueError(
            "Expected one string prompt and a model with a CausalLMPreprocessor with "
            f"`stream=True`. Received: prompt of type {type(prompt).__name__}"
        )
    if return_log_probs:
        raise ValueError("Expected `return_log_probs=False` with `stream=True`.")
    config = model._text_generation_config(preprocessor, config, max_length, overrides)
    ids = preprocessor.generate_preprocess([prompt])
    return stream_reply(
        model,
        ids,
        config,
        jit_compile,
        lambda generated: preprocessor.generate_postprocess([generated], [0])[0],
    )


def stream_reply(model, ids, config, jit_compile, detokenize):
    """The text pieces of one prompt's continuation (`ids`: one id list)."""
    if config.strategy == "beam":
        raise ValueError(
            "Expected strategy 'greedy' or 'sample' with `stream=True` (beam search "
            "knows its tokens only at the end)."
        )
    _, _, max_length = model._checked_prompt(ids, config, pad_inside=True)
    tokens = stream_ids(model, ids[0], config, max_length, jit_compile)
    return stream_text(tokens, detokenize, config.stop_strings)
