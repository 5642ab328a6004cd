"""Knowledge graphs for the models that read one (ERNIE, KagNet): WordNet 3.0 read from
its files, entity linking, TransE. Plain Python and `keras.ops`: no TensorFlow."""

from keras_attn.knowledge.hypernym_questions import (
    HypernymQuestion,
    hypernym_questions,
    split_by_answer,
)
from keras_attn.knowledge.linking import EntityLinker, Mention, align_mentions
from keras_attn.knowledge.schema_graph import (
    ConceptGraph,
    SchemaGraph,
    schema_arrays,
    schema_graph,
)
from keras_attn.knowledge.transe import (
    TransE,
    corrupted_batches,
    filtered_ranks,
    margin_ranking_loss,
    read_entity_vectors,
)
from keras_attn.knowledge.typing_data import (
    TypingExample,
    linking_coverage,
    single_class_lemmas,
    split_by_lemma,
    typing_examples,
)
from keras_attn.knowledge.wordnet import (
    INVERSES,
    KEPT_DIRECTIONS,
    RELATIONS,
    WordNet,
)

__all__ = [
    "INVERSES",
    "KEPT_DIRECTIONS",
    "RELATIONS",
    "ConceptGraph",
    "EntityLinker",
    "HypernymQuestion",
    "Mention",
    "SchemaGraph",
    "TransE",
    "TypingExample",
    "WordNet",
    "align_mentions",
    "corrupted_batches",
    "filtered_ranks",
    "hypernym_questions",
    "linking_coverage",
    "margin_ranking_loss",
    "read_entity_vectors",
    "schema_arrays",
    "schema_graph",
    "single_class_lemmas",
    "split_by_answer",
    "split_by_lemma",
    "typing_examples",
]
