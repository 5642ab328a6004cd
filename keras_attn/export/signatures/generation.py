"""`GPTLanguageModel`, `TransformerXL` and `TransformerSeq2Seq`: decoding in the graph
(`GenerationMixin.decode_function`), raw text in and out."""

import numpy as np
import tensorflow as tf

from keras_attn.errors import UserInputError
from keras_attn.export.signatures import common, served_stops
from keras_attn.export.signatures.signature_kinds import serves
from keras_attn.models import GenerationConfig


def _decoding(model, generation, default_length, max_positions=None):
    """The generation settings an export traces, checked: greedy, beam search or sampling
    (`portable_sampling`: its processors and its seed in the graph), rows of `max_length`
    tokens (`default_length` when not given), at least 2 and within `max_positions`
    (`None`: no bound). A length that cannot be exported is a `UserInputError` (the
    `keras-attn export` flags set it)."""
    generation = GenerationConfig() if generation is None else generation
    if not isinstance(generation, GenerationConfig):
        raise ValueError(
            f"Expected `generation` to be a GenerationConfig. Received: generation={generation!r}"
        )
    max_length = default_length if generation.max_length is None else generation.max_length
    if max_length < 2 or (max_positions is not None and max_length > max_positions):
        expected = (
            ">= 2" if max_positions is None else f"in [2, {max_positions}] (the model's positions)"
        )
        raise UserInputError(
            f"Expected `max_length` {expected}. Received: max_length={max_length!r}"
        )
    return generation.replace(max_length=max_length)


class _BytePairText:
    """keras-hub's byte-pair tokenizer (GPT-2's) as the text signatures use a
    WordPiece one: an empty prompt starts from `<|endoftext|>`, which the output text
    leaves out (it is also GPT-2's padding)."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.sep_id = tokenizer.end_token_id
        self.vocabulary = list(tokenizer.get_vocabulary())

    def tokenize(self, text):
        """Strings -> ragged int32 ids (keras-hub gives lists when run eagerly)."""
        ids = self.tokenizer.tokenize(text)
        if isinstance(ids, tf.RaggedTensor):
            return tf.cast(ids, tf.int32)
        if isinstance(ids, tf.Tensor):
            return tf.RaggedTensor.from_tensor(tf.cast(ids, tf.int32))
        return tf.ragged.constant(ids, tf.int32, ragged_rank=1)

    def detokenize_to_tensor(self, token_ids):
        token_ids = tf.convert_to_tensor(token_ids, tf.int32)
        return self.tokenizer.detokenize(
            tf.ragged.boolean_mask(token_ids, tf.not_equal(token_ids, self.sep_id))
        )


def is_byte_pair(tokenizer):
    """Whether `tokenizer` is a byte-pair one (keras-hub's, e.g. `gpt2_tokenizer`'s)."""
    return hasattr(tokenizer, "merges") and hasattr(tokenizer, "end_token_id")


@serves("language_model", generation=None, start_token=False)
def language_model_signatures(model, tokenizer, generation, start_token):
    """`serving_default` (`prompt` -> prompt and continuation as text and ids) and
    `serve_token_ids`; the model continues the last `max_length - 1` tokens of a
    prompt (an empty prompt starts from `[SEP]`, GPT-2's from `<|endoftext|>`; every
    prompt does with `start_token`, as a `CausalLMPreprocessor` starts them) to
    `max_length` (default: the model's `default_generation_length()`; Transformer-XL's
    memory is its cache), stopping at `generation.end_token_id`, by default the end token
    of the model's preprocessor where it has one (as its `generate` on text does). The
    tokenizer: a `WordPieceTokenizer` or GPT-2's byte-pair one (`gpt2_tokenizer`)."""
    if is_byte_pair(tokenizer):
        tokenizer = _BytePairText(tokenizer)
    generation = _decoding(
        model, generation, model.default_generation_length(), model.max_sequence_length
    )
    preprocessor = getattr(model, "preprocessor", None)
    if generation.end_token_id is None and hasattr(preprocessor, "special_ids"):
        # Where the model's own `generate(text)` stops: a chat model's reply ends at its
        # end-of-turn token, not at max_length inside a next turn it made up.
        generation = generation.replace(end_token_id=preprocessor.special_ids()[1])
    decode = model.decode_function(generation, jit_compile=False, portable=True)
    max_length, pad = generation.max_length, model.pad_token_id

    def generate_ids(token_ids, lengths):
        """`(batch, width)` right-padded prompt ids -> `(batch, max_length)` ids (with
        stop strings: and the text each row's last token holds past its string)."""
        prompt, row_lengths = _last_tokens(
            token_ids, lengths, max_length - 1, tokenizer.sep_id, pad, start_token
        )
        tokens, _ = decode(prompt, row_lengths)
        if not generation.stop_strings:
            return tokens
        return served_stops.stop_tokens(
            tokens,
            row_lengths,
            generation.stop_strings,
            tokenizer.detokenize_to_tensor,
            generation.end_token_id,
            pad,
        )

    return _text_signatures(
        tokenizer, tokenizer, generate_ids, "prompt", pad, model.vocabulary_size
    )


def _last_tokens(token_ids, lengths, keep, sep_id, pad, start_token=False):
    """The last `keep` tokens of each right-padded prompt, `[SEP]` (a sentence start) for
    an empty one (`start_token`: before every one): `(prompt (batch, keep + 1)
    right-padded with pad, row lengths)`."""
    batch = tf.shape(token_ids)[0]
    ragged = tf.RaggedTensor.from_tensor(token_ids, lengths=tf.cast(lengths, tf.int64))
    empty = tf.equal(ragged.row_lengths(), 0)
    if start_token:
        empty = tf.ones_like(empty)
    separator = tf.ragged.boolean_mask(tf.fill([batch, 1], sep_id), empty[:, None])
    ragged = tf.concat([separator, ragged], axis=1)
    row_lengths = tf.cast(ragged.row_lengths(), tf.int32)
    keep_from = tf.maximum(row_lengths - keep, 0)
    ragged = tf.ragged.boolean_mask(ragged, tf.ragged.range(row_lengths) >= keep_from[:, None])
    prompt = ragged.to_tensor(default_value=pad, shape=[None, keep + 1])
    return tf.ensure_shape(prompt, [None, keep + 1]), tf.cast(ragged.row_lengths(), tf.int32)


@serves("seq2seq", target_tokenizer=None, generation=None)
def seq2seq_signatures(model, tokenizer, target_tokenizer, generation):
    """`serving_default` (`source` -> the translation as text and ids) and
    `serve_token_ids`; decoding starts from the target's `[CLS]` and ends at its
    `[SEP]` (unless `generation.end_token_id` says otherwise)."""
    if target_tokenizer is None:
        raise ValueError(
            "Expected `target_tokenizer` for a TransformerSeq2Seq (its decoder's vocabulary)."
        )
    generation = _decoding(model, generation, model.max_sequence_length, model.max_sequence_length)
    if generation.stop_strings:
        raise UserInputError(
            "Expected no `stop_strings` for a translation model (they end a language "
            f"model's continuation). Received: stop_strings={generation.stop_strings!r:.200}"
        )
    if generation.end_token_id is None:
        generation = generation.replace(end_token_id=target_tokenizer.sep_id)
    decode = model.decode_function(generation, jit_compile=False, portable=True)
    max_length, pad = generation.max_length, model.pad_token_id

    def generate_ids(token_ids, lengths):
        """`(batch, width)` right-padded source ids -> `(batch, max_length)` target ids."""
        batch = tf.shape(token_ids)[0]
        source = token_ids[:, : model.max_sequence_length]
        prompt = tf.concat(
            [tf.fill([batch, 1], target_tokenizer.cls_id), tf.fill([batch, max_length - 1], pad)],
            axis=1,
        )
        tokens, _ = decode(
            tf.ensure_shape(prompt, [None, max_length]), tf.ones([batch], tf.int32), source
        )
        return tokens

    return _text_signatures(
        tokenizer, target_tokenizer, generate_ids, "source", pad, model.vocabulary_size
    )


def _text_signatures(tokenizer, output_tokenizer, generate_ids, name, pad, vocabulary_size):
    """`serving_default` (raw text) and `serve_token_ids` around `generate_ids`; the
    latter refuses an id outside `[0, vocabulary_size)` (an `InvalidArgumentError`, as
    TF Serving answers a bad request)."""

    def from_text(text):
        pieces = tokenizer.tokenize(common.clean_text(text))
        ids_ = pieces.to_tensor(default_value=pad)
        tokens = generate_ids(ids_, tf.cast(pieces.row_lengths(), tf.int32))
        tokens, extras = tokens if isinstance(tokens, tuple) else (tokens, None)
        # A byte-level vocabulary may end a reply inside a character, or make bytes that
        # are no UTF-8: those become U+FFFD, as Python's decode(errors="replace").
        text = tf.strings.unicode_transcode(
            output_tokenizer.detokenize_to_tensor(tokens),
            "UTF-8",
            "UTF-8",
            errors="replace",
            replacement_char=0xFFFD,
        )
        if extras is not None:  # a stop string ended inside the last token kept
            text = served_stops.without_extras(text, extras)
        return {"text": text, "token_ids": tokens}

    def serve_token_ids(token_ids, padding_mask):
        lengths = tf.reduce_sum(tf.cast(padding_mask > 0, tf.int32), axis=1)
        # An id outside the vocabulary would read another row (clamped) on some devices.
        checked = tf.debugging.assert_less(
            token_ids, vocabulary_size, message=f"Expected token_ids in [0, {vocabulary_size})"
        )
        with tf.control_dependencies([checked]):
            checked = tf.debugging.assert_non_negative(
                token_ids, message=f"Expected token_ids in [0, {vocabulary_size})"
            )
        with tf.control_dependencies([checked]):
            tokens = generate_ids(tf.identity(token_ids), lengths)
        return {"token_ids": tokens[0] if isinstance(tokens, tuple) else tokens}

    texts = [" ".join(t for t in tokenizer.vocabulary[:60] if t.isalpha())[:40] or "warm up", ""]
    x = tokenizer.tokenize(tf.constant(texts[:1])).to_tensor().numpy()
    signatures = common.Signatures()
    signatures.add("serving_default", from_text, [common.strings(name)], {name: texts})
    signatures.add(
        "serve_token_ids",
        serve_token_ids,
        [common.ids("token_ids"), common.ids("padding_mask")],
        {"token_ids": x, "padding_mask": np.ones(x.shape, "int32")},
    )
    return signatures
