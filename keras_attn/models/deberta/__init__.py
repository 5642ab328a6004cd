"""DeBERTa-v3 (He et al., 2021): disentangled attention over shared, log-bucketed
relative positions; Hugging Face `deberta-v2` folders both ways, SentencePiece in the
graph."""

from keras_attn.models.deberta import deberta_family  # noqa: F401  (registers the family)
from keras_attn.models.deberta.deberta_backbone import DebertaV3Backbone
from keras_attn.models.deberta.deberta_classifier import (
    DebertaV3Classifier,
    DebertaV3SpanQA,
    DebertaV3TokenClassifier,
)
from keras_attn.models.deberta.deberta_masked_lm import DebertaV3MaskedLM

__all__ = [
    "DebertaV3Backbone",
    "DebertaV3Classifier",
    "DebertaV3MaskedLM",
    "DebertaV3SpanQA",
    "DebertaV3TokenClassifier",
    "DebertaV3Tokenizer",
]


def __getattr__(name):  # the tokenizer needs TensorFlow: imported when first used
    if name == "DebertaV3Tokenizer":
        from keras_attn.models.deberta.deberta_tokenizer import DebertaV3Tokenizer

        return DebertaV3Tokenizer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
