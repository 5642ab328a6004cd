"""Data: tokenisation, masking, pairing and tf.data pipelines (all in-graph)."""

from keras_attn.data.bert_pretraining import bert_pretraining_dataset
from keras_attn.data.corpora import kjv_documents
from keras_attn.data.masked_lm_masker import MaskedLMMasker
from keras_attn.data.sentence_pairs import SentencePairSampler
from keras_attn.data.wordpiece_tokenizer import (
    SPECIAL_TOKENS,
    WordPieceTokenizer,
    train_wordpiece_vocabulary,
)

__all__ = [
    "MaskedLMMasker",
    "SPECIAL_TOKENS",
    "SentencePairSampler",
    "WordPieceTokenizer",
    "bert_pretraining_dataset",
    "kjv_documents",
    "train_wordpiece_vocabulary",
]
