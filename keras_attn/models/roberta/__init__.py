"""RoBERTa (Liu et al., 2019): BERT's encoder with positions after the padding index,
one segment and GPT-2's byte-level BPE; Hugging Face `roberta` folders both ways."""

from keras_attn.models.roberta import roberta_family  # noqa: F401  (registers the family)
from keras_attn.models.roberta.roberta_backbone import RobertaBackbone

__all__ = ["RobertaBackbone", "RobertaTokenizer"]


def __getattr__(name):  # the tokenizer needs TensorFlow: imported when first used
    if name == "RobertaTokenizer":
        from keras_attn.models.roberta.roberta_tokenizer import RobertaTokenizer

        return RobertaTokenizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
