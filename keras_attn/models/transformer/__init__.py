"""The encoder-decoder Transformer and GPT."""

from keras_attn.models.transformer.gpt_language_model import GPTLanguageModel
from keras_attn.models.transformer.transformer_seq2seq import TransformerSeq2Seq
from keras_attn.models.transformer.transformer_xl import TransformerXL

__all__ = ["GPTLanguageModel", "TransformerSeq2Seq", "TransformerXL"]
