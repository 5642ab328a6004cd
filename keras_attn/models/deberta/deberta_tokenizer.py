"""DeBERTa-v3's tokenizer in the graph: SentencePiece (tensorflow-text) after the
normalisation `transformers` applies, packed `[CLS] A [SEP] B [SEP]` (TensorFlow;
imported when first used)."""

import hashlib
import json
import pathlib

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attn.api_export import keras_attn_export
from keras_attn.data.segment_packing import check_truncate, pack_segments

FILES = ("spm.model",)
SPECIAL_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")
# transformers' DebertaV2Tokenizer: runs of whitespace (Unicode's White_Space) and any
# tab or line break become one space; then NFC; then trailing whitespace goes.
_WHITESPACE = r"[\t\n\x0b\f\r\x{85}\p{Z}]"


def _pieces_and_plain_model(model):
    """`(pieces, model)`: the model's pieces by id, and the model with its normaliser
    made the identity (the graph normalises first, as `transformers` does)."""
    from sentencepiece import sentencepiece_model_pb2

    proto = sentencepiece_model_pb2.ModelProto()
    proto.ParseFromString(model)
    pieces = [piece.piece for piece in proto.pieces]
    proto.normalizer_spec.name = "identity"
    proto.normalizer_spec.precompiled_charsmap = b""
    return pieces, proto.SerializeToString()


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


@keras_attn_export("keras_attn.models.deberta.DebertaV3Tokenizer", serializable=False)
class DebertaV3Tokenizer(tf.Module):
    """DeBERTa-v3's tokenizer in the graph: SentencePiece, then `[CLS] A [SEP] B [SEP]`.

    What `transformers`' `DebertaV2Tokenizer` does, in TensorFlow ops: whitespace
    runs, tabs and line breaks become one space, NFC, trailing whitespace removed;
    then the SentencePiece model's unigram pieces (tensorflow-text's
    `SentencepieceTokenizer`; the model's own normaliser is set aside, as
    `transformers`' is: characters that only NFKC changes, such as "ﬁ", stay as they
    are); one or two segments trimmed as `transformers`' `longest_first`, packed
    with segment ids 0 and 1, padded with `[PAD]`. DeBERTa-v3's `spm.model` has no
    `[MASK]`: it is the id after the last piece, as `transformers` adds it. A
    `tf.Module`: a SavedModel that holds it carries the model.

    Args:
        model: the `spm.model` bytes, or its path.
        sequence_length: the packed length, `[CLS]` and `[SEP]`s included.
        name: the module's name.
        truncate: how a pair too long for `sequence_length` is cut: `"longest_first"`
            (`transformers`', the default) or `"round_robin"` (keras-hub's).

    Call arguments:
        text: string tensor `(batch,)`.
        text_pair: optional string tensor `(batch,)`, the second segment.

    Returns:
        A dict of int32 `(batch, sequence_length)`: `token_ids`, `segment_ids` and
        `padding_mask` (1 for real tokens).

    Example:

    >>> import io, sentencepiece
    >>> from keras_attn.models.deberta import DebertaV3Tokenizer
    >>> model = io.BytesIO()
    >>> sentencepiece.SentencePieceTrainer.train(
    ...     sentence_iterator=iter(["the cat sat on the mat"] * 20), model_writer=model,
    ...     vocab_size=16, pad_id=0, bos_id=1, eos_id=2, unk_id=3, pad_piece="[PAD]",
    ...     bos_piece="[CLS]", eos_piece="[SEP]", unk_piece="[UNK]", minloglevel=2)
    >>> tokenizer = DebertaV3Tokenizer(model.getvalue(), sequence_length=32)
    >>> ids = tokenizer(["the cat sat"])["token_ids"]
    >>> int(ids[0, 0]), tokenizer.detokenize(ids)  # [CLS] first
    (1, ['the cat sat'])

    References:
        - [He et al., 2021, DeBERTaV3](https://arxiv.org/abs/2111.09543)
        - [Kudo and Richardson, 2018, SentencePiece](https://arxiv.org/abs/1808.06226)
    """

    pair_special_tokens = (1, 1, 1)  # [CLS] A [SEP] B [SEP]

    def __init__(self, model, sequence_length=128, name=None, truncate="longest_first"):
        super().__init__(name=name)
        self.truncate = check_truncate(truncate)
        if isinstance(model, (str, pathlib.Path)):
            model = pathlib.Path(model).read_bytes()
        if not isinstance(sequence_length, int) or sequence_length < 3:
            raise ValueError(
                "Expected `sequence_length` an int >= 3. Received: "
                f"sequence_length={sequence_length!r}"
            )
        self.model = bytes(model)
        pieces, plain = _pieces_and_plain_model(self.model)
        missing = [t for t in SPECIAL_TOKENS[:4] if t not in pieces]
        if missing:
            raise ValueError(
                f"Expected DeBERTa's special pieces {list(SPECIAL_TOKENS[:4])} in the "
                f"SentencePiece model. Missing: {missing}"
            )
        if "[MASK]" not in pieces:
            pieces = [*pieces, "[MASK]"]  # transformers adds it after the last piece
        self.vocabulary = pieces
        self.sequence_length = sequence_length
        self.pad_id, self.cls_id, self.sep_id, self.unk_id, self.mask_id = (
            pieces.index(t) for t in SPECIAL_TOKENS
        )
        self.special_token_ids = sorted({self.pad_id, self.cls_id, self.sep_id, self.mask_id})
        self._pieces = tf_text.SentencepieceTokenizer(model=plain, out_type=tf.int32)
        self._pieces._model_resource = _SharedSentencepieceModel(plain)

    @classmethod
    def from_folder(cls, folder, sequence_length=128, truncate="longest_first"):
        """The tokenizer of a folder's `spm.model` (a Hugging Face `deberta-v2`
        folder, a run, a `keras-attn convert` output)."""
        path = pathlib.Path(folder) / FILES[0]
        if not path.is_file():
            raise FileNotFoundError(f"Expected DeBERTa's spm.model in {folder}")
        return cls(path.read_bytes(), sequence_length=sequence_length, truncate=truncate)

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    def normalize(self, text):
        """`transformers`' normalisation of strings `(batch,)`, in the graph."""
        text = tf.strings.regex_replace(text, rf"{_WHITESPACE}{{2,}}|[\n\r\t]", " ")
        text = tf_text.normalize_utf8(text, "NFC")
        return tf.strings.regex_replace(text, rf"{_WHITESPACE}+$", "")

    def tokenize(self, text):
        """Strings `(batch,)` -> pieces, a RaggedTensor `(batch, (pieces))` of int32.

        Words `(batch, (words))` (a RaggedTensor) give `(batch, (words), (pieces))`,
        each word its own piece sequence (`▁` first), as `transformers` reads words
        (`is_split_into_words=True`): tagging's input."""
        if isinstance(text, tf.RaggedTensor):
            return text.with_flat_values(self.tokenize(text.flat_values))
        return self._pieces.tokenize(self.normalize(tf.convert_to_tensor(text, tf.string)))

    def tokenize_with_offsets(self, text):
        """Like `tokenize`, plus each piece's UTF-8 byte `(starts, ends)` in `text`.

        The text is read word by word (whitespace never joins two pieces), so the
        spans are in the text as given, not in its normalised form; a piece's `▁` is
        left out of its span (a lone `▁` spans nothing), so an answer taken from the
        spans has no space around it. Where NFC shortens a word, its pieces' spans
        are clamped to the word."""
        text = tf.convert_to_tensor(text, tf.string)
        words, word_starts, word_ends = tf_text.regex_split_with_offsets(text, f"{_WHITESPACE}+")
        pieces, starts, ends = self._pieces.tokenize_with_offsets(self.normalize(words.flat_values))
        word_starts, word_ends = (
            tf.expand_dims(tf.cast(w.flat_values, tf.int64), 1) for w in (word_starts, word_ends)
        )
        starts = tf.minimum(word_starts + tf.cast(starts, tf.int64), word_ends)
        ends = tf.minimum(word_starts + tf.cast(ends, tf.int64), word_ends)
        return tuple(words.with_flat_values(r).merge_dims(1, 2) for r in (pieces, starts, ends))

    def pack(self, segments):
        """Ragged segments -> `[CLS] A [SEP] B [SEP]`, trimmed longest first
        (`transformers`'; `truncate="round_robin"`: keras-hub's) and padded, as a dict."""
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
        """Writes `spm.model` (the model as given) into `folder`."""
        (pathlib.Path(folder) / FILES[0]).write_bytes(self.model)

    def save_pretrained(self, folder, model_max_length=None):
        """`save_assets` plus the `tokenizer_config.json` `transformers.AutoTokenizer`
        reads (`DebertaV2Tokenizer`; `model_max_length`: the model's positions, default
        this tokenizer's `sequence_length`); returns the folder."""
        folder = pathlib.Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.save_assets(folder)
        config = {
            "tokenizer_class": "DebertaV2Tokenizer",
            "model_max_length": model_max_length or self.sequence_length,
            "do_lower_case": False,
            "bos_token": "[CLS]",
            "cls_token": "[CLS]",
            "eos_token": "[SEP]",
            "sep_token": "[SEP]",
            "pad_token": "[PAD]",
            "unk_token": "[UNK]",
            "mask_token": "[MASK]",
        }
        (folder / "tokenizer_config.json").write_text(
            json.dumps(config, indent=2) + "\n", encoding="utf-8"
        )
        return folder
