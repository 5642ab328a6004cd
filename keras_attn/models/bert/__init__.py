"""BERT and its relatives. Besides the public names (`__all__`), the package gives the
families that build on BERT (ERNIE, RoBERTa, KagNet, ...) what they share with it: its
initializer, its checkpoint configs and layouts, its sentence-objective check."""

from keras_attn.models.bert import bert_family  # noqa: F401  (registers the family)
from keras_attn.models.bert.bert_backbone import BertBackbone
from keras_attn.models.bert.bert_backbone import bert_kernel_initializer as bert_kernel_initializer
from keras_attn.models.bert.bert_classifier import BertClassifier
from keras_attn.models.bert.bert_multiple_choice import BertMultipleChoice
from keras_attn.models.bert.bert_pretrainer import BertPretrainer
from keras_attn.models.bert.bert_pretrainer import (
    check_sentence_objective as check_sentence_objective,
)
from keras_attn.models.bert.bert_span_qa import BertSpanQA
from keras_attn.models.bert.bert_token_classifier import BertTokenClassifier
from keras_attn.models.bert.checkpoint_configs import bert_config as bert_config
from keras_attn.models.bert.checkpoint_configs import bert_kwargs as bert_kwargs
from keras_attn.models.bert.checkpoint_layouts import LAYOUTS as LAYOUTS
from keras_attn.models.bert.electra_pretrainer import ElectraPretrainer
from keras_attn.models.bert.pretraining_flops import encoder_flops
from keras_attn.models.encoder_sizes import BERT_SIZES

__all__ = [
    "AlbertTokenizer",
    "BERT_SIZES",
    "BertBackbone",
    "BertClassifier",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSpanQA",
    "BertTokenClassifier",
    "ElectraPretrainer",
    "encoder_flops",
]


def __getattr__(name):  # the tokenizer needs TensorFlow: imported when first used
    if name == "AlbertTokenizer":
        from keras_attn.models.bert.albert_tokenizer import AlbertTokenizer

        return AlbertTokenizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
