"""Byte-level BPE whose pre-tokenization is GPT-2's, Llama 3's or Qwen 2's regular
expression exactly, in TensorFlow ops: the tokenizer of SmolLM2's, Llama 3's and Qwen's GGUF
files.

GPT-2 splits text with `'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|
\\s+(?!\\S)|\\s+`, whose look-ahead RE2 (TensorFlow's regular expressions) cannot run.
keras-hub's `BytePairTokenizer` emulates it with a marker character, and differs from it on
runs of white space: three new lines before a word are one piece there, `"\\n\\n"` and
`"\\n"` in GPT-2; two trailing spaces are two pieces there, one in GPT-2 (and text holding
its marker, `"६"`, loses it). What the look-ahead does, said without one: a run of white
space followed by more text gives all but its last character as one piece, and that last
character joins the next piece if it is a space, else stands alone; a run at the end stays
whole. `pretokenize` does exactly that with RE2 and ragged tensors; the byte-pair merges
are keras-hub's (`ByteLevelBPETokenizer` hands it these pieces).

Llama 3 and Qwen 2 split with `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|
\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+` (Qwen 2: `\\p{N}`, one
digit a piece). Its look-ahead, said the same way: new lines right after a mark join the
mark's piece; what is left of a run of white space up to its last new line is one piece;
of the rest, all but the last character is one piece and the last goes with the text that
follows (where the pattern then decides whether it joins it), unless the run ends the text.
"""

import functools
import re
import weakref

import keras

# White space as GPT-2's `\s` (Python's, Unicode's White_Space) and `tokenizers`' know
# it; RE2's `\s` is ASCII's only, which would make a no-break space punctuation.
_SPACE = (
    r"\t\n\x0b\f\r \x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}\x{202f}"
    r"\x{205f}\x{3000}"
)
_S = f"[{_SPACE}]"
# GPT-2's pattern without its look-ahead: applied to pieces in which every run of white
# space is already what GPT-2 makes of it (see the module docstring).
_PIECES = rf"'s|'t|'re|'ve|'m|'ll|'d| ?\p{{L}}+| ?\p{{N}}+| ?[^{_SPACE}\p{{L}}\p{{N}}]+|{_S}+"
# Llama 3's pattern without its look-ahead (`_llama3_pieces` places the white space first),
# `{digits}` the length of a number's pieces.
_LLAMA3_PIECES = (
    rf"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{{L}}\p{{N}}]?\p{{L}}+|\p{{N}}{{digits}}"
    rf"| ?[^{_SPACE}\p{{L}}\p{{N}}]+[\r\n]*|{_S}*[\r\n]+|{_S}+"
)
# A split's name -> its pattern's number pieces (`None`: GPT-2's pattern).
SPLITS = {"gpt2": None, "llama3": "{1,3}", "qwen2": ""}


def pretokenize(texts, special_tokens=(), individual_digits=False, split="gpt2"):
    """GPT-2's (or Llama 3's, Qwen 2's) pre-tokenization of a batch of strings, as ragged
    `(batch, pieces)`.

    Args:
        texts: a string tensor `(batch,)`.
        special_tokens: strings kept whole wherever they occur (the chat markers); the
            text between them is split on its own, as `transformers` splits around its
            added tokens.
        individual_digits: every digit a piece of its own first (`tokenizers`' `Digits`
            pre-tokenizer: SmolLM2's), so a space before a digit never joins it.
        split: `"gpt2"`, or `"llama3"`, `"qwen2"` (their patterns; no `individual_digits`).

    Returns:
        A `tf.RaggedTensor` of strings `(batch, None)`.
    """
    import tensorflow as tf
    import tensorflow_text as tf_text

    texts = tf.convert_to_tensor(texts)
    _check_split(split, individual_digits)
    if special_tokens:
        alternatives = "|".join(re.escape(t) for t in sorted(special_tokens, key=len)[::-1])
        chunks = tf_text.regex_split(texts, f"({alternatives})", f"({alternatives})")
        is_special = tf.strings.regex_full_match(chunks.flat_values, f"(?:{alternatives})")
    else:
        chunks = tf.RaggedTensor.from_tensor(tf.expand_dims(texts, 1))
        is_special = tf.zeros(tf.shape(texts), tf.bool)
    flat = chunks.flat_values
    # Each chunk alone: its runs of white space (and digits) apart from the rest.
    delimiter = rf"{_S}+|\p{{N}}" if individual_digits else f"{_S}+"
    plain = tf.where(is_special, "", flat)
    runs = tf_text.regex_split(plain, delimiter, delimiter)
    if SPLITS[split] is None:
        pieces = _place_last_spaces(runs, individual_digits)
    else:
        pieces = _llama3_pieces(runs, _LLAMA3_PIECES.replace("{digits}", SPLITS[split]))
    specials = tf.RaggedTensor.from_row_lengths(
        tf.boolean_mask(flat, is_special), tf.cast(is_special, tf.int64)
    )
    pieces = tf.concat([specials, pieces], axis=1)  # a chunk is one or the other
    return tf.RaggedTensor.from_row_splits(pieces, chunks.row_splits).merge_dims(1, 2)


def _place_last_spaces(runs, individual_digits):
    """Rows of alternating white-space runs and other text -> the pieces GPT-2's
    look-ahead makes of them (ragged `(chunks, pieces)`, then split with `_PIECES`)."""
    import tensorflow as tf

    flat, lengths, _, last, is_space = _elements(runs)
    following = tf.concat([flat[1:], [""]], 0)
    # A digit apart (`individual_digits`) ends the run's piece as the text's end does.
    split = is_space & ~last
    if individual_digits:
        split &= ~tf.strings.regex_full_match(following, r"\p{N}")
    head = tf.where(split, tf.strings.regex_replace(flat, f"{_S}$", ""), flat)
    tail = tf.where(split, tf.strings.regex_replace(flat, f"^{_S}*({_S})$", r"\1"), "")
    joins = split & tf.equal(tail, " ")
    joined_before = tf.concat([[False], joins[:-1]], 0)
    head = tf.where(joined_before, tf.strings.join([" ", head]), head)
    tail = tf.where(joins, "", tail)
    return _split_parts(head, tail, lengths, _PIECES)


def _elements(runs):
    """Of ragged `(chunks, elements)`: the flat elements, each chunk's count, whether an
    element is its chunk's first, its last, and white space."""
    import tensorflow as tf

    flat = runs.flat_values
    lengths = runs.row_lengths()
    position = tf.range(tf.size(flat, out_type=tf.int64)) - tf.repeat(runs.row_starts(), lengths)
    first, last = position == 0, position == tf.repeat(lengths, lengths) - 1
    return flat, lengths, first, last, tf.strings.regex_full_match(flat, f"{_S}+")


def _split_parts(first, second, lengths, pattern):
    """Each element's two parts (`first`, `second`, either may be empty), in order per
    chunk, each split with `pattern`: ragged `(chunks, pieces)`."""
    import tensorflow as tf
    import tensorflow_text as tf_text

    rows = tf.RaggedTensor.from_row_lengths(
        tf.reshape(tf.stack([first, second], 1), [-1]), 2 * lengths
    )
    rows = tf.ragged.boolean_mask(rows, tf.ragged.map_flat_values(tf.not_equal, rows, ""))
    pieces = tf_text.regex_split(rows.flat_values, pattern, pattern)
    return tf.RaggedTensor.from_row_lengths(pieces, rows.row_lengths()).merge_dims(1, 2)


def _llama3_pieces(runs, pattern):
    """Rows of alternating white-space runs and other text -> Llama 3's pieces (ragged
    `(chunks, pieces)`): the white space placed as the module docstring says, then each
    part split with `pattern`."""
    import tensorflow as tf

    flat, lengths, first, last, is_space = _elements(runs)
    before = tf.concat([[""], flat[:-1]], 0)
    # New lines right after a mark are the mark's (`[^\s\p{L}\p{N}]+[\r\n]*`).
    mark = rf"(?s).*[^{_SPACE}\p{{L}}\p{{N}}]"
    absorbed = is_space & ~first & tf.strings.regex_full_match(before, mark)
    lead = tf.where(absorbed, tf.strings.regex_replace(flat, r"(?s)^([\r\n]*).*$", r"\1"), "")
    rest = tf.where(absorbed, tf.strings.regex_replace(flat, r"^[\r\n]+", ""), flat)
    # A run up to its last new line (`\s*[\r\n]+`); after it, the last character of a run
    # that text follows goes with that text (`\s+(?!\S)`).
    lines = tf.strings.regex_replace(rest, r"(?s)^(.*[\r\n])?.*$", r"\1")
    after = tf.strings.regex_replace(rest, r"(?s)^.*[\r\n]", "")
    moves = is_space & ~last & tf.not_equal(after, "")
    moved = tf.where(moves, tf.strings.regex_replace(after, r"(?s)^.*(.)$", r"\1"), "")
    kept = tf.where(moves, tf.strings.regex_replace(after, r"(?s).$", ""), after)
    text = tf.strings.join([tf.concat([[""], moved[:-1]], 0), rest, tf.concat([lead[1:], [""]], 0)])
    return _split_parts(
        tf.where(is_space, lines, text), tf.where(is_space, kept, ""), lengths, pattern
    )


def _check_split(split, individual_digits):
    if split not in SPLITS:
        raise ValueError(f"Expected `split` to be one of {sorted(SPLITS)}. Received: {split!r}")
    if individual_digits and SPLITS[split] is not None:
        raise ValueError(
            f"`individual_digits` is GPT-2's pattern's option; {split!r} splits numbers itself"
        )


@functools.cache
def tokenizer_class():
    """`ByteLevelBPETokenizer`, defined on first use (keras-hub imported only then), once."""
    return _define()


# Tokenizer -> {sequence_length: its compiled tokenize}, outside the tokenizer (a
# `tf.Module` would track the functions as its own).
_COMPILED = weakref.WeakKeyDictionary()


def _tokenize_by_reference(tokenizer, text):
    return tokenizer()._traced_tokenize(text)


def _check_merges(merges):
    """Each merge rule two non-empty tokens joined by one space (a `ValueError` names
    the first that is not, by its rank, as keras-hub's unpacking would not)."""
    for rank, merge in enumerate(merges):
        parts = merge.split(" ") if isinstance(merge, str) else ()
        if len(parts) != 2 or not all(parts):
            raise ValueError(
                f"Expected each merge rule as two tokens joined by one space. Received: "
                f"merges[{rank}]={merge!r:.100}"
            )


def _define():
    import keras_hub
    from keras_hub.src.tokenizers import byte_pair_tokenizer
    from keras_hub.src.utils import tensor_utils

    from keras_attn.data.chat_templates import ChatTokenizerMixin

    @keras.saving.register_keras_serializable(package="keras_attn")
    class ByteLevelBPETokenizer(ChatTokenizerMixin, keras_hub.tokenizers.BytePairTokenizer):
        """keras-hub's byte-pair merges on GPT-2's, Llama 3's or Qwen 2's pre-tokenization
        exactly (`pretokenize`), always in TensorFlow ops (eager, `tf.data`, exports).

        Args:
            vocabulary: token -> id.
            merges: the merge rules, `"a b"` each, in rank order.
            sequence_length: pad or cut every row to this many ids (`None`: ragged).
            special_tokens: tokens kept whole in the text (chat markers), each its id.
            individual_digits: every digit its own piece before the merges (SmolLM2).
            split: the pre-tokenizer's pattern: `"gpt2"`, `"llama3"` or `"qwen2"`.
            start_token: the token a text starts with; `end_token`, `pad_token` the
                end and padding tokens (`start_token_id`, ... for the preprocessor).
            chat_template: the file's Jinja chat template, or `None`.
            **kwargs: keras-hub `BytePairTokenizer` arguments.
        """

        def __init__(
            self,
            vocabulary=None,
            merges=None,
            sequence_length=None,
            special_tokens=(),
            individual_digits=False,
            split="gpt2",
            start_token=None,
            end_token=None,
            pad_token=None,
            chat_template=None,
            **kwargs,
        ):
            kwargs.pop("unsplittable_tokens", None)
            kwargs["_allow_python_workflow"] = False
            if isinstance(merges, list | tuple):
                _check_merges(merges)
            _check_split(split, individual_digits)
            self.individual_digits = bool(individual_digits)
            self.split = split
            self._set_chat_tokens(start_token, end_token, pad_token, chat_template)
            super().__init__(
                vocabulary=vocabulary,
                merges=merges,
                sequence_length=sequence_length,
                unsplittable_tokens=list(special_tokens),
                **kwargs,
            )

        def _tokenize_tf(self, inputs):
            import tensorflow as tf

            if tf.executing_eagerly() and not isinstance(inputs, tf.RaggedTensor):
                text = tensor_utils.convert_preprocessing_inputs(inputs)
                if text.dtype == tf.string and text.shape.rank == 1:
                    with tf.device("cpu"):
                        ids = self._compiled_tokenize()(text)
                        return tensor_utils.convert_preprocessing_outputs(ids)
            return self._traced_tokenize(inputs)

        def _compiled_tokenize(self):
            """`_traced_tokenize` on a batch of strings as a `tf.function` of this tokenizer
            and its `sequence_length`, for eager calls: keras-hub's merge loop run op by op
            took 0.35-0.7 s a call, retraced for each new shape (with TensorFlow's warning
            about retracing), against milliseconds as one graph traced once."""
            import tensorflow as tf

            functions = _COMPILED.setdefault(self, {})
            if self.sequence_length not in functions:
                # A weak reference: the table's value does not keep its key alive. A
                # partial, not a function: TensorFlow counts retracing per function code,
                # and would warn of it after the fifth tokenizer of a process.
                functions[self.sequence_length] = tf.function(
                    functools.partial(_tokenize_by_reference, weakref.ref(self)),
                    input_signature=[tf.TensorSpec([None], tf.string)],
                    autograph=False,
                )
            return functions[self.sequence_length]

        def _traced_tokenize(self, inputs):
            # keras-hub's tokenize with its splitting replaced by GPT-2's own, for the
            # trace (its merges, cache and lookups are what runs).
            keras_hub_split = byte_pair_tokenizer.split_strings_for_bpe
            byte_pair_tokenizer.split_strings_for_bpe = self._split
            try:
                return super()._tokenize_tf(inputs)
            finally:
                byte_pair_tokenizer.split_strings_for_bpe = keras_hub_split

        @tensor_utils.preprocessing_function
        def _detokenize_tf(self, inputs):
            # keras-hub's joins the tokens' bytes, and its eager path decodes them dropping
            # what is no UTF-8 (a reply cut inside a character): here such bytes become
            # U+FFFD, as Python's `errors="replace"`, `transformers`' decode and our
            # served graphs give.
            import tensorflow as tf

            self._maybe_initialized_tf()
            ids, unbatched, _ = tensor_utils.convert_to_ragged_batch(inputs)
            pieces = self.id_to_token_map.lookup(tf.cast(ids, self.dtype))
            characters = tf.strings.unicode_split(tf.strings.reduce_join(pieces, -1), "UTF-8")
            raw = tf.strings.reduce_join(self.unicode2byte.lookup(characters), axis=-1)
            text = tf.strings.unicode_transcode(
                raw, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD
            )
            return tf.squeeze(text, 0) if unbatched else text

        def _split(self, inputs, unsplittable_tokens=None):
            return pretokenize(inputs, self.unsplittable_tokens, self.individual_digits, self.split)

        def get_config(self):
            config = super().get_config()
            config.pop("unsplittable_tokens", None)
            config.update(
                special_tokens=list(self.unsplittable_tokens or ()),
                individual_digits=self.individual_digits,
                split=self.split,
                **self._chat_config(),
            )
            return config

    return ByteLevelBPETokenizer


SETTINGS_FILE = "byte_level_bpe.json"
FILES = ("vocab.json", "merges.txt", SETTINGS_FILE)
# The constructor arguments `SETTINGS_FILE` keeps (the vocabulary and merges aside).
SETTINGS = (
    "special_tokens",
    "individual_digits",
    "split",
    "start_token",
    "end_token",
    "pad_token",
    "chat_template",
)


def save_files(tokenizer, folder):
    """`tokenizer`'s `vocab.json`, `merges.txt` and its settings (special tokens,
    digits, chat template) in `SETTINGS_FILE`."""
    import json
    import pathlib

    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.json").write_text(
        json.dumps(dict(tokenizer.vocabulary), ensure_ascii=False), encoding="utf-8"
    )
    (folder / "merges.txt").write_text(
        "#version: 0.2\n" + "".join(f"{m}\n" for m in tokenizer.merges), encoding="utf-8"
    )
    config = tokenizer.get_config()
    settings = {key: config[key] for key in SETTINGS}
    (folder / SETTINGS_FILE).write_text(json.dumps(settings, ensure_ascii=False, indent=1))


def load_files(folder, sequence_length=None, lowercase=None):
    """The tokenizer `save_files` wrote (`lowercase` does not apply: byte-level BPE is
    cased); a `ValueError` names a file that is not what it should be."""
    import json
    import pathlib

    from keras_attn.errors import UserInputError

    folder = pathlib.Path(folder)
    try:
        vocabulary = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
        settings = json.loads((folder / SETTINGS_FILE).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserInputError(f"{folder}: a tokenizer file is not JSON ({error})") from None
    merges = [
        line
        for line in (folder / "merges.txt").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#version")
    ]
    if not isinstance(vocabulary, dict) or not isinstance(settings, dict):
        raise UserInputError(f"{folder}: vocab.json and {SETTINGS_FILE} must hold objects")
    return tokenizer_class()(
        vocabulary=vocabulary,
        merges=merges,
        sequence_length=None,
        **{key: value for key, value in settings.items() if key in SETTINGS},
    )
