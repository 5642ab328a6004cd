"""`generate()` for our decoder models: greedy, beam search, sampling, key/value cache.

Shared by `GPTLanguageModel`, `TransformerXL` and `TransformerSeq2Seq`. The settings are a
`GenerationConfig`. Greedy and sampling run keras-hub's samplers (`GreedySampler`,
`TopKSampler`, `TopPSampler`, `RandomSampler`); beam search is ours (`beam_search.py`:
keras-hub's `BeamSampler` has no length penalty and keeps scoring beams after their
end token). `decode_function` is the compiled decoding loop itself, one per distinct
setting, reused by every later call: `generate` runs it on NumPy inputs,
`export_saved_model` traces its portable form into a SavedModel; how it is compiled on
each backend is `decoder_compilation.py`'s.
"""

import functools

import keras
import numpy as np
from keras import ops

from keras_attn.models import logits_processors, portable_sampling, stop_strings, streaming
from keras_attn.models.beam_search import beam_search
from keras_attn.models.decoder_compilation import compile_decoder, has_keras_hub
from keras_attn.models.generation_config import GenerationConfig, sampler_settings


def pad_prompt(prompt, pad_token_id, argument="prompt", vocabulary_size=None, pad_inside=False):
    """`prompt` (list of id lists, or a right-padded int array) -> `(ids, lengths)`.

    Ids are checked here, before they reach a graph: under XLA an id outside the
    embedding is clamped to its last row, a silently wrong answer. `vocabulary_size`:
    every id in `[0, vocabulary_size)`, else a `ValueError` naming the first one out.
    `pad_inside`: a list's rows are as long as they are, the pad id allowed in them
    (GPT-2's prompts from text start with `<|endoftext|>`, its padding id too);
    otherwise a pad id inside a row is refused as a mistake."""
    row_lengths = None
    if (
        isinstance(prompt, (list, tuple))
        and prompt
        and isinstance(prompt[0], (list, tuple, np.ndarray))
    ):
        width = max(len(row) for row in prompt)
        rows = [np.asarray(row) for row in prompt]
        if not all(
            row.ndim == 1 and (np.issubdtype(row.dtype, np.integer) or not row.size) for row in rows
        ):
            raise ValueError(f"Expected `{argument}` rows of integer token ids.")
        ids = np.full((len(prompt), width), pad_token_id, "int64")
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
        if pad_inside:
            row_lengths = np.array([len(row) for row in rows], "int64")
    else:
        ids = np.asarray(prompt)
        if ids.ndim == 1:
            ids = ids[None]
    if ids.ndim != 2 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(
            f"Expected `{argument}` of integer token ids, shape (batch, length) or a list of "
            f"id lists. Received: {argument} of shape {ids.shape} and dtype {ids.dtype}"
        )
    if vocabulary_size is not None and ids.size:
        outside = (ids < 0) | (ids >= vocabulary_size)
        if outside.any():
            row, column = np.argwhere(outside)[0]
            raise ValueError(
                f"Expected `{argument}` ids in [0, {vocabulary_size}) (the model's vocabulary). "
                f"Received: {ids[row, column]} at row {row}, position {column}"
            )
    ids = ids.astype("int32")
    lengths = (ids != pad_token_id).sum(axis=1) if row_lengths is None else row_lengths
    if lengths.min() < 1:
        raise ValueError(
            f"Every row of `{argument}` needs at least one token. Received: lengths "
            f"{lengths.tolist()}"
        )
    if row_lengths is None and not np.all(
        (ids != pad_token_id) == (np.arange(ids.shape[1])[None] < lengths[:, None])
    ):
        raise ValueError(
            f"Expected `{argument}` right-padded with the pad id {pad_token_id} and no pad inside "
            "a row."
        )
    return ids, lengths


def is_text(prompt):
    """Whether `prompt` is a string or a batch of strings (not token ids)."""
    if isinstance(prompt, str):
        return True
    if isinstance(prompt, np.ndarray):
        return prompt.dtype.kind in "US" or (prompt.size and isinstance(prompt.flat[0], str))
    return isinstance(prompt, (list, tuple)) and bool(prompt) and isinstance(prompt[0], str)


def _detokenize(tokenizer, ids):
    """A tokenizer's text of one id list (`""` for none), bytes decoded as Python does
    with `errors="replace"`."""
    if not ids:
        return ""
    text = tokenizer.detokenize([list(ids)])
    text = text.numpy().tolist() if hasattr(text, "numpy") else text
    text = text[0]
    return text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text


class GenerationMixin:
    """`generate()` on top of three hooks a decoder model implements.

    - `_decoding_context(source)`: whatever the decoder needs besides its own tokens
      (the encoder output and its cross-attention caches; `None` for GPT).
    - `_call_decoder(token_ids, context, caches=None, index=None)`: hidden states
      `(batch, length, hidden)` and, with `caches` (a tuple, one per layer), the
      caches updated at positions `index ... index + length - 1`.
    - `_empty_caches(batch_size, length)`: the caches before the prompt is read
      (by default key/value caches of the `_decoder_blocks()`, the
      `TransformerDecoderBlock`s in order; Transformer-XL's memory is its own).
    Plus `max_sequence_length` (`None`: no bound), `pad_token_id` and `_logits(hidden)`.
    `generate` is the language models' (a prompt in, its continuation out); an
    encoder-decoder overrides it to take the source.
    """

    def _empty_caches(self, batch_size, length):
        """Zero self-attention caches for `length` positions, one per decoder block."""
        caches = []
        for block in self._decoder_blocks():
            attention = block.self_attention
            shape = (batch_size, 2, length, attention.num_key_value_heads, attention.key_dim)
            caches.append(ops.zeros(shape, self.compute_dtype))
        return tuple(caches)

    def generate(
        self,
        prompt,
        max_length=None,
        config=None,
        *,
        use_cache=True,
        jit_compile=True,
        return_log_probs=False,
        stream=False,
        **overrides,
    ):
        """Continues `prompt` up to `max_length` tokens, as `config` says.

        Args:
            prompt: token ids, `(batch, length)` right-padded with `pad_token_id`, or
                a list of id lists (each at least one token); with a
                `CausalLMPreprocessor` attached (`model.preprocessor`), a string or a
                list of strings: then strings come back, prompt and continuation,
                decoding stops at the preprocessor's end token and `max_length`
                defaults to its `sequence_length`.
            max_length: total length of the returned rows (prompt included),
                greater than the longest prompt and at most `max_sequence_length`
                where the model has one (overrides `config.max_length`; default:
                `default_generation_length()`).
            config: a `GenerationConfig` (default: greedy).
            use_cache: decode with key/value caches (False re-runs the decoder
                over the whole sequence for every token).
            jit_compile: compile the decoding loop with XLA.
            return_log_probs: also return each row's total log-probability of the
                generated tokens (a teacher-forced pass over the result).
            stream: one string prompt, greedy or sampling: return an iterator of the
                continuation's text pieces as they are decoded, each ending in whole
                characters (`keras_attn.models.streaming`).
            **overrides: `GenerationConfig` fields that replace `config`'s:
                `strategy` (`"greedy"`, `"beam"`, `"sample"`), `num_beams`,
                `length_penalty`, `end_token_id`, `temperature`, `top_k`, `top_p`,
                `min_p`, `repetition_penalty`, `seed`, `stop_strings` (text prompts:
                each row ends with the first one its continuation holds); and `sampler`,
                a keras-hub sampler's name or instance
                (`generation_config.sampler_settings`).

        Returns:
            `(batch, max_length)` int32 numpy array (for text: a string or a list of
            strings), and with `return_log_probs` `(batch,)` float32 log-probabilities.
        """
        if stream:
            return streaming.generate_stream(
                self, prompt, max_length, config, jit_compile, return_log_probs, overrides
            )
        if is_text(prompt):
            return self._generate_text(
                prompt, max_length, config, use_cache, jit_compile, return_log_probs, overrides
            )
        config = self._generation_config(config, max_length, overrides)
        if config.stop_strings:
            raise ValueError(
                "Expected a text prompt with `stop_strings` (they end a continuation's "
                "text). Received: token ids"
            )
        return self._generate_ids(prompt, config, use_cache, jit_compile, return_log_probs)

    def chat(
        self,
        messages,
        max_new_tokens=128,
        config=None,
        *,
        jit_compile=True,
        stream=False,
        **overrides,
    ):
        """The assistant's reply to a conversation, as a string: `messages` written as
        the chat template of the model's tokenizer says (the one its GGUF file
        carries), the assistant's turn opened, then decoded until the end token.

        Args:
            messages: a list of `{"role": "system" | "user" | "assistant", "content":
                str}` dicts.
            max_new_tokens: at most this many tokens of reply (positive int).
            config: a `GenerationConfig` (default: greedy).
            jit_compile: compile the decoding loop with XLA.
            stream: return an iterator of the reply's text pieces as they are decoded
                (greedy or sampling), each ending in whole characters.
            **overrides: `GenerationConfig` fields (`strategy`, `temperature`, ...,
                `stop_strings`: the reply ends with the first one it holds).

        Returns:
            The reply's text (special tokens left out).
        """
        preprocessor = getattr(self, "preprocessor", None)
        tokenizer = getattr(preprocessor, "tokenizer", None)
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                "chat() needs a tokenizer with a chat template (a GGUF file's: "
                "keras_attn.models.from_gguf); this model has none"
            )
        if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int):
            raise TypeError(f"Expected an int max_new_tokens. Received: {max_new_tokens!r}")
        if max_new_tokens < 1:
            raise ValueError(f"Expected max_new_tokens >= 1. Received: {max_new_tokens}")
        prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True)
        ids = preprocessor.generate_preprocess([prompt])[0]
        end = preprocessor.special_ids()[1]
        length = len(ids) + max_new_tokens
        if self.max_sequence_length is not None:
            length = min(length, self.max_sequence_length)
        if length <= len(ids):
            raise ValueError(
                f"The conversation takes {len(ids)} tokens: no room for a reply within "
                f"the model's {self.max_sequence_length} positions"
            )
        overrides.setdefault("end_token_id", end)
        config = self._generation_config(config, length, overrides)
        detokenize = functools.partial(_detokenize, tokenizer)
        if stream:
            return streaming.stream_reply(self, [ids], config, jit_compile, detokenize)
        tokens = self._generate_ids([ids], config, True, jit_compile, False, pad_inside=True)
        reply = [int(t) for t in np.asarray(tokens)[0, len(ids) :]]
        if end in reply:
            reply = reply[: reply.index(end)]
        count, text = stop_strings.stop_at_strings(detokenize, reply, config.stop_strings)
        return detokenize(reply) if text is None else text

    def _generate_ids(self, prompt, config, use_cache, jit_compile, return_log_probs, **options):
        tokens, _, lengths = self._generate(prompt, config, None, use_cache, jit_compile, **options)
        if not return_log_probs:
            return tokens
        return tokens, ops.convert_to_numpy(self._sequence_log_probs(tokens, lengths))

    def _generate_text(
        self, prompt, max_length, config, use_cache, jit_compile, return_log_probs, overrides
    ):
        """`generate` on strings, through the model's `CausalLMPreprocessor`."""
        preprocessor = getattr(self, "preprocessor", None)
        if not hasattr(preprocessor, "generate_preprocess"):
            raise ValueError(
                "Expected token ids as `prompt`: this model has no CausalLMPreprocessor to "
                "read text (set `model.preprocessor = CausalLMPreprocessor(tokenizer)`, or "
                "build it with `CausalLM.from_preset`). Received: strings"
            )
        single = isinstance(prompt, str)
        ids = preprocessor.generate_preprocess([prompt] if single else list(prompt))
        config = self._text_generation_config(preprocessor, config, max_length, overrides)
        tokens, _, lengths = self._generate(ids, config, None, use_cache, jit_compile, True)
        extras = [""] * len(ids)
        if config.stop_strings:  # the ids after each row's stopping token become padding
            tokens, extras = stop_strings.stop_rows(
                tokens,
                lengths,
                config.stop_strings,
                lambda generated: preprocessor.generate_postprocess([generated], [0])[0],
                config.end_token_id,
                self.pad_token_id,
            )
        texts = preprocessor.generate_postprocess(tokens, [len(row) for row in ids])
        texts = [stop_strings.without_extra(t, e) for t, e in zip(texts, extras, strict=True)]
        texts = texts[0] if single else texts
        if not return_log_probs:
            return texts
        return texts, ops.convert_to_numpy(self._sequence_log_probs(tokens, lengths))

    def _text_generation_config(self, preprocessor, config, max_length, overrides):
        """`_generation_config` for text prompts: decoding stops at the preprocessor's end
        token, and `max_length` defaults to its `sequence_length` (within the model's)."""
        if config is None or config.end_token_id is None:
            overrides.setdefault("end_token_id", preprocessor.special_ids()[1])
        if max_length is None and (config is None or config.max_length is None):
            bound = self.max_sequence_length or preprocessor.sequence_length
            max_length = min(preprocessor.sequence_length, bound)
        return self._generation_config(config, max_length, overrides)

    def _generation_config(self, config, max_length, overrides):
        """`config` (default: `GenerationConfig()`) with `max_length` and `overrides` applied."""
        if config is None:
            config = GenerationConfig()
        elif not isinstance(config, GenerationConfig):
            raise TypeError(
                f"Expected `config` to be a GenerationConfig. Received: config={config!r}"
            )
        overrides = dict(overrides)
        if "sampler" in overrides:  # keras-hub's sampler names and instances
            overrides = {**sampler_settings(overrides.pop("sampler")), **overrides}
        changes = {**overrides, **({} if max_length is None else {"max_length": max_length})}
        return config.replace(**changes) if changes else config

    def _target_vocabulary_size(self):
        """The ids a prompt may hold and generation gives: the decoder's vocabulary."""
        return getattr(self, "target_vocabulary_size", None) or self.vocabulary_size

    def default_generation_length(self):
        """Rows' total length when neither `max_length` nor the config sets one."""
        return self.max_sequence_length

    def _checked_prompt(self, prompt, config, pad_inside=False):
        """`(prompt ids, lengths, max_length)`: `prompt` padded (`pad_prompt`) and checked
        with `config` against the model's vocabulary and positions."""
        vocabulary = self._target_vocabulary_size()
        prompt, lengths = pad_prompt(
            prompt, self.pad_token_id, vocabulary_size=vocabulary, pad_inside=pad_inside
        )
        if config.end_token_id is not None and config.end_token_id >= vocabulary:
            raise ValueError(  # an id never generated: every row would run to max_length
                f"Expected `end_token_id` in [0, {vocabulary}) (the model's vocabulary). "
                f"Received: end_token_id={config.end_token_id}"
            )
        bound = self.max_sequence_length  # None: relative positions, no bound
        max_length = config.max_length
        if max_length is None:
            max_length = self.default_generation_length()
        if bound is not None and prompt.shape[1] > bound:
            raise ValueError(
                f"`prompt` is longer ({prompt.shape[1]} tokens) than the model's positions "
                f"(max_sequence_length={bound})."
            )
        if max_length <= lengths.max():
            raise ValueError(
                "Expected `max_length` greater than the longest prompt "
                f"({lengths.max()} tokens). Received: max_length={max_length}"
            )
        if bound is not None and max_length > bound:
            raise ValueError(
                f"Expected `max_length` <= max_sequence_length={bound}. "
                f"Received: max_length={max_length}"
            )
        return prompt, lengths, max_length

    def _generate(self, prompt, config, source, use_cache, jit_compile, pad_inside=False):
        """`(tokens, log_probs, prompt lengths)` as NumPy arrays for `generate`
        (`pad_inside`: as `pad_prompt`'s)."""
        prompt, lengths, max_length = self._checked_prompt(prompt, config, pad_inside)
        if source is not None and source.shape[0] != prompt.shape[0]:
            if prompt.shape[0] != 1:
                raise ValueError(
                    f"`prompt` has {prompt.shape[0]} rows and the source {source.shape[0]}; "
                    "give one prompt per source row, or one for all."
                )
            prompt, lengths = (
                np.repeat(prompt, source.shape[0], 0),
                np.repeat(lengths, source.shape[0]),
            )
        padded = np.full((prompt.shape[0], max_length), self.pad_token_id, "int32")
        padded[:, : prompt.shape[1]] = prompt
        function, sampler = self._decoder(config, use_cache, jit_compile, portable=False)
        if config.strategy == "sample" and config.seed is not None:
            # The same seed gives the same samples, without retracing.
            sampler.seed_generator.state.assign(
                np.array([config.seed, 0], sampler.seed_generator.state.dtype)
            )
        arguments = (padded, lengths.astype("int32"))
        if source is not None:
            arguments += (np.asarray(source, "int32"),)
        tokens, log_probs = function(*(ops.convert_to_tensor(a, "int32") for a in arguments))
        # log_probs: beam search's own total per row (zeros for the samplers).
        return ops.convert_to_numpy(tokens), ops.convert_to_numpy(log_probs), lengths

    def decode_function(self, config=None, *, use_cache=True, jit_compile=True, portable=False):
        """The compiled decoding loop for `config`: what `generate` runs.

        Call it as `decode(prompt, lengths)` (language model) or
        `decode(prompt, lengths, source)` (encoder-decoder) with int32 tensors:
        `prompt` `(batch, max_length)`, each row's prompt right-padded with
        `pad_token_id` to the full output length; `lengths` `(batch,)` the prompt
        lengths; `source` `(batch, source_len)` the encoder's token ids. It returns
        `(tokens, log_probs)`: `(batch, max_length)` ids (padding after an end
        token) and beam search's total log-probability per row (zeros otherwise).
        `config.max_length` does not enter it (the length is the prompt's width), nor
        `config.seed` but in a portable sampler's graph (else sampling draws from the
        model's seed state, which `generate(seed=...)` sets). One function is made per
        distinct setting and reused; it retraces only for new shapes.

        Args:
            config: a `GenerationConfig` (default: greedy).
            use_cache: decode with key/value caches (False re-runs the decoder
                over the whole sequence for every token).
            jit_compile: compile with XLA (TensorFlow, JAX; ignored on PyTorch).
            portable: trace core TensorFlow ops only, what TF Serving links (and
                `export_saved_model` asks for): caches are written with
                `ops.scatter_update` instead of XLA's dynamic-update-slice, and
                greedy decoding runs as beam search with one beam (the same
                tokens), sampling as `portable_sampling.sample_loop` (stateless
                draws seeded by `config.seed` and the position; a new seed per call
                where it is `None`). Needs `jit_compile=False` and the TensorFlow
                backend.

        Returns:
            A function of backend tensors: a `tf.function` on TensorFlow, a
            `jax.jit`-compiled function (with its variables bound) on JAX, an
            eager `no_grad` function on PyTorch.
        """
        config = GenerationConfig() if config is None else config
        return self._decoder(config, use_cache, jit_compile, portable)[0]

    def _decoder(self, config, use_cache, jit_compile, portable):
        """`(compiled decoder, sampler or None)` for `config`, made once per setting."""
        if portable and jit_compile:
            raise ValueError(
                "Expected `jit_compile=False` with `portable=True`: an exported graph holds no "
                "XLA clusters."
            )
        if portable and keras.config.backend() != "tensorflow":
            raise ValueError(
                "Expected the TensorFlow backend with `portable=True`: a portable decoder is "
                f"traced for a SavedModel. Received: backend {keras.config.backend()!r}"
            )
        vocabulary = getattr(self, "vocabulary_size", None)
        if config.strategy == "beam" and vocabulary and config.num_beams > vocabulary:
            raise ValueError(
                f"Expected `num_beams` <= {vocabulary} (the model's vocabulary: the first step "
                f"has no more distinct tokens). Received: num_beams={config.num_beams}"
            )
        if config.strategy == "greedy" and (portable or not has_keras_hub()):
            # One beam is greedy (the same tokens), written with core ops and our code only.
            config = config.replace(strategy="beam", num_beams=1)
        key = (config.trace_key(), bool(use_cache), bool(jit_compile), bool(portable))
        if portable and config.strategy == "sample":  # the graph holds its seed
            key += (config.seed,)
        functions = self.__dict__.setdefault("_generation_functions", {})
        if key not in functions:
            functions[key] = self._make_decoder(
                config, use_cache, jit_compile, cache_write="scatter" if portable else "slice"
            )
        return functions[key]

    def _make_decoder(self, config, use_cache, jit_compile, cache_write):
        strategy, num_beams, end_token_id = config.strategy, config.num_beams, config.end_token_id
        portable_sample = strategy == "sample" and cache_write == "scatter"
        if strategy in ("greedy", "sample") and not portable_sample:
            if not has_keras_hub():
                raise ImportError(
                    "Sampling uses keras-hub's samplers; install them with: pip install keras-hub "
                    "(greedy and beam search run without it)."
                )
            # keras-hub imports TensorFlow when it is installed: loaded when first needed.
            from keras_hub.samplers import GreedySampler, RandomSampler

        sampler = None
        if strategy == "greedy":
            sampler = GreedySampler(temperature=config.temperature)
        elif strategy == "sample" and not portable_sample:  # the rest: `process`
            sampler = RandomSampler(temperature=1.0)
        process = logits_processors.processors(config)
        beams = num_beams if strategy == "beam" else 1
        pad = self.pad_token_id

        def run(prompt, lengths, source=None):
            prompt_mask = ops.arange(prompt.shape[1])[None, :] < lengths[:, None]
            if beams > 1:  # beams are rows: batch * num_beams
                prompt, lengths = ops.repeat(prompt, beams, 0), ops.repeat(lengths, beams, 0)
                source = None if source is None else ops.repeat(source, beams, 0)
            batch_size, max_length = ops.shape(prompt)[0], prompt.shape[1]
            mask = ops.arange(max_length)[None, :] < lengths[:, None]  # prompt positions
            index = ops.min(lengths)
            context = self._decoding_context(source)
            caches = ()
            if use_cache:
                # Prefill: every prompt position's keys/values in one pass.
                _, caches = self._call_decoder(
                    prompt,
                    context,
                    self._empty_caches(batch_size, max_length),
                    0,
                    cache_write=cache_write,
                )

            def next(prompt, caches, index):
                if use_cache:
                    step = ops.slice(prompt, [0, index - 1], [batch_size, 1])
                    hidden, caches = self._call_decoder(
                        step, context, caches, index - 1, cache_write=cache_write
                    )
                    hidden = hidden[:, 0]
                else:  # re-run the whole decoder, keep the last position's state
                    hidden = ops.take(self._call_decoder(prompt, context), index - 1, axis=1)
                logits = self._logits(hidden)
                if process is not None:  # the tokens before `index`: the prompt so far
                    logits = process(logits, prompt, ops.arange(prompt.shape[1])[None, :] < index)
                return logits, None, caches

            if strategy == "beam":
                tokens, log_probs = beam_search(
                    next,
                    prompt,
                    caches,
                    index,
                    mask,
                    beams,
                    end_token_id,
                    config.length_penalty,
                    pad,
                    config.temperature,
                    write=cache_write,
                )
            elif portable_sample:  # core TensorFlow ops, the seed in the graph
                tokens = portable_sampling.sample_loop(
                    next, prompt, caches, index, mask, end_token_id, pad, config.seed, cache_write
                )
                log_probs = ops.zeros((batch_size,), "float32")
            else:
                if end_token_id is not None and end_token_id == pad:
                    # keras-hub's samplers stop a row at an end token anywhere after its
                    # prompt, the padding still to be written included: where the end
                    # token is the padding too (GPT-2's `<|endoftext|>`), those positions
                    # hold another id until written (any left are padded below).
                    fill = (pad + 1) % self._target_vocabulary_size()
                    prompt = ops.where(mask, prompt, ops.cast(fill, prompt.dtype))
                tokens = sampler(
                    next,
                    prompt,
                    cache=caches,
                    index=index,
                    mask=mask,
                    stop_token_ids=None if end_token_id is None else (end_token_id,),
                    model=self,  # on JAX: the loop reads the weights as state, not constants
                )
                log_probs = ops.zeros((batch_size,), "float32")
            if end_token_id is not None:  # pad everything after the first generated end token
                ends = ops.logical_and(tokens == end_token_id, ops.logical_not(prompt_mask))
                ends = ops.cast(ends, "int32")
                after = (ops.cumsum(ends, axis=1) - ends) > 0
                tokens = ops.where(after, pad, tokens)
            return tokens, log_probs

        return compile_decoder(self, run, sampler, jit_compile), sampler

    def _sequence_log_probs(self, tokens, lengths, source=None):
        """Total log-probability of each row's tokens after its first `lengths`."""
        tokens = ops.convert_to_tensor(tokens, "int32")
        hidden = self._call_decoder(tokens, self._decoding_context(source))
        log_probs = ops.log_softmax(ops.cast(self._logits(hidden[:, :-1]), "float32"), axis=-1)
        picked = ops.take_along_axis(log_probs, tokens[:, 1:, None], axis=-1)[..., 0]
        positions = ops.arange(1, tokens.shape[1])[None, :]
        generated = ops.logical_and(
            positions >= lengths[:, None], tokens[:, 1:] != self.pad_token_id
        )
        return ops.sum(ops.where(generated, picked, 0.0), axis=1)
