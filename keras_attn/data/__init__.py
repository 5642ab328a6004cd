"""Data: tokenisation, masking, pairing and tf.data pipelines (all in-graph)."""

from keras_attn.data.masked_lm_masker import MaskedLMMasker

__all__ = ["MaskedLMMasker"]
