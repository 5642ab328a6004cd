"""ALBERT's tokenizer in the graph: its SentencePiece model as keras-hub's
`AlbertTokenizer` runs it (TensorFlow; imported when first used)."""

from keras_attn.api_export import keras_attn_export
from keras_attn.data.sentencepiece_tokenizer import SentencePieceTokenizer


@keras_attn_export("keras_attn.models.bert.AlbertTokenizer", serializable=False)
class AlbertTokenizer(SentencePieceTokenizer):
    """ALBERT's tokenizer: SentencePiece with the model's own normaliser, then
    `[CLS] A [SEP] B [SEP]` padded with `<pad>`.

    keras-hub's `AlbertTokenizer` and `AlbertTextClassifierPreprocessor`, in the same
    TensorFlow ops: the ids are theirs. `transformers`' `AlbertTokenizer` also
    lower-cases and strips accents in Python before the model (`do_lower_case`,
    `keep_accents=False`); that is not done here, as keras-hub does not (a Hugging
    Face ALBERT folder is read without a tokenizer for that reason).

    Args:
        model: the SentencePiece model's bytes (`spiece.model`), or its path; it holds
            `<pad>`, `[CLS]`, `[SEP]`, `<unk>` and `[MASK]`.
        sequence_length: the packed length, `[CLS]` and `[SEP]`s included.
        name: the module's name.
        truncate: how a pair too long for `sequence_length` is cut: `"round_robin"`
            (keras-hub's; `None`, the default, means it) or `"longest_first"`
            (`transformers`').

    Call arguments:
        text: string tensor `(batch,)`.
        text_pair: optional string tensor `(batch,)`, the second segment.

    Returns:
        A dict of int32 `(batch, sequence_length)`: `token_ids`, `segment_ids` and
        `padding_mask` (1 for real tokens).

    Example:

    >>> import io, sentencepiece
    >>> from keras_attn.models.bert import AlbertTokenizer
    >>> model = io.BytesIO()
    >>> sentencepiece.SentencePieceTrainer.train(
    ...     sentence_iterator=iter(["the cat sat on the mat"] * 20), model_writer=model,
    ...     vocab_size=16, pad_id=0, unk_id=1, bos_id=2, eos_id=3, pad_piece="<pad>",
    ...     unk_piece="<unk>", bos_piece="[CLS]", eos_piece="[SEP]",
    ...     user_defined_symbols="[MASK]", minloglevel=2)
    >>> tokenizer = AlbertTokenizer(model.getvalue(), sequence_length=32)
    >>> ids = tokenizer(["the cat sat"])["token_ids"]
    >>> int(ids[0, 0]) == tokenizer.cls_id, tokenizer.detokenize(ids)
    (True, ['the cat sat'])

    References:
        - [Lan et al., 2020, ALBERT](https://arxiv.org/abs/1909.11942)
    """

    special_tokens = ("<pad>", "[CLS]", "[SEP]", "<unk>", "[MASK]")
    model_file = "spiece.model"
    own_normalizer = True
    default_truncate = "round_robin"  # keras-hub's packer's
