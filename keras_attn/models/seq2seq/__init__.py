"""The encoder-decoder Transformer (Vaswani et al., 2017)."""

from keras_attn.models.seq2seq import seq2seq_family  # noqa: F401  (registers the family)
from keras_attn.models.seq2seq.transformer_seq2seq import TransformerSeq2Seq

__all__ = ["TransformerSeq2Seq"]
