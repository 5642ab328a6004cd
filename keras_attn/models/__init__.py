"""Models built from keras_attn layers with the functional API."""

from keras_attn.models import presets, registry
from keras_attn.models.bert import (
    BERT_SIZES,
    BertBackbone,
    BertClassifier,
    BertMultipleChoice,
    BertPretrainer,
    BertSpanQA,
    BertTokenClassifier,
    ElectraPretrainer,
    encoder_flops,
)
from keras_attn.models.distillation import Distiller, student_from_teacher
from keras_attn.models.generation_config import GenerationConfig
from keras_attn.models.gpt import GPTLanguageModel
from keras_attn.models.registry import from_pretrained
from keras_attn.models.seq2seq import TransformerSeq2Seq
from keras_attn.models.transformer_xl import TransformerXL
from keras_attn.models.xlnet import XLNetBackbone, XLNetClassifier, XLNetPretrainer

__all__ = [
    "BERT_SIZES",
    "BertBackbone",
    "BertClassifier",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSpanQA",
    "BertTokenClassifier",
    "Distiller",
    "ElectraPretrainer",
    "encoder_flops",
    "GPTLanguageModel",
    "GenerationConfig",
    "TransformerSeq2Seq",
    "TransformerXL",
    "XLNetBackbone",
    "XLNetClassifier",
    "XLNetPretrainer",
    "from_pretrained",
    "presets",
    "registry",
    "student_from_teacher",
]
