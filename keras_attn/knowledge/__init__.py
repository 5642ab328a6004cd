"""Knowledge graphs for the models that read one (ERNIE, KagNet): WordNet 3.0 read from
its files, entity linking, TransE. Plain Python and `keras.ops`: no TensorFlow."""

from keras_attn.knowledge.linking import EntityLinker, Mention, align_mentions
from keras_attn.knowledge.transe import (
    TransE,
    corrupted_batches,
    filtered_ranks,
    margin_ranking_loss,
)
from keras_attn.knowledge.wordnet import INVERSES, RELATIONS, WordNet, wordnet_folder

__all__ = [
    "INVERSES",
    "RELATIONS",
    "EntityLinker",
    "Mention",
    "TransE",
    "WordNet",
    "align_mentions",
    "corrupted_batches",
    "filtered_ranks",
    "margin_ranking_loss",
    "wordnet_folder",
]
