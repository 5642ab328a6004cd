"""Transformer-XL: a language model reading segments with memory."""

from keras_attn.models.transformer_xl import transformer_xl_family  # noqa: F401  (registers the family)
from keras_attn.models.transformer_xl.transformer_xl import TransformerXL

__all__ = ["TransformerXL"]
