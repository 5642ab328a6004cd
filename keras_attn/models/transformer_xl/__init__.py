"""Transformer-XL: a language model reading segments with memory."""

from keras_attn.models.transformer_xl.transformer_xl import TransformerXL

__all__ = ["TransformerXL"]
