"""RoBERTa's tokenizer in the graph: GPT-2's byte-level BPE (keras-hub's), packed as
`<s> A </s></s> B </s>` (TensorFlow; imported when first used)."""

import functools
import json
import pathlib
import weakref

import tensorflow as tf

from keras_attn.api_export import keras_attn_export
from keras_attn.data.segment_packing import check_truncate, pack_segments
from keras_attn.errors import UserInputError

SPECIAL_TOKENS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>")
FILES = ("vocab.json", "merges.txt")
SPACE = "\u0120"  # "Ġ", the byte-level alphabet's space
# Each tokenizer's byte-pair step as one `tf.function`, kept outside the `tf.Module` so that
# a SavedModel does not store it as one of the tokenizer's functions.
_COMPILED = weakref.WeakKeyDictionary()


def _merged_by_reference(tokenizer, text):
    return tokenizer()._merged(text)


def _byte_alphabet():
    """GPT-2's byte-level alphabet: the character that stands for each of the 256 bytes."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    shifted = iter(range(256, 512))
    return {b: chr(b if b in printable else next(shifted)) for b in range(256)}


def _read(folder):
    """`(vocabulary, merges)` of a folder's `vocab.json` and `merges.txt`."""
    folder = pathlib.Path(folder)
    for name in FILES:
        if not (folder / name).is_file():
            raise FileNotFoundError(
                f"Expected RoBERTa's vocab.json and merges.txt in {folder}. Missing: {name}"
            )
    try:
        vocabulary = json.loads((folder / FILES[0]).read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise UserInputError(f"{folder / FILES[0]}: not a JSON vocabulary ({error})") from None
    merges = (folder / FILES[1]).read_text(encoding="utf-8").splitlines()
    return vocabulary, merges


@keras_attn_export("keras_attn.models.roberta.RobertaTokenizer", serializable=False)
class RobertaTokenizer(tf.Module):
    """RoBERTa's tokenizer in the graph: byte-level BPE, then `<s> A </s></s> B </s>`.

    The pieces are keras-hub's `RobertaTokenizer` (GPT-2's byte-level BPE in
    TensorFlow ops, piece for piece what `transformers`' `RobertaTokenizer` gives:
    accents, emoji and unknown characters as bytes); one or two segments are trimmed
    as `transformers`' `longest_first` trims them, packed as `transformers` packs
    them and padded with `<pad>`. A `tf.Module`, so a SavedModel that holds it
    carries the vocabulary and merges.

    Args:
        vocabulary: a dict piece -> id, or a `vocab.json` path; it must hold `<s>`,
            `<pad>`, `</s>` and `<mask>`.
        merges: the merge rules (`"Ġ t"`, ...), or a `merges.txt` path.
        sequence_length: the packed length, `<s>` and `</s>`s included.
        name: the module's name.
        truncate: how a pair too long for `sequence_length` is cut: `"longest_first"`
            (`transformers`', the default) or `"round_robin"` (keras-hub's).

    Call arguments:
        text: string tensor `(batch,)`.
        text_pair: optional string tensor `(batch,)`, the second segment.

    Returns:
        A dict of int32 `(batch, sequence_length)`: `token_ids`, `segment_ids` (all
        0: RoBERTa has one segment) and `padding_mask` (1 for real tokens).

    Example:

    >>> from keras_attn.models.roberta import RobertaTokenizer
    >>> vocab = {"<s>": 0, "<pad>": 1, "</s>": 2, "<unk>": 3, "<mask>": 4,
    ...          "a": 5, "Ġ": 6, "b": 7, "Ġb": 8}
    >>> tokenizer = RobertaTokenizer(vocab, ["Ġ b"], sequence_length=8)
    >>> tokenizer(["a b"])["token_ids"].numpy().tolist()
    [[0, 5, 8, 2, 1, 1, 1, 1]]
    >>> tokenizer(["a"], ["b"])["token_ids"].numpy().tolist()
    [[0, 5, 2, 2, 7, 2, 1, 1]]

    References:
        - [Liu et al., 2019, RoBERTa](https://arxiv.org/abs/1907.11692)
        - [Radford et al., 2019, GPT-2](https://openai.com/research/better-language-models)
    """

    pair_special_tokens = (1, 2, 1)  # <s> A </s></s> B </s>

    def __init__(
        self, vocabulary, merges, sequence_length=128, name=None, truncate="longest_first"
    ):
        super().__init__(name=name)
        self.truncate = check_truncate(truncate)
        import keras_hub

        if isinstance(vocabulary, (str, pathlib.Path)):
            vocabulary, _ = _read(pathlib.Path(vocabulary).parent)
        if isinstance(merges, (str, pathlib.Path)):
            merges = pathlib.Path(merges).read_text(encoding="utf-8").splitlines()
        merges = [m for m in merges if m and not m.startswith("#version")]
        missing = [t for t in SPECIAL_TOKENS if t not in vocabulary and t != "<unk>"]
        if missing:
            raise ValueError(
                f"Expected RoBERTa's special tokens {list(SPECIAL_TOKENS)} in the "
                f"vocabulary. Missing: {missing}"
            )
        if not isinstance(sequence_length, int) or sequence_length < 4:
            raise ValueError(
                "Expected `sequence_length` an int >= 4 (<s>, </s></s>, </s> for a pair). "
                f"Received: sequence_length={sequence_length!r}"
            )
        self.sequence_length = sequence_length
        self.merges = merges
        self.piece_ids = {str(k): int(v) for k, v in vocabulary.items()}
        pieces = [""] * (max(self.piece_ids.values()) + 1)
        for piece, i in self.piece_ids.items():
            pieces[i] = piece
        self.vocabulary = pieces  # by id, as `WordPieceTokenizer.vocabulary`
        self.cls_id, self.pad_id, self.sep_id, self.mask_id = (
            self.piece_ids[t] for t in ("<s>", "<pad>", "</s>", "<mask>")
        )
        self.unk_id = self.piece_ids.get("<unk>")
        self.special_token_ids = sorted(
            self.piece_ids[t] for t in SPECIAL_TOKENS if t in self.piece_ids
        )
        self._pieces = keras_hub.tokenizers.RobertaTokenizer(
            vocabulary=dict(self.piece_ids), merges=merges, _allow_python_workflow=False
        )
        # Each piece's length in bytes of text (one per byte-level character; a special
        # token's own characters) and its leading and trailing spaces, for the offsets.
        alphabet = set(_byte_alphabet().values())
        self._byte_complete = alphabet <= set(self.piece_ids)
        lengths, leading, trailing = ([0] * len(pieces) for _ in range(3))
        for i, piece in enumerate(pieces):
            lengths[i] = len(piece.encode("utf-8")) if piece in SPECIAL_TOKENS else len(piece)
            leading[i] = len(piece) - len(piece.lstrip(SPACE))
            trailing[i] = len(piece) - len(piece.rstrip(SPACE))
        self._piece_bytes = tf.constant(lengths, tf.int64)
        self._piece_spaces = tf.constant([leading, trailing], tf.int64)

    @classmethod
    def from_folder(cls, folder, sequence_length=128, truncate="longest_first"):
        """The tokenizer of a folder's `vocab.json` and `merges.txt` (a Hugging Face
        `roberta` folder, a run, a `keras-attn convert` output)."""
        vocabulary, merges = _read(folder)
        return cls(vocabulary, merges, sequence_length=sequence_length, truncate=truncate)

    @property
    def vocabulary_size(self):
        return len(self.vocabulary)

    def tokenize(self, text):
        """Strings `(batch,)` -> pieces, a RaggedTensor `(batch, (pieces))` of int32.

        Words `(batch, (words))` (a RaggedTensor) give `(batch, (words), (pieces))`,
        each word read after a space, as `transformers` reads words
        (`is_split_into_words=True` with `add_prefix_space=True`): tagging's input."""
        if isinstance(text, tf.RaggedTensor):
            return text.with_flat_values(self.tokenize(tf.strings.join([" ", text.flat_values])))
        text = tf.convert_to_tensor(text, tf.string)
        if text.shape.rank == 1:
            return self._compiled_pieces()(text)
        return self._merged(text)  # a scalar, or a batch of batches

    def _merged(self, text):
        pieces = self._pieces(text)
        if isinstance(pieces, list):  # keras-hub's eager results are Python lists
            pieces = tf.ragged.constant(pieces, tf.int32, ragged_rank=1, inner_shape=())
        return tf.cast(pieces, tf.int32)

    def _compiled_pieces(self):
        """keras-hub's merges on a batch of strings as a `tf.function` of this tokenizer:
        traced once, then called, eagerly (a graph run, not the merge loop op by op) and
        inside a trace (a call of the traced function, not the loop traced again for each
        signature of an export)."""
        if self not in _COMPILED:
            # A weak reference: the table's value does not keep its key alive. A partial,
            # not a function: TensorFlow counts retracing per function code, and would
            # warn of it after the fifth tokenizer of a process.
            _COMPILED[self] = tf.function(
                functools.partial(_merged_by_reference, weakref.ref(self)),
                input_signature=[tf.TensorSpec([None], tf.string)],
                autograph=False,
            )
        return _COMPILED[self]

    def tokenize_with_offsets(self, text):
        """Like `tokenize`, plus each piece's UTF-8 byte `(starts, ends)` in `text`.

        Byte-level BPE keeps every byte of the text, so a piece's span is the sum of
        the lengths before it; its spaces are left out and a piece that holds part
        of a character spans the whole character (`transformers`' offsets, in
        bytes), so an answer taken from the spans is text with no space around it.

        Raises:
            ValueError: when the vocabulary lacks some of the 256 byte symbols (the
                text's bytes could then not be counted).
        """
        if not self._byte_complete:
            raise ValueError(
                "Expected a byte-level vocabulary holding all 256 byte symbols for "
                "`tokenize_with_offsets` (span QA). This vocabulary lacks some."
            )
        text = tf.convert_to_tensor(text, tf.string)
        pieces = self.tokenize(text)
        lengths = tf.gather(self._piece_bytes, pieces)
        total = tf.concat([[0], tf.math.cumsum(lengths.flat_values)], axis=0)
        before_row = tf.gather(total, pieces.row_starts())  # bytes of the rows before
        ends = lengths.with_flat_values(total[1:] - tf.gather(before_row, pieces.value_rowids()))
        starts = tf.minimum(ends - lengths + tf.gather(self._piece_spaces[0], pieces), ends)
        ends = tf.maximum(ends - tf.gather(self._piece_spaces[1], pieces), starts)
        # Out to whole characters: a start back to its character's first byte, an end
        # on to the next character's.
        _, characters = tf.strings.unicode_decode_with_offsets(text, "UTF-8")
        size = tf.cast(tf.strings.length(text, unit="BYTE"), tf.int64)[:, None]
        bounds = tf.concat([characters, size], 1).to_tensor(default_value=tf.int64.max)

        def snap(offsets, side, shift):
            index = tf.searchsorted(bounds, offsets.to_tensor(), side=side) + shift
            snapped = tf.gather(bounds, tf.maximum(index, 0), batch_dims=1)
            return tf.RaggedTensor.from_tensor(snapped, lengths=offsets.row_lengths())

        return pieces, snap(starts, "right", -1), snap(ends, "left", 0)

    def pack(self, segments):
        """One or two ragged segments -> `<s> A </s></s> B </s>`, trimmed longest first
        and padded; one segment id (0) for all, as RoBERTa has."""
        return pack_segments(
            segments,
            self.sequence_length,
            self.cls_id,
            self.sep_id,
            self.pad_id,
            trim=self.truncate,
            separators=2,  # the pair's extra </s> opens the second segment
            segment_ids=False,
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
        text = self._pieces.detokenize(tf.ragged.boolean_mask(token_ids, keep))
        return tf.constant(text, tf.string) if isinstance(text, list) else text

    def detokenize(self, token_ids):
        """Token ids `(batch, length)` -> a list of strings (the text, as it was)."""
        return [t.decode("utf-8") for t in self.detokenize_to_tensor(token_ids).numpy().tolist()]

    def save_assets(self, folder):
        """Writes `vocab.json` and `merges.txt` into `folder`."""
        folder = pathlib.Path(folder)
        (folder / FILES[0]).write_text(
            json.dumps(dict(self.piece_ids), ensure_ascii=False), encoding="utf-8"
        )
        (folder / FILES[1]).write_text(
            "#version: 0.2\n" + "".join(f"{m}\n" for m in self.merges), encoding="utf-8"
        )

    def save_pretrained(self, folder, model_max_length=None):
        """`save_assets` plus the `tokenizer_config.json` `transformers.AutoTokenizer`
        reads (`RobertaTokenizer`; `model_max_length`: the model's positions, default
        this tokenizer's `sequence_length`); returns the folder."""
        folder = pathlib.Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        self.save_assets(folder)
        config = {
            "tokenizer_class": "RobertaTokenizer",
            "model_max_length": model_max_length or self.sequence_length,
            "bos_token": "<s>",
            "cls_token": "<s>",
            "eos_token": "</s>",
            "sep_token": "</s>",
            "pad_token": "<pad>",
            "mask_token": "<mask>",
            "add_prefix_space": False,
        }
        if self.unk_id is not None:
            config["unk_token"] = "<unk>"
        (folder / "tokenizer_config.json").write_text(
            json.dumps(config, indent=2) + "\n", encoding="utf-8"
        )
        return folder
