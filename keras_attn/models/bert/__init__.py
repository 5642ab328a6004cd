"""BERT and its relatives."""

from keras_attn.models.bert import bert_family  # noqa: F401  (registers the family)
from keras_attn.models.bert.bert_backbone import BertBackbone
from keras_attn.models.bert.bert_classifier import BertClassifier
from keras_attn.models.bert.bert_multiple_choice import BertMultipleChoice
from keras_attn.models.bert.bert_pretrainer import BertPretrainer
from keras_attn.models.bert.bert_sizes import BERT_SIZES
from keras_attn.models.bert.bert_span_qa import BertSpanQA
from keras_attn.models.bert.bert_token_classifier import BertTokenClassifier
from keras_attn.models.bert.electra_pretrainer import ElectraPretrainer
from keras_attn.models.bert.pretraining_flops import encoder_flops

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
