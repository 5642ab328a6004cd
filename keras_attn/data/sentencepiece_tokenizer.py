"""SentencePiece in the graph (tensorflow-text), packed `[CLS] A [SEP] B [SEP]`: the
tokenizer of every family whose vocabulary is a SentencePiece model (DeBERTa-v3's,
ALBERT's), each a subclass naming its special pieces and its normalisation."""

import hashlib
import pathlib

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attn.api_export import keras_attn_export
from keras_attn.data.segment_packing import check_truncate, pack_segments

# Unicode's White_Space, as a regular expression: the words `tokenize_with_offsets` reads.
WHITESPACE = r"[\t\n\x0b\f\r\x{85}\p{Z}]"


def _pieces_and_model(model, own_normalizer):
    """`(pieces, model, own)`: the model's pieces by id, the model to run, and whether
    it runs its own normaliser (`own_normalizer`; None: when it has one, a precompiled
    character map). Otherwise its normaliser is made the identity and the graph
    normalises first, as `transformers` does for a DeBERTa model without a map."""
    import sentencepiece
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    try:
        proto.ParseFromString(model)
    except Exception as error:  # protobuf's DecodeError and its relatives
        raise ValueError(
            f"Expected a SentencePiece model. Received bytes that are not: {error}"
        ) from None
    if not proto.pieces:
        raise ValueError("Expected a SentencePiece model. Received one with no pieces")
    pieces = [piece.piece for piece in proto.pieces]
    if own_normalizer is None:
        own_normalizer = bool(proto.normalizer_spec.precompiled_charsmap)
    if not own_normalizer:
        proto.normalizer_spec.name = "identity"
        proto.normalizer_spec.precompiled_charsmap = b""
    runnable = proto.SerializeToString()
    try:  # SentencePiece's own checks (a normaliser's map, its sizes), before the graph's
        sentencepiece.SentencePieceProcessor(model_proto=runnable)
    except RuntimeError as error:
        raise ValueError(
            f"Expected a SentencePiece model. Received one SentencePiece cannot load: {error}"
        ) from None
    return pieces, runnable, own_normalizer


class _SharedSentencepieceModel(tf.saved_model.experimental.TrackableResource):
    """SentencePiece's model as a resource that TensorFlow's resource manager holds under
    a name (the model's digest), not the kernel that made it.

    TensorFlow Text's own resource belongs to its kernel, and `tf.random.set_seed`
    (`keras.utils.set_random_seed`) clears the kernel cache: every tokenizer made before
    it then fails with "Resource ... SentencepieceOp ... does not exist" (TensorFlow
    Text's TODO b/318839908). A shared name outlives the kernel; tokenizers of the same
    model share it, of another model do not. A SavedModel recreates it when loaded."""

    def __init__(self, model):
        super().__init__()
        self._model = model
        self._shared_name = f"keras_attn_spm_{hashlib.sha256(model).hexdigest()[:32]}"
        _ = self.resource_handle  # made now, in the eager context

    def _create_resource(self):
        from tensorflow_text.python.ops.sentencepiece_tokenizer import (
            gen_sentencepiece_tokenizer,
        )

        return gen_sentencepiece_tokenizer.sentencepiece_op(
            model=self._model, shared_name=self._shared_name
        )


@keras_attn_export("keras_attn.data.SentencePieceTokenizer", serializable=False)
class SentencePieceTokenizer(tf.Module):
    """A SentencePiece model in the graph, then `[CLS] A [SEP] B [SEP]`.

    The model's pieces (tensorflow-text's `SentencepieceTokenizer`, with the model's
    own normaliser: keras-hub's `SentencePieceTokenizer` does the same), one or two
    segments trimmed to fit, packed with segment ids 0 and 1 and padded. Subclasses
    name their special pieces (`special_tokens`: pad, cls, sep, unk, mask), their file
    (`model_file`) and, where the family's reference normalises outside the model,
    `normalize` (with `own_normalizer` False, or None: only for a model without a
    normaliser of its own). A `tf.Module`: a SavedModel that holds it carries the
    model.

    Args:
        model: the SentencePiece model's bytes, or its path.
        sequence_length: the packed length, `[CLS]` and `[SEP]`s included.
        name: the module's name.
        truncate: how a pair too long for `sequence_length` is cut: `"longest_first"`
            (`transformers`') or `"round_robin"` (keras-hub's); `None`: the class's
            `default_truncate` (here `"longest_first"`).

    Call arguments:
        text: string tensor `(batch,)`.
        text_pair: optional string tensor `(batch,)`, the second segment.

    Returns:
        A dict of int32 `(batch, sequence_length)`: `token_ids`, `segment_ids` and
        `padding_mask` (1 for real tokens).

    Example:

    >>> import io, sentencepiece
    >>> from keras_attn.data import SentencePieceTokenizer
    >>> model = io.BytesIO()
    >>> sentencepiece.SentencePieceTrainer.train(
    ...     sentence_iterator=iter(["the cat sat on the mat"] * 20), model_writer=model,
    ...     vocab_size=16, pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]",
    ...     bos_piece="[CLS]", eos_piece="[SEP]", unk_piece="[UNK]",
    ...     user_defined_symbols="[MASK]", minloglevel=2)
    >>> tokenizer = SentencePieceTokenizer(model.getvalue(), sequence_length=32)
    >>> x = tokenizer(["the cat"], ["sat"])
    >>> tokenizer.detokenize(x["token_ids"] * x["segment_ids"])  # the second segment
    ['sat']

    References:
        - [Kudo and Richardson, 2018, SentencePiece](https://arxiv.org/abs/1808.06226)
    """

    special_tokens = ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")
    model_file = "spm.model"
    # Whether the model's own normaliser runs (True), `normalize` does (False), or the
    # model's when it has one, a precompiled character map, else `normalize` (None).
    own_normalizer = True
    # Whether a model without the mask piece gets it after its last piece
    # (`transformers` does so for DeBERTa-v3); otherwise it must hold one.
    append_mask = False
    pair_special_tokens = (1, 1, 1)  # [CLS] A [SEP] B [SEP]
    default_truncate = "longest_first"  # what `truncate=None` means

    def __init__(self, model, sequence_length=128, name=None, truncate=None):
        super().__init__(name=name)
        self.truncate = check_truncate(self.default_truncate if truncate is None else truncate)
        if isinstance(model, (str, pathlib.Path)):
            model = pathlib.Path(model).read_bytes()
        if not isinstance(model, (bytes, bytearray)):
            raise TypeError(
                f"Expected `model` as bytes or a path. Received: {type(model).__name__}"
            )
        if not isinstance(sequence_length, int) or sequence_length < 3:
            raise ValueError(
                "Expected `sequence_length` an int >= 3. Received: "
                f"sequence_length={sequence_length!r}"
            )
        self.model = bytes(model)
        pieces, runnable, self.model_normalizes = _pieces_and_model(self.model, self.own_normalizer)
        required = self.special_tokens[:4] if self.append_mask else self.special_tokens
        missing = [t for t in required if t not in pieces]
        if missing:
            raise ValueError(
                f"Expected {type(self).__name__}'s special pieces {list(required)} in the "
                f"SentencePiece model. Missing: {missing}"
            )
        if self.special_tokens[4] not in pieces:
            pieces = [*pieces, self.special_tokens[4]]
        self.vocabulary = pieces
        self.sequence_length = sequence_length
        self.pad_id, self.cls_id, self.sep_id, self.unk_id, self.mask_id = (
            pieces.index(t) for t in self.special_tokens
        )
        self.special_token_ids = sorted({self.pad_id, self.cls_id, self.sep_id, self.mask_id})
        self._pieces = tf_text.SentencepieceTokenizer(model=runnable, out_type=tf.int32)
        self._pieces._model_resource = _SharedSentencepieceModel(runnable)

    @classmethod
    def from_folder(cls, folder, sequence_length=128, truncate=None):
        """The tokenizer of a folder's model file (`model_file`)."""
        path = pathlib.Path(folder) / cls.model_file
        if not path.is_file():
            raise FileNotFoundError(f"Expected {cls.__name__}'s {cls.model_file} in {folder}")
        return cls(path.read_bytes(), sequence_length=sequence_length, truncate=truncate)

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    def normalize(self, text):
        """What the graph does to strings `(batch,)` before the model's pieces when the
        model does not normalise them itself (here nothing)."""
        return text

    def _normalized(self, text):
        return text if self.model_normalizes else self.normalize(text)

    def tokenize(self, text):
        """Strings `(batch,)` -> pieces, a RaggedTensor `(batch, (pieces))` of int32.

        Words `(batch, (words))` (a RaggedTensor) give `(batch, (words), (pieces))`,
        each word its own piece sequence (`▁` first), as `transformers` reads words
        (`is_split_into_words=True`): tagging's input."""
        if isinstance(text, tf.RaggedTensor):
            return text.with_flat_values(self.tokenize(text.flat_values))
        return self._pieces.tokenize(self._normalized(tf.convert_to_tensor(text, tf.string)))

    def tokenize_with_offsets(self, text):
        """Like `tokenize`, plus each piece's UTF-8 byte `(starts, ends)` in `text`.

        The text is read word by word (whitespace never joins two pieces), so the
        spans are in the text as given, not in its normalised form; a piece's `▁` is
        left out of its span (a lone `▁` spans nothing), so an answer taken from the
        spans has no space around it. Where normalisation shortens a word, its
        pieces' spans are clamped to the word."""
        text = tf.convert_to_tensor(text, tf.string)
        words, word_starts, word_ends = tf_text.regex_split_with_offsets(text, f"{WHITESPACE}+")
        pieces, starts, ends = self._pieces.tokenize_with_offsets(
            self._normalized(words.flat_values)
        )
        word_starts, word_ends = (
            tf.expand_dims(tf.cast(w.flat_values, tf.int64), 1) for w in (word_starts, word_ends)
        )
        starts = tf.minimum(word_starts + tf.cast(starts, tf.int64), word_ends)
        ends = tf.minimum(word_starts + tf.cast(ends, tf.int64), word_ends)
        return tuple(words.with_flat_values(r).merge_dims(1, 2) for r in (pieces, starts, ends))

    def pack(self, segments):
        """Ragged segments -> `[CLS] A [SEP] B [SEP]`, trimmed as `truncate` says and
        padded, as a dict."""
        return pack_segments(
            segments,
            self.sequence_length,
            self.cls_id,
            self.sep_id,
            self.pad_id,
            trim=self.truncate,
        )

    def __call__(self, text, text_pair=None):
        segments = [self.tokenize(text)]
        if text_pair is not None:
            segments.append(self.tokenize(text_pair))
        return self.pack(segments)

    def detokenize_to_tensor(self, token_ids):
        """Token ids `(batch, length)` -> strings `(batch,)`, special tokens dropped."""
        token_ids = tf.convert_to_tensor(token_ids, tf.int32)
        keep = tf.reduce_all(tf.not_equal(token_ids[..., None], self.special_token_ids), -1)
        return self._pieces.detokenize(tf.ragged.boolean_mask(token_ids, keep))

    def detokenize(self, token_ids):
        """Token ids `(batch, length)` -> a list of strings."""
        return [t.decode("utf-8") for t in self.detokenize_to_tensor(token_ids).numpy().tolist()]

    def save_assets(self, folder):
        """Writes the model as given into `folder`, as `model_file`."""
        (pathlib.Path(folder) / self.model_file).write_bytes(self.model)
