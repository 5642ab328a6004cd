"""Preprocessors: raw text in, a task model's inputs out, as Keras layers that run in
`tf.data`, as keras-hub's do.

A preprocessor holds one of our tokenizers (WordPiece, RoBERTa's byte-level BPE,
DeBERTa-v3's SentencePiece, GPT-1's) and turns a batch of strings (and labels) into
what its task model takes: `preprocessor(x, y=None, sample_weight=None)` returns `x`
packed, or `(x, y)` / `(x, y, sample_weight)` when they are given, so
`dataset.map(preprocessor)` feeds `fit` directly. Task models built `from_preset` carry
theirs (`model.preprocessor`), and their `fit`, `evaluate` and `predict` then take
strings (`keras_attn.models.pipeline`). Every task kind packs its segments with the one
packer (`keras_attn.data.segment_packing`), through the tokenizer.

Saved with a model (`.keras`) or alone, a preprocessor keeps its settings in its config
and its tokenizer's files (`vocab.txt`, `vocab.json` + `merges.txt`, `spm.model`) as
the layer's assets; its family (`keras_attn.models.registry`) says which files.
"""

from keras_attn.models.lm_preprocessors import (
    CausalLMPreprocessor,
    MaskedLMPreprocessor,
    Seq2SeqPreprocessor,
)
from keras_attn.models.preprocessor_base import Preprocessor
from keras_attn.models.task_preprocessors import (
    MultipleChoicePreprocessor,
    SpanQAPreprocessor,
    TextClassifierPreprocessor,
    TokenClassifierPreprocessor,
)

__all__ = [
    "CausalLMPreprocessor",
    "MaskedLMPreprocessor",
    "MultipleChoicePreprocessor",
    "Preprocessor",
    "Seq2SeqPreprocessor",
    "SpanQAPreprocessor",
    "TextClassifierPreprocessor",
    "TokenClassifierPreprocessor",
]
