"""KagNet (Lin et al., 2019): a statement's encoding from BERT and its schema graph's
paths, read together, score each choice."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int, check_rate
from keras_attn.layers import Dropout
from keras_attn.models.bert import BertBackbone
from keras_attn.models.choice_folding import FoldChoices
from keras_attn.models.kagnet.path_reasoning import PathReasoning
from keras_attn.models.knowledge_tables import load_graph_vectors
from keras_attn.models.task import Task

TEXT_INPUTS = ("token_ids", "segment_ids", "padding_mask")


@keras_attn_export("keras_attn.models.KagNet")
class KagNet(Task):
    """Multiple choice over a knowledge graph's paths: KagNet's scoring.

    Each choice's statement (question and choice, one text) is encoded by a
    `BertBackbone` (its pooled output `s`); its schema graph
    (`keras_attn.knowledge.schema_arrays`) is read by a GCN over the concepts' vectors
    (TransE's, `set_concept_vectors`, frozen by default), an LSTM over each path's
    `[concept; relation; concept]` hops, attention over each concept pair's paths and
    then over the pairs, both conditioned on `s`; an MLP on `[s; g]` scores the choice
    and the choices' scores are the logits.

    Args:
        backbone: a `BertBackbone` (the statement encoder).
        num_concepts: concepts (the graph's nodes); ids from 1.
        num_relations: relation ids, both directions (`ConceptGraph.num_relations`).
        num_choices: choices per question (>= 2).
        schema_sizes: `(max_nodes, max_pairs, max_paths, max_hops)` of the arrays.
        concept_dim: the concept vectors' width (TransE's).
        relation_dim: the relation vectors' width.
        gcn_layers: GCN layers.
        lstm_units: the path LSTM's width.
        hidden_dim: the scoring MLP's width.
        dropout: dropout before the MLP.
        freeze_concepts: keep the concept vectors as given.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict: `token_ids`, `segment_ids`, `padding_mask`
            `(batch, num_choices, length)`, and `schema_arrays`' `graph_nodes`,
            `graph_adjacency`, `pair_nodes`, `path_nodes`, `path_relations`, each with
            the choice axis after the batch.

    Returns:
        Logits `(batch, num_choices)`, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.knowledge import ConceptGraph, schema_arrays, schema_graph
    >>> from keras_attn.models import BertBackbone, KagNet
    >>> graph = ConceptGraph([("dog", "hypernym", "canine"), ("canine", "hypernym", "animal"),
    ...                       ("cat", "hypernym", "feline")])
    >>> ids = {c: i + 1 for i, c in enumerate(["dog", "canine", "animal", "cat", "feline"])}
    >>> sizes = (8, 1, 4, 3)
    >>> graphs = schema_arrays([schema_graph(graph, ["dog"], [c]) for c in ("animal", "feline")],
    ...                        ids, *sizes)
    >>> x = {k: v[None] for k, v in graphs.items()}  # one question, two choices
    >>> x.update({k: np.ones((1, 2, 6), "int32") for k in ("token_ids", "padding_mask")})
    >>> x["segment_ids"] = np.zeros((1, 2, 6), "int32")
    >>> model = KagNet(BertBackbone.from_size("tiny", vocabulary_size=50), num_concepts=5,
    ...                num_relations=graph.num_relations, num_choices=2, schema_sizes=sizes,
    ...                concept_dim=8)
    >>> tuple(model(x).shape)
    (1, 2)

    References:
        - [Lin et al., 2019, KagNet](https://arxiv.org/abs/1909.02151)
    """

    backbone_cls = BertBackbone

    def __init__(
        self,
        backbone,
        num_concepts,
        num_relations,
        num_choices,
        schema_sizes=(32, 4, 16, 3),
        concept_dim=100,
        relation_dim=32,
        gcn_layers=2,
        lstm_units=64,
        hidden_dim=128,
        dropout=0.1,
        freeze_concepts=True,
        **kwargs,
    ):
        self.check_backbone(backbone)
        self.check_at_least_two("num_choices", num_choices)
        for name, value in (("num_concepts", num_concepts), ("num_relations", num_relations),
                            ("concept_dim", concept_dim), ("relation_dim", relation_dim),
                            ("lstm_units", lstm_units), ("hidden_dim", hidden_dim)):  # fmt: skip
            check_positive_int(name, value)
        check_rate("dropout", dropout)
        if not isinstance(gcn_layers, int) or gcn_layers < 0:
            raise ValueError(f"Expected `gcn_layers` an int >= 0. Received: {gcn_layers!r}")
        schema_sizes = tuple(schema_sizes)
        if len(schema_sizes) != 4 or not all(isinstance(v, int) and v > 0 for v in schema_sizes):
            raise ValueError(
                "Expected `schema_sizes` four positive ints (max_nodes, max_pairs, max_paths, "
                f"max_hops). Received: schema_sizes={schema_sizes!r}"
            )
        nodes, pairs, paths, hops = schema_sizes

        # === Layers ===
        self.backbone = backbone
        self.fold_choices = FoldChoices(num_choices, fold=True, name="fold_choices")
        self.unfold_choices = FoldChoices(
            num_choices, fold=False, dtype="float32", name="unfold_choices"
        )
        self.concept_embedding = keras.layers.Embedding(
            num_concepts + 1, concept_dim, trainable=not freeze_concepts,
            name="concept_embedding",
        )  # fmt: skip
        self.relation_embedding = keras.layers.Embedding(
            num_relations + 1, relation_dim, name="relation_embedding"
        )
        self.path_reasoning = PathReasoning(gcn_layers, lstm_units, name="path_reasoning")
        self.output_dropout = Dropout(dropout, name="output_dropout")
        self.hidden_dense = keras.layers.Dense(hidden_dim, activation="relu", name="hidden_dense")
        self.output_dense = keras.layers.Dense(1, dtype="float32", name="choice_score")

        # === Functional model ===
        shapes = {
            "graph_nodes": ((nodes,), "int32"),
            "graph_adjacency": ((nodes, nodes), "float32"),
            "pair_nodes": ((pairs, 2), "int32"),
            "path_nodes": ((pairs, paths, hops + 1), "int32"),
            "path_relations": ((pairs, paths, hops), "int32"),
        }
        inputs = {
            name: keras.Input((num_choices, None), dtype="int32", name=name) for name in TEXT_INPUTS
        }
        inputs.update({
            name: keras.Input((num_choices, *shape), dtype=dtype, name=name)
            for name, (shape, dtype) in shapes.items()
        })  # fmt: skip
        folded = {name: self.fold_choices(x) for name, x in inputs.items()}
        statement = backbone({name: folded[name] for name in TEXT_INPUTS})["pooled_output"]
        relations = folded["path_relations"]
        graph = self.path_reasoning(
            statement,
            self.concept_embedding(folded["graph_nodes"]),
            ops.cast(folded["graph_adjacency"], statement.dtype),
            folded["pair_nodes"],
            folded["path_nodes"],
            self.relation_embedding(relations),
            ops.greater(relations, 0),
        )
        features = ops.concatenate([statement, ops.cast(graph, statement.dtype)], axis=-1)
        scores = self.output_dense(self.hidden_dense(self.output_dropout(features)))
        super().__init__(inputs=inputs, outputs=self.unfold_choices(scores), **kwargs)
        # A functional model's `trainable` (from a saved config too) reaches every layer.
        self.concept_embedding.trainable = self.trainable and not freeze_concepts

        # === Config ===
        self.num_concepts = num_concepts
        self.num_relations = num_relations
        self.num_choices = num_choices
        self.schema_sizes = schema_sizes
        self.concept_dim = concept_dim
        self.relation_dim = relation_dim
        self.gcn_layers = gcn_layers
        self.lstm_units = lstm_units
        self.hidden_dim = hidden_dim
        self.dropout = dropout
        self.freeze_concepts = freeze_concepts

    def set_concept_vectors(self, vectors):
        """Loads concept vectors `(num_concepts, concept_dim)` (TransE's, in concept-id
        order from 1); row 0 (padding) becomes zeros."""
        load_graph_vectors(self.concept_embedding, vectors, "concept")

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Defaults: sparse cross-entropy over the choices, accuracy."""
        self.compile_classification(optimizer, loss, metrics, **kwargs)

    def label_classes(self):
        """Labels are the right choice's index: `num_choices` classes."""
        return self.num_choices

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_concepts": self.num_concepts, "num_relations": self.num_relations,
            "num_choices": self.num_choices, "schema_sizes": list(self.schema_sizes),
            "concept_dim": self.concept_dim, "relation_dim": self.relation_dim,
            "gcn_layers": self.gcn_layers, "lstm_units": self.lstm_units,
            "hidden_dim": self.hidden_dim, "dropout": self.dropout,
            "freeze_concepts": self.freeze_concepts,
        })  # fmt: skip
        return config
