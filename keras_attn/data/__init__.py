"""Data: tokenisation, masking, pairing and tf.data pipelines (all in-graph)."""

from keras_attn.requirements import require_tensorflow

require_tensorflow("keras_attn.data (tf.data pipelines, tensorflow-text tokenizers)")

from keras_attn.data.byte_pair import gpt2_tokenizer
from keras_attn.data.corpora import kjv_documents, kjv_testaments, rotten_tomatoes, tatoeba_zh_en
from keras_attn.data.ernie_pretraining import dea_corruption, ernie_pretraining_example
from keras_attn.data.gpt1_tokenizer import GPT1Tokenizer
from keras_attn.data.graph_linking import GraphLinker, mention_typing_inputs, piece_entities
from keras_attn.data.language_modeling import language_model_dataset, language_model_windows
from keras_attn.data.masked_lm_masker import MaskedLMMasker
from keras_attn.data.parallel_text import ParallelTextData, translation_dataset
from keras_attn.data.pretraining_examples import (
    bert_pretraining_dataset,
    bert_pretraining_example,
    electra_pretraining_example,
    pretraining_tfrecord_dataset,
    write_pretraining_tfrecords,
)
from keras_attn.data.readers import (
    CorpusData,
    MentionTypingData,
    ReadReport,
    SpanQAData,
    TaggingData,
    TextClassificationData,
    read_conll,
    read_corpus,
    read_mention_typing,
    read_squad,
    read_text_classification,
    read_text_pairs,
)
from keras_attn.data.sentence_pairs import SentencePairSampler
from keras_attn.data.sentencepiece_tokenizer import SentencePieceTokenizer
from keras_attn.data.step_batches import fixed_batches, step_batches
from keras_attn.data.task_inputs import multiple_choice_inputs, span_qa_inputs, tagging_inputs
from keras_attn.data.wordpiece_tokenizer import (
    SPECIAL_TOKENS,
    WordPieceTokenizer,
    train_wordpiece_vocabulary,
)

__all__ = [
    "CorpusData",
    "GPT1Tokenizer",
    "GraphLinker",
    "MaskedLMMasker",
    "ParallelTextData",
    "ReadReport",
    "SPECIAL_TOKENS",
    "SentencePairSampler",
    "SentencePieceTokenizer",
    "SpanQAData",
    "MentionTypingData",
    "TaggingData",
    "TextClassificationData",
    "WordPieceTokenizer",
    "bert_pretraining_dataset",
    "bert_pretraining_example",
    "electra_pretraining_example",
    "fixed_batches",
    "gpt2_tokenizer",
    "kjv_documents",
    "kjv_testaments",
    "language_model_dataset",
    "language_model_windows",
    "dea_corruption",
    "ernie_pretraining_example",
    "multiple_choice_inputs",
    "mention_typing_inputs",
    "piece_entities",
    "pretraining_tfrecord_dataset",
    "read_conll",
    "read_corpus",
    "read_mention_typing",
    "read_squad",
    "read_text_classification",
    "read_text_pairs",
    "rotten_tomatoes",
    "span_qa_inputs",
    "step_batches",
    "tagging_inputs",
    "tatoeba_zh_en",
    "train_wordpiece_vocabulary",
    "translation_dataset",
    "write_pretraining_tfrecords",
]
