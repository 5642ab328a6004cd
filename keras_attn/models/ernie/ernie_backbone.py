"""ERNIE's encoder (Zhang et al., 2019): BERT's blocks over the tokens (the T-Encoder),
then knowledge fusion blocks over the tokens and the entities aligned to them (the
K-Encoder)."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_number
from keras_attn.layers import (
    Dropout,
    KnowledgeFusionBlock,
    LearnedPositionEmbedding,
    TransformerEncoderBlock,
)
from keras_attn.models.bert import bert_kernel_initializer
from keras_attn.models.functional_model import FunctionalModel
from keras_attn.models.knowledge_tables import load_graph_vectors
from keras_attn.models.presets import PresetMixin

INPUTS = ("token_ids", "segment_ids", "padding_mask", "entity_ids")


@keras_attn_export("keras_attn.models.ErnieBackbone")
class ErnieBackbone(PresetMixin, FunctionalModel):
    """ERNIE: a text encoder that reads a knowledge graph's entities beside the words.

    The T-Encoder is BERT's (`num_layers` post-LN blocks over token, position and
    segment embeddings); the K-Encoder stacks `num_knowledge_layers`
    `KnowledgeFusionBlock`s over its output and the entity vectors: entity `k` of a
    mention sits at the mention's first word piece (`entity_ids[:, j] = k`, 0 where a
    token has none), its vector a row of `entity_embedding` (TransE's, `set_entity_
    vectors`; frozen by default, as ERNIE keeps its TransE vectors). Entity ids run
    from 1 to `num_entities`; row 0 is the "no entity" row and is never read.
    `from_bert` starts it from a pre-trained BERT, as the paper does.

    Args:
        vocabulary_size: word pieces.
        num_entities: entities (a knowledge graph's nodes).
        num_layers: T-Encoder blocks (the paper's N: 6).
        num_knowledge_layers: K-Encoder blocks (the paper's M: 6).
        num_heads: heads of every token self-attention.
        hidden_dim: token width.
        intermediate_dim: feed-forward width of the T-Encoder and the fused width of
            the K-Encoder.
        entity_dim: entity width (the paper's TransE vectors: 100).
        entity_num_heads: heads of the entities' self-attention (the paper's: 4).
        max_sequence_length: positions.
        num_segments: segment ids.
        dropout: dropout everywhere (embeddings, attention, sub-layers).
        freeze_entities: keep the entity vectors as given (not trained).
        layer_norm_epsilon: epsilon of every LayerNorm.
        initializer_range: standard deviation of the initial kernels.
        dtype: the dtype policy.

    Call arguments:
        inputs: a dict of `(batch, length)` ints: `token_ids`, `segment_ids`,
            `padding_mask` (1 for real tokens) and `entity_ids`.

    Returns:
        A dict: `sequence_output` `(batch, length, hidden_dim)`, `entity_output`
        `(batch, length, entity_dim)` (zero where a token has no entity) and
        `pooled_output` `(batch, hidden_dim)` (the tanh pooler on `[CLS]`).

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import ErnieBackbone
    >>> model = ErnieBackbone.from_size("tiny", vocabulary_size=100, num_entities=20)
    >>> x = {"token_ids": np.array([[2, 7, 8, 3]]), "segment_ids": np.zeros((1, 4)),
    ...      "padding_mask": np.ones((1, 4)), "entity_ids": np.array([[0, 5, 0, 0]])}
    >>> {k: tuple(v.shape) for k, v in sorted(model(x).items())}
    {'entity_output': (1, 4, 32), 'pooled_output': (1, 128), 'sequence_output': (1, 4, 128)}

    References:
        - [Zhang et al., 2019, ERNIE](https://arxiv.org/abs/1905.07129)
    """

    SIZES = {
        "tiny": dict(num_layers=2, num_knowledge_layers=1, num_heads=2, hidden_dim=128,
                     intermediate_dim=512, entity_dim=32, entity_num_heads=2),
        "base": dict(num_layers=6, num_knowledge_layers=6, num_heads=12, hidden_dim=768,
                     intermediate_dim=3072, entity_dim=100, entity_num_heads=4,
                     vocabulary_size=30522),
    }  # fmt: skip

    def __init__(
        self,
        vocabulary_size,
        num_entities,
        num_layers,
        num_knowledge_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        entity_dim=100,
        entity_num_heads=4,
        max_sequence_length=512,
        num_segments=2,
        dropout=0.1,
        freeze_entities=True,
        layer_norm_epsilon=1e-12,
        initializer_range=0.02,
        dtype=None,
        **kwargs,
    ):
        self.check_sizes(
            hidden_dim,
            num_heads,
            dropout,
            vocabulary_size=vocabulary_size,
            num_entities=num_entities,
            num_layers=num_layers,
            num_knowledge_layers=num_knowledge_layers,
            intermediate_dim=intermediate_dim,
            entity_dim=entity_dim,
            entity_num_heads=entity_num_heads,
            max_sequence_length=max_sequence_length,
            num_segments=num_segments,
        )
        check_positive_number("initializer_range", initializer_range)
        if entity_dim % entity_num_heads:
            raise ValueError(
                "Expected `entity_dim` divisible by `entity_num_heads`. Received: "
                f"entity_dim={entity_dim}, entity_num_heads={entity_num_heads}"
            )
        initializer = bert_kernel_initializer(initializer_range)

        # === Layers ===
        def embedding(input_dim, width, name, **extra):
            return keras.layers.Embedding(
                input_dim, width, embeddings_initializer=initializer, dtype=dtype, name=name,
                **extra,
            )  # fmt: skip

        self.token_embedding = embedding(vocabulary_size, hidden_dim, "token_embedding")
        self.segment_embedding = embedding(num_segments, hidden_dim, "segment_embedding")
        self.position_embedding = LearnedPositionEmbedding(
            max_sequence_length, initializer=initializer, dtype=dtype, name="position_embedding"
        )
        self.embeddings_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="embeddings_layer_norm"
        )
        self.embeddings_dropout = Dropout(dropout, dtype=dtype, name="embeddings_dropout")
        self.entity_embedding = embedding(
            num_entities + 1, entity_dim, "entity_embedding", trainable=not freeze_entities
        )
        self.transformer_layers = [
            TransformerEncoderBlock(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                dropout=dropout,
                activation="gelu",
                layer_norm_epsilon=layer_norm_epsilon,
                kernel_initializer=initializer,
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )  # fmt: skip
            for i in range(num_layers)
        ]
        self.knowledge_layers = [
            KnowledgeFusionBlock(
                num_heads=num_heads,
                intermediate_dim=intermediate_dim,
                entity_num_heads=entity_num_heads,
                dropout=dropout,
                layer_norm_epsilon=layer_norm_epsilon,
                kernel_initializer=initializer,
                dtype=dtype,
                name=f"knowledge_layer_{i}",
            )  # fmt: skip
            for i in range(num_knowledge_layers)
        ]
        self.pooled_dense = keras.layers.Dense(
            hidden_dim, activation="tanh", kernel_initializer=initializer, dtype=dtype,
            name="pooled_dense",
        )  # fmt: skip

        # === Functional model ===
        inputs = {name: keras.Input((None,), dtype="int32", name=name) for name in INPUTS}
        tokens = self.token_embedding(inputs["token_ids"])
        x = tokens + self.segment_embedding(inputs["segment_ids"]) + self.position_embedding(tokens)
        x = self.embeddings_dropout(self.embeddings_layer_norm(x))
        padding_mask = inputs["padding_mask"]
        for layer in self.transformer_layers:
            x = layer(x, padding_mask=padding_mask)
        entity_mask = ops.greater(inputs["entity_ids"], 0)
        entities = self.entity_embedding(inputs["entity_ids"])
        for layer in self.knowledge_layers:
            x, entities = layer(x, entities, padding_mask=padding_mask, entity_mask=entity_mask)
        pooled = self.pooled_dense(x[:, 0, :])
        super().__init__(
            inputs=inputs,
            outputs={"sequence_output": x, "entity_output": entities, "pooled_output": pooled},
            dtype=dtype,
            **kwargs,
        )
        # A functional model's `trainable` (from a saved config too) reaches every layer.
        self.entity_embedding.trainable = self.trainable and not freeze_entities

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_entities = num_entities
        self.num_layers = num_layers
        self.num_knowledge_layers = num_knowledge_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.entity_dim = entity_dim
        self.entity_num_heads = entity_num_heads
        self.max_sequence_length = max_sequence_length
        self.num_segments = num_segments
        self.dropout = dropout
        self.freeze_entities = freeze_entities
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range

    def _hidden_state_stacks(self):
        """The tokens' states: the embeddings, each T-Encoder block's, each K-Encoder
        block's (its token output)."""
        return {"hidden_states": (self.transformer_layers + self.knowledge_layers, None)}

    @classmethod
    def from_bert(cls, bert, num_entities, num_layers=None, entity_dim=100,
                  entity_num_heads=4, **kwargs):  # fmt: skip
        """ERNIE on a (pre-trained) BERT, initialised as Zhang et al. initialise it.

        The T-Encoder is BERT's embeddings and first `num_layers` blocks; each fusion
        block of the K-Encoder takes the token half from the BERT block at its depth
        (self-attention, its LayerNorm, the feed-forward's two dense layers as
        `fusion_token_dense` and `token_output_dense`, their LayerNorm), so a sequence
        with no entity gives BERT's own outputs; the entity half starts at random.
        The pooler is BERT's.

        Args:
            bert: a `BertBackbone` of post-LN, unshared, unfactorised GELU blocks.
            num_entities: entities (a knowledge graph's nodes).
            num_layers: T-Encoder blocks (default half of BERT's); the others make
                the K-Encoder.
            entity_dim, entity_num_heads: the entities' width and heads.
            **kwargs: other constructor arguments (`freeze_entities`, `name`, ...).

        Returns:
            An `ErnieBackbone` whose vocabulary, positions, widths and dropout are BERT's.
        """
        from keras_attn.models.bert import BertBackbone

        if not isinstance(bert, BertBackbone):
            raise TypeError(
                f"Expected a BertBackbone. Received: bert of type {type(bert).__name__}"
            )
        refused = {
            "norm_first": (bert.norm_first, False),
            "embedding_dim": (bert.embedding_dim, None),
            "share_layers": (bert.share_layers, "none"),
            "score": (bert.score, "scaled_dot"),
            "activation": (bert.activation, "gelu"),
        }
        for name, (value, expected) in refused.items():
            if value != expected:
                raise ValueError(
                    f"Expected a BERT with {name}={expected!r}, as ERNIE's blocks are. "
                    f"Received: {name}={value!r}"
                )
        num_layers = bert.num_layers // 2 if num_layers is None else num_layers
        if not isinstance(num_layers, int) or not 1 <= num_layers < bert.num_layers:
            raise ValueError(
                f"Expected `num_layers` an int in [1, {bert.num_layers - 1}] (the other BERT "
                f"blocks make the K-Encoder). Received: num_layers={num_layers!r}"
            )
        kwargs.setdefault("dtype", bert.dtype_policy)
        model = cls(
            vocabulary_size=bert.vocabulary_size, num_entities=num_entities,
            num_layers=num_layers, num_knowledge_layers=bert.num_layers - num_layers,
            num_heads=bert.num_heads, hidden_dim=bert.hidden_dim,
            intermediate_dim=bert.intermediate_dim, entity_dim=entity_dim,
            entity_num_heads=entity_num_heads, max_sequence_length=bert.max_sequence_length,
            num_segments=bert.num_segments, dropout=bert.dropout,
            layer_norm_epsilon=bert.layer_norm_epsilon,
            initializer_range=bert.initializer_range, **kwargs,
        )  # fmt: skip
        pairs = [(getattr(model, name), getattr(bert, name)) for name in (
            "token_embedding", "segment_embedding", "position_embedding",
            "embeddings_layer_norm", "pooled_dense",
        )]  # fmt: skip
        pairs += list(zip(model.transformer_layers, bert.transformer_layers, strict=False))
        for fusion, block in zip(
            model.knowledge_layers, bert.transformer_layers[num_layers:], strict=True
        ):
            pairs += [
                (fusion.token_attention, block.self_attention),
                (fusion.token_attention_layer_norm, block.self_attention_layer_norm),
                (fusion.fusion_token_dense, block.feedforward_intermediate_dense),
                (fusion.token_output_dense, block.feedforward_output_dense),
                (fusion.token_output_layer_norm, block.feedforward_layer_norm),
            ]
        for ours, theirs in pairs:
            ours.set_weights(theirs.get_weights())
        return model

    def set_entity_vectors(self, vectors):
        """Loads entity vectors `(num_entities, entity_dim)` (TransE's, in entity-id
        order from 1) into `entity_embedding`; row 0 (no entity) becomes zeros."""
        load_graph_vectors(self.entity_embedding, vectors, "entity")

    def get_config(self):
        return {
            **self._base_config(),
            "vocabulary_size": self.vocabulary_size,
            "num_entities": self.num_entities,
            "num_layers": self.num_layers,
            "num_knowledge_layers": self.num_knowledge_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "entity_dim": self.entity_dim,
            "entity_num_heads": self.entity_num_heads,
            "max_sequence_length": self.max_sequence_length,
            "num_segments": self.num_segments,
            "dropout": self.dropout,
            "freeze_entities": self.freeze_entities,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_range": self.initializer_range,
        }


def unread_by_token_heads(backbone, pooler=True):
    """The layers a head on the tokens' outputs never reads: the last fusion block's
    entity output (nothing follows it) and, with `pooler`, the pooler; a `BertBackbone`
    has the pooler alone. Tasks leave them out of training (no gradient to warn of)."""
    layers = [backbone.pooled_dense] if pooler else []
    if getattr(backbone, "knowledge_layers", None):
        last = backbone.knowledge_layers[-1]
        layers.append(last.entity_output_dense)
        layers.append(getattr(last, "entity_output_layer_norm", None))
    return [layer for layer in layers if layer is not None]
