"""DeBERTa-v3's tokenizer in the graph: SentencePiece (tensorflow-text) with the
model's own normaliser, packed `[CLS] A [SEP] B [SEP]` (TensorFlow; imported when first
used)."""

import json
import pathlib

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attn.api_export import keras_attn_export
from keras_attn.data.sentencepiece_tokenizer import WHITESPACE as _WHITESPACE
from keras_attn.data.sentencepiece_tokenizer import SentencePieceTokenizer

FILES = ("spm.model",)
SPECIAL_TOKENS = ("[PAD]", "[CLS]", "[SEP]", "[UNK]", "[MASK]")
# transformers' DebertaV2Tokenizer for a model without a character map: runs of
# whitespace (Unicode's White_Space) and any tab or line break become one space; then
# NFC; then trailing whitespace goes.


@keras_attn_export("keras_attn.models.deberta.DebertaV3Tokenizer", serializable=False)
class DebertaV3Tokenizer(SentencePieceTokenizer):
    """DeBERTa-v3's tokenizer in the graph: SentencePiece, then `[CLS] A [SEP] B [SEP]`.

    What DeBERTa's own code and `transformers`' `DebertaV2Tokenizer` (4.x, and 5.25
    on) do, in TensorFlow ops: the SentencePiece model's unigram pieces
    (tensorflow-text's `SentencepieceTokenizer`) after the model's own normaliser
    (DeBERTa-v3's is NFKC: "ﬁ" becomes "fi", tabs and runs of spaces one space); a
    model without one (no precompiled character map) gets `transformers`' instead:
    whitespace runs, tabs and line breaks become one space, NFC, trailing whitespace
    removed. One or two segments trimmed as `transformers`' `longest_first`, packed
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

    special_tokens = SPECIAL_TOKENS
    model_file = FILES[0]
    own_normalizer = None  # the model's; `normalize` for a model without one
    append_mask = True  # transformers adds [MASK] after the last piece

    def normalize(self, text):
        """`transformers`' normalisation of strings `(batch,)` for a model without a
        normaliser of its own, in the graph."""
        text = tf.strings.regex_replace(text, rf"{_WHITESPACE}{{2,}}|[\n\r\t]", " ")
        text = tf_text.normalize_utf8(text, "NFC")
        return tf.strings.regex_replace(text, rf"{_WHITESPACE}+$", "")

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
