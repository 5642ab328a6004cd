"""BERT and its relatives."""

from keras_attn.models.bert.bert_backbone import BertBackbone
from keras_attn.models.bert.bert_presets import BERT_PRESETS

__all__ = ["BERT_PRESETS", "BertBackbone"]
