"""Fine-tuning and training inputs from the files users have.

CSV/TSV/JSONL (`read_text_classification`; typed mentions: `read_mention_typing`),
CoNLL (`read_conll`), SQuAD JSON (`read_squad`), plain-text corpora (`read_corpus`) and
tab-separated sentence pairs (`read_text_pairs`). Every reader returns the good
examples and a `ReadReport` of the bad rows (file and line, the reason) and logs a
one-line summary with the counts: a bad row never crashes the run and is never dropped
without being counted. A file that cannot be read at all raises `ReadError` (a
`ValueError`) naming it.
"""

from keras_attn.data.readers.conll import TaggingData, read_conll
from keras_attn.data.readers.labelled_texts import (
    TextClassificationData,
    read_text_classification,
)
from keras_attn.data.readers.plain_text import CorpusData, read_corpus, read_text_pairs
from keras_attn.data.readers.report import Problem, ReadError, ReadReport
from keras_attn.data.readers.squad import SpanQAData, read_squad
from keras_attn.data.readers.typed_mentions import MentionTypingData, read_mention_typing

__all__ = [
    "CorpusData",
    "MentionTypingData",
    "Problem",
    "ReadError",
    "ReadReport",
    "SpanQAData",
    "TaggingData",
    "TextClassificationData",
    "read_conll",
    "read_corpus",
    "read_mention_typing",
    "read_squad",
    "read_text_classification",
    "read_text_pairs",
]
