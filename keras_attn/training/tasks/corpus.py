"""Corpora for the pre-training and language-model tasks: documents, a split, a vocabulary."""

import pathlib

import numpy as np
import tensorflow as tf

from keras_attn.cache_dir import default_cache_dir
from keras_attn.data import kjv_documents, read_corpus, train_wordpiece_vocabulary
from keras_attn.data.wordpiece_tokenizer import read_vocabulary
from keras_attn.training.config import ConfigError


def read_documents(corpus):
    """`"kjv"` or a text file (sentences one per line, blank lines between documents)."""
    if corpus == "kjv":
        return kjv_documents()
    if not pathlib.Path(corpus).is_file():
        raise ConfigError(
            "data.corpus", f"'kjv' or an existing text file; {corpus!r} does not exist"
        )
    documents = read_corpus(corpus).documents
    if not documents:
        raise ConfigError(
            "data.corpus", f"sentences in {corpus} (one per line); none could be read"
        )
    return documents


def split_corpus(data, seed, learn_vocabulary=True):
    """`(train documents, held-out documents, vocabulary)` from a `data:` section with
    `corpus`, `held_out_documents`, `vocabulary` and `vocabulary_size`; a learned
    vocabulary comes from the training documents only (learned once, then read from
    `default_cache_dir()`); none (`None`) unless `learn_vocabulary` (a model that brings
    its own tokenizer)."""
    documents = read_documents(data.corpus)
    if data.held_out_documents >= len(documents) - 1:
        raise ConfigError(
            "data.held_out_documents", f"fewer than the {len(documents)} documents of the corpus"
        )
    order = np.random.default_rng(seed).permutation(len(documents))
    held_out = [documents[i] for i in order[: data.held_out_documents]]
    train = [documents[i] for i in order[data.held_out_documents :]]
    if not learn_vocabulary:
        default = type(data).__dataclass_fields__["vocabulary_size"].default
        if data.vocabulary or data.vocabulary_size != default:
            raise ConfigError(
                "data.vocabulary" if data.vocabulary else "data.vocabulary_size",
                "left unset with model.base, which brings its own tokenizer",
            )
        return train, held_out, None
    if data.vocabulary:
        if not pathlib.Path(data.vocabulary).is_file():
            raise ConfigError(
                "data.vocabulary", f"an existing vocab.txt; {data.vocabulary!r} does not exist"
            )
        vocabulary = read_vocabulary(data.vocabulary)
    else:
        sentences = tf.data.Dataset.from_tensor_slices([s for d in train for s in d])
        vocabulary = train_wordpiece_vocabulary(
            sentences, data.vocabulary_size, cache_dir=default_cache_dir()
        )
    return train, held_out, vocabulary
