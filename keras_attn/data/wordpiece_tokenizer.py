"""WordPiece tokenisation and `[CLS] A [SEP] B [SEP]` packing with tensorflow-text."""

import hashlib
import os
import pathlib

import numpy as np
import tensorflow as tf
import tensorflow_text as tf_text

from keras_attn.api_export import keras_attn_export
from keras_attn.data.readers import ReadError
from keras_attn.data.segment_packing import pack_segments

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def read_vocabulary(path):
    """The tokens of a `vocab.txt` (UTF-8, a token per line); a `ReadError` naming the
    file if it is missing or not UTF-8."""
    try:
        return pathlib.Path(path).read_text(encoding="utf-8-sig").splitlines()
    except UnicodeDecodeError as error:
        raise ReadError(
            f"{path}: not UTF-8 (byte {error.start}); a vocabulary is UTF-8 text, a token per line"
        ) from None
    except OSError as error:
        raise ReadError(f"{path}: cannot read the vocabulary: {error.strerror}") from None


def write_vocabulary(vocabulary, path):
    """Writes tokens as a `vocab.txt` (UTF-8, a token per line) that `read_vocabulary`
    and `WordPieceTokenizer` read back unchanged; returns the path."""
    path = pathlib.Path(path)
    path.write_text("\n".join(vocabulary) + "\n", encoding="utf-8")
    return path


def _fast_bert_tokenizer(vocabulary, lower_case_nfd_strip_accents):
    """tensorflow-text's `FastBertTokenizer` (int32 ids, detokenization on) over
    `vocabulary`, its two compiled models handed to it as uint8 tensors.

    Given the vocabulary itself, `FastBertTokenizer` turns its compiled model's bytes
    into a Python list of ints before making a tensor of them: 0.66 s for MiniLM's
    30,522 tokens (a 2.2 MB model), where compiling both models with the builders it
    calls and wrapping their bytes takes 0.065 s. The same models to the byte (tested)."""
    from tensorflow_text.core.pybinds import (
        pywrap_fast_bert_normalizer_model_builder as normalizer_builder,
    )
    from tensorflow_text.core.pybinds import (
        pywrap_fast_wordpiece_tokenizer_model_builder as wordpiece_builder,
    )

    # FastBertTokenizer's defaults: at most 100 bytes a word, "##", "[UNK]", words split
    # by the model itself (no_pretokenization=False); detokenization on.
    wordpiece = wordpiece_builder.build_fast_wordpiece_model(
        vocabulary, 100, "##", "[UNK]", False, True
    )
    normalizer = normalizer_builder.build_fast_bert_normalizer_model(
        bool(lower_case_nfd_strip_accents)
    )
    return tf_text.FastBertTokenizer(
        token_out_type=tf.int32,
        support_detokenization=True,
        fast_wordpiece_model_buffer=tf.constant(np.frombuffer(wordpiece, np.uint8)),
        lower_case_nfd_strip_accents=bool(lower_case_nfd_strip_accents),
        fast_bert_normalizer_model_buffer=tf.constant(np.frombuffer(normalizer, np.uint8)),
    )


@keras_attn_export("keras_attn.data.WordPieceTokenizer", serializable=False)
class WordPieceTokenizer(tf.Module):
    """BERT's tokenizer in the graph: normalise, split, WordPiece, then pack segments.

    Wraps tensorflow-text's `FastBertTokenizer` (lower-casing with NFD accent
    stripping for uncased vocabularies) and packs one or two segments as
    `[CLS] A [SEP] (B [SEP])` with segment ids, trimming round-robin (the longer
    segment loses tokens first, as in Google's `truncate_seq_pair`), then padding to
    `sequence_length`. A `tf.Module`, so a SavedModel that holds it carries the
    vocabulary with it.

    Args:
        vocabulary: a `vocab.txt` path or a list of tokens (one id per line/entry).
        lowercase: lower-case and strip accents (uncased vocabularies). Defaults to
            `True`.
        sequence_length: the packed length, `[CLS]` and `[SEP]`s included.
        strip_accents: strip accents (NFD, then the combining marks dropped);
            `None` (default): as `lowercase` (Google BERT's and `transformers`'). keras-hub's
            `BertTokenizer` lower-cases and keeps accents unless told
            (`strip_accents=False` here reads its presets as it does).

    Call arguments:
        text: string tensor `(batch,)`.
        text_pair: optional string tensor `(batch,)`, the second segment.

    Returns:
        A dict of int32 `(batch, sequence_length)`: `token_ids`, `segment_ids` and
        `padding_mask` (1 for real tokens).

    Example:

    >>> from keras_attn.data import WordPieceTokenizer
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "cat", "##s", "sat"]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=8)
    >>> tokenizer(["The cats sat"])["token_ids"].numpy().tolist()
    [[2, 5, 6, 7, 8, 3, 0, 0]]

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805)
    """

    pair_special_tokens = (1, 1, 1)  # [CLS] A [SEP] B [SEP]

    def __init__(
        self, vocabulary, lowercase=True, sequence_length=128, name=None, strip_accents=None
    ):
        super().__init__(name=name)
        source = ""
        if isinstance(vocabulary, (str, pathlib.Path)):
            source = f" ({vocabulary})"
            vocabulary = read_vocabulary(vocabulary)
        vocabulary = list(vocabulary)
        missing = [token for token in SPECIAL_TOKENS if token not in vocabulary]
        if missing:
            raise (ReadError if source else ValueError)(
                f"Expected the vocabulary{source} to contain {list(SPECIAL_TOKENS)}. Missing: "
                f"{missing}"
            )
        if not isinstance(sequence_length, int) or sequence_length < 3:
            raise ValueError(
                "Expected `sequence_length` to be an int >= 3. Received: "
                f"sequence_length={sequence_length!r}"
            )
        self.vocabulary = vocabulary
        self.lowercase = lowercase
        self.strip_accents = lowercase if strip_accents is None else bool(strip_accents)
        self.sequence_length = sequence_length
        ids = {token: i for i, token in enumerate(vocabulary)}
        self.pad_id, self.unk_id, self.cls_id, self.sep_id, self.mask_id = (
            ids[t] for t in SPECIAL_TOKENS
        )
        self.special_token_ids = sorted(
            i
            for i, token in enumerate(vocabulary)
            if token in SPECIAL_TOKENS or token.startswith("[unused")
        )
        # Both or neither: the kernel's own lower-casing with NFD and accents dropped;
        # one without the other: done on the text first (`_normalized`).
        self._in_kernel = self.lowercase == self.strip_accents
        self._tokenizer = _fast_bert_tokenizer(vocabulary, lowercase and self._in_kernel)

    def _normalized(self, text):
        """`text` lower-cased without stripping accents, or accents stripped without
        lower-casing, where the kernel does not do both (a string tensor or ragged)."""
        if self._in_kernel:
            return text
        if self.lowercase:
            return tf_text.case_fold_utf8(text)
        text = tf_text.normalize_utf8(text, "NFD")
        return tf.strings.regex_replace(text, r"\p{Mn}", "")

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    def tokenize(self, text):
        """Strings `(batch,)` -> word pieces, a RaggedTensor `(batch, (tokens))` of int32.

        A string tensor or RaggedTensor of any rank gives one more ragged dimension:
        words `(batch, (words))` give pieces `(batch, (words), (pieces))`."""
        if not isinstance(text, tf.RaggedTensor):
            text = tf.convert_to_tensor(text, tf.string)
        if not self._in_kernel:
            text = (
                text.with_flat_values(self._normalized(text.flat_values))
                if isinstance(text, tf.RaggedTensor)
                else self._normalized(text)
            )
        return self._tokenizer.tokenize(text)

    def detokenize(self, token_ids):
        """Token ids `(batch, length)` -> a list of strings.

        Special tokens (padding, `[CLS]`, `[SEP]`, `[MASK]`) are dropped, pieces are
        joined into words by tensorflow-text, and the spaces WordPiece leaves around
        punctuation are removed English-style (`"it ' s fine , tom ."` ->
        `"it's fine, tom."`); CJK characters are joined without spaces.
        """
        return [
            text.decode("utf-8") for text in self.detokenize_to_tensor(token_ids).numpy().tolist()
        ]

    def detokenize_to_tensor(self, token_ids):
        """`detokenize` in the graph: token ids `(batch, length)` -> strings `(batch,)`."""
        token_ids = tf.convert_to_tensor(token_ids, tf.int32)
        dropped = [i for i in self.special_token_ids if i != self.unk_id]
        keep = tf.reduce_all(tf.not_equal(token_ids[..., None], dropped), axis=-1)
        token_ids = tf.ragged.boolean_mask(token_ids, keep)
        return join_words(self._tokenizer.detokenize(token_ids))

    def tokenize_with_offsets(self, text):
        """Like `tokenize`, plus each piece's UTF-8 byte `(starts, ends)` in `text`."""
        if not self._in_kernel:
            raise ValueError(
                "Byte offsets need lowercase == strip_accents (the text is normalised in the "
                f"kernel). Received: lowercase={self.lowercase}, "
                f"strip_accents={self.strip_accents}"
            )
        return self._tokenizer.tokenize_with_offsets(tf.convert_to_tensor(text, tf.string))

    def pack(self, segments):
        """Ragged segments -> `[CLS] A [SEP] B [SEP]`, trimmed round robin (Google
        BERT's) and padded, as a dict."""
        return pack_segments(segments, self.sequence_length, self.cls_id, self.sep_id, self.pad_id)

    def __call__(self, text, text_pair=None):
        segments = [self.tokenize(text)]
        if text_pair is not None:
            segments.append(self.tokenize(text_pair))
        return self.pack(segments)


@keras_attn_export("keras_attn.data.train_wordpiece_vocabulary")
def train_wordpiece_vocabulary(
    texts, vocabulary_size, lowercase=True, output_file=None, cache_dir=None
):
    """Trains a WordPiece vocabulary with keras-hub's `compute_word_piece_vocabulary`.

    Special tokens come first in the order `[PAD] [UNK] [CLS] [SEP] [MASK]`. Words
    are counted in batches of sentences (the same counts, far fewer Python steps).
    Learning is deterministic but slow on a large corpus (about 20 s on the KJV on
    two CPU cores, 0.2 s read back), so with `cache_dir` the result is kept in a file named by a
    SHA-256 of the texts and the settings, and read back by every later call with
    the same texts and settings (the training commands use `default_cache_dir()`).

    Args:
        texts: a `tf.data.Dataset` of strings, or a list of plain-text file names.
        vocabulary_size: the largest vocabulary to produce.
        lowercase: lower-case and strip accents first (an uncased vocabulary).
        output_file: optional path to write `vocab.txt`.
        cache_dir: optional folder of learned vocabularies to reuse (created if
            missing); `None` learns every time.

    Returns:
        The vocabulary, a list of tokens.

    Example:

    >>> import tempfile
    >>> import tensorflow as tf
    >>> from keras_attn.data import train_wordpiece_vocabulary
    >>> texts = tf.data.Dataset.from_tensor_slices(["the cat sat", "the cats sat down"])
    >>> vocab = train_wordpiece_vocabulary(texts, vocabulary_size=40)
    >>> vocab[:5], "##s" in vocab
    (['[PAD]', '[UNK]', '[CLS]', '[SEP]', '[MASK]'], True)
    >>> cache = tempfile.mkdtemp()
    >>> train_wordpiece_vocabulary(texts, 40, cache_dir=cache) == vocab  # learned, kept
    True
    >>> train_wordpiece_vocabulary(texts, 40, cache_dir=cache) == vocab  # read back
    True
    """
    from keras_hub.tokenizers import compute_word_piece_vocabulary

    if isinstance(texts, tf.data.Dataset) and texts.element_spec.shape.rank == 0:
        texts = texts.batch(1024)
    cached = None
    if cache_dir is not None:
        cached = pathlib.Path(cache_dir) / f"{_texts_digest(texts, vocabulary_size, lowercase)}.txt"
        if cached.is_file():
            vocabulary = read_vocabulary(cached)
            if output_file is not None:
                write_vocabulary(vocabulary, output_file)
            return vocabulary
    vocabulary = compute_word_piece_vocabulary(
        texts,
        vocabulary_size,
        vocabulary_output_file=output_file,
        lowercase=lowercase,
        strip_accents=lowercase,
        reserved_tokens=list(SPECIAL_TOKENS),
    )
    if cached is not None:  # written whole, then renamed: a racing reader never sees half
        cached.parent.mkdir(parents=True, exist_ok=True)
        partial = cached.with_name(f"{cached.stem}.{os.getpid()}.partial")
        write_vocabulary(vocabulary, partial)
        os.replace(partial, cached)
    return vocabulary


def _texts_digest(texts, vocabulary_size, lowercase):
    """A SHA-256 of the texts (a dataset's strings or the files' bytes), the settings
    and the keras-hub version that learns the vocabulary."""
    import keras_hub

    settings = f"wordpiece {vocabulary_size} {lowercase} {SPECIAL_TOKENS} {keras_hub.__version__}"
    digest = hashlib.sha256(settings.encode() + b"\n")
    if isinstance(texts, tf.data.Dataset):
        for batch in texts.as_numpy_iterator():
            for text in np.asarray(batch).reshape(-1):
                digest.update(len(text).to_bytes(8, "little") + text)
    else:
        for name in texts:
            digest.update(pathlib.Path(name).read_bytes() + b"\0")
    return digest.hexdigest()


_CJK = r"\x{3000}-\x{303f}\x{3400}-\x{4dbf}\x{4e00}-\x{9fff}\x{f900}-\x{faff}\x{ff00}-\x{ffef}"
_WORD = r"[\pL\pN_]"


def join_words(text):
    """Undoes the spaces WordPiece detokenisation puts around punctuation and CJK
    (in the graph: RE2 patterns, `tf.strings.regex_replace`)."""
    for _ in range(2):  # "a b c": the first pass joins a-b, the second b-c
        text = tf.strings.regex_replace(text, rf"([{_CJK}]) ([{_CJK}])", r"\1\2")
    text = tf.strings.regex_replace(text, r" ([.,!?;:%)\]}])", r"\1")
    text = tf.strings.regex_replace(text, r"([(\[{$]) ", r"\1")
    text = tf.strings.regex_replace(text, rf"({_WORD}) ' ({_WORD})", r"\1'\2")
    text = tf.strings.regex_replace(text, rf"({_WORD}) - ({_WORD})", r"\1-\2")
    return tf.strings.regex_replace(text, r'" (.*?) "', r'"\1"')
