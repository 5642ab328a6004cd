"""BERT and its relatives."""

from keras_attn.models.bert.bert_backbone import BertBackbone
from keras_attn.models.bert.bert_classifier import BertClassifier
from keras_attn.models.bert.bert_presets import BERT_PRESETS
from keras_attn.models.bert.bert_pretrainer import BertPretrainer

__all__ = ["BERT_PRESETS", "BertBackbone", "BertClassifier", "BertPretrainer"]
