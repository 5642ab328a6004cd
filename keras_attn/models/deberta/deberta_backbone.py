"""DeBERTa-v3's encoder: disentangled attention over shared relative-position embeddings."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int, check_positive_number
from keras_attn.layers import DisentangledAttention, Dropout
from keras_attn.models.deberta.deberta_layers import (
    DebertaBlock,
    RelativePositionTable,
    initializer,
)
from keras_attn.models.encoder_sizes import BERT_SIZES
from keras_attn.models.functional_model import FunctionalModel
from keras_attn.models.presets import PresetMixin


@keras_attn_export("keras_attn.models.DebertaV3Backbone")
class DebertaV3Backbone(PresetMixin, FunctionalModel):
    """DeBERTa-v3's encoder (He et al., 2021): BERT's post-LN stack with disentangled
    attention (`keras_attn.layers.DisentangledAttention`).

    Token embeddings (v3 adds no absolute positions to the input and has no segment
    embedding; both are options, as DeBERTa v1/v2 had them), LayerNorm, padding
    zeroed, dropout; then `num_layers` blocks that all read one table of `2 *
    position_buckets` relative-position embeddings (with its own LayerNorm) through
    content-to-position and position-to-content terms over log-bucketed distances,
    projected by the content projections (`share_position_projections`). There is
    no pooler: `DebertaV3Classifier` holds DeBERTa's `ContextPooler`.

    Args:
        vocabulary_size: SentencePiece pieces (DeBERTa-v3: 128100).
        num_layers, num_heads, hidden_dim, intermediate_dim: the sizes (v3-base: 12,
            12, 768, 3072).
        max_sequence_length: positions the log buckets reach (`max_relative_positions`;
            DeBERTa: 512); with `position_biased_input`, absolute positions too.
        position_buckets: relative-position buckets (v3: 256; 0: exact distances).
        attention_types: the position terms, of `"c2p"`, `"p2c"` (v3: both).
        share_position_projections: positions projected by the content projections.
        num_segments: segment embeddings (v3: 0, none).
        position_biased_input: add learned absolute positions to the input (v3: no).
        embedding_dim: the embeddings' width if not `hidden_dim` (then projected,
            without a bias).
        dropout: dropout on embeddings, attention probabilities, sub-layer outputs.
        activation: the feed-forward activation (`"gelu"`, erf).
        layer_norm_epsilon: of every LayerNorm (DeBERTa: 1e-7).
        initializer_range: stddev of the truncated-normal initializers (0.02).
        dtype: dtype policy of every layer.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids` (read only with segments) and
            `padding_mask`, each `(batch, length)` int; `padding_mask` is 1 at real
            tokens.

    Returns:
        A dict: `sequence_output` `(batch, length, hidden_dim)`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import DebertaV3Backbone
    >>> model = DebertaV3Backbone.from_size("tiny", vocabulary_size=100)
    >>> x = {"token_ids": np.array([[1, 7, 8, 2, 0]]), "segment_ids": np.zeros((1, 5)),
    ...      "padding_mask": np.array([[1, 1, 1, 1, 0]])}
    >>> tuple(model(x)["sequence_output"].shape)
    (1, 5, 128)
    >>> [tuple(m.shape) for m in model.attention_maps(x)]  # per layer: (batch, heads, q, k)
    [(1, 2, 5, 5), (1, 2, 5, 5)]

    References:
        - [He et al., 2020, DeBERTa](https://arxiv.org/abs/2006.03654)
        - [He et al., 2021, DeBERTaV3](https://arxiv.org/abs/2111.09543)
    """

    SIZES = {
        name: {**size, "intermediate_dim": 4 * size["hidden_dim"], "vocabulary_size": 128100}
        for name, size in BERT_SIZES.items()
    }

    def __init__(
        self,
        vocabulary_size,
        num_layers,
        num_heads,
        hidden_dim,
        intermediate_dim,
        max_sequence_length=512,
        position_buckets=256,
        attention_types=("c2p", "p2c"),
        share_position_projections=True,
        num_segments=0,
        position_biased_input=False,
        embedding_dim=None,
        dropout=0.1,
        activation="gelu",
        layer_norm_epsilon=1e-7,
        initializer_range=0.02,
        dtype=None,
        **kwargs,
    ):
        self.check_sizes(
            hidden_dim,
            num_heads,
            dropout,
            vocabulary_size=vocabulary_size,
            num_layers=num_layers,
            intermediate_dim=intermediate_dim,
            max_sequence_length=max_sequence_length,
        )
        check_positive_int("embedding_dim", embedding_dim, allow_none=True)
        check_positive_number("initializer_range", initializer_range)
        if isinstance(num_segments, bool) or not isinstance(num_segments, int) or num_segments < 0:
            raise ValueError(f"Expected `num_segments` an int >= 0. Received: {num_segments!r}")
        width, init = embedding_dim or hidden_dim, initializer(initializer_range)
        attention = dict(
            num_heads=num_heads,
            key_dim=hidden_dim // num_heads,
            position_buckets=position_buckets,
            max_relative_positions=max_sequence_length,
            attention_types=tuple(attention_types),
            share_position_projections=share_position_projections,
            dropout=dropout,
        )
        DisentangledAttention(**attention)  # a bad setting is named here, at construction

        # === Layers ===
        def embedding(rows, name):
            return keras.layers.Embedding(
                rows, width, embeddings_initializer=init, dtype=dtype, name=name
            )

        self.token_embedding = embedding(vocabulary_size, "token_embedding")
        self.position_embedding = (
            embedding(max_sequence_length, "position_embedding") if position_biased_input else None
        )
        self.segment_embedding = (
            embedding(num_segments, "segment_embedding") if num_segments else None
        )
        self.embedding_projection = None
        if width != hidden_dim:
            self.embedding_projection = keras.layers.Dense(
                hidden_dim, use_bias=False, kernel_initializer=init, dtype=dtype,
                name="embedding_projection",
            )  # fmt: skip
        self.embeddings_layer_norm = keras.layers.LayerNormalization(
            epsilon=layer_norm_epsilon, dtype=dtype, name="embeddings_layer_norm"
        )
        self.embeddings_dropout = Dropout(dropout, dtype=dtype, name="embeddings_dropout")
        self.relative_positions = RelativePositionTable(
            2 * (position_buckets or max_sequence_length),
            hidden_dim,
            epsilon=layer_norm_epsilon,
            stddev=initializer_range,
            dtype=dtype,
            name="relative_position_embedding",
        )
        self.transformer_layers = [
            DebertaBlock(
                attention,
                intermediate_dim,
                dropout,
                activation,
                layer_norm_epsilon,
                initializer_range,
                dtype=dtype,
                name=f"transformer_layer_{i}",
            )
            for i in range(num_layers)
        ]

        # === Functional model ===
        token_ids = keras.Input((None,), dtype="int32", name="token_ids")
        segment_ids = keras.Input((None,), dtype="int32", name="segment_ids")
        padding_mask = keras.Input((None,), dtype="int32", name="padding_mask")
        x = self._embed(token_ids, segment_ids, padding_mask)
        table = self.relative_positions(x)
        for transformer_layer in self.transformer_layers:
            x = transformer_layer(x, table, padding_mask=padding_mask)
        super().__init__(
            inputs={
                "token_ids": token_ids,
                "segment_ids": segment_ids,
                "padding_mask": padding_mask,
            },
            outputs={"sequence_output": x},
            dtype=dtype,
            **kwargs,
        )

        # === Config ===
        self.vocabulary_size = vocabulary_size
        self.num_layers = num_layers
        self.num_heads = num_heads
        self.hidden_dim = hidden_dim
        self.intermediate_dim = intermediate_dim
        self.max_sequence_length = max_sequence_length
        self.position_buckets = position_buckets
        self.attention_types = tuple(attention_types)
        self.share_position_projections = share_position_projections
        self.num_segments = num_segments
        self.position_biased_input = position_biased_input
        self.embedding_dim = embedding_dim
        self.dropout = dropout
        self.activation = keras.activations.serialize(keras.activations.get(activation))
        self.layer_norm_epsilon = layer_norm_epsilon
        self.initializer_range = initializer_range

    def _embed(self, token_ids, segment_ids, padding_mask, training=None):
        """Token (+ position, + segment) embeddings, projection, LayerNorm, padding
        zeroed, dropout."""
        x = self.token_embedding(token_ids)
        if self.position_embedding is not None:  # positions 0 .. length - 1
            x = x + self.position_embedding(ops.cumsum(ops.ones_like(token_ids), axis=1) - 1)
        if self.segment_embedding is not None:
            x = x + self.segment_embedding(segment_ids)
        if self.embedding_projection is not None:
            x = self.embedding_projection(x)
        x = self.embeddings_layer_norm(x) * ops.cast(padding_mask, x.dtype)[..., None]
        return self.embeddings_dropout(x, training=training)

    def attention_maps(self, inputs):
        """Every layer's attention probabilities for `inputs` (inference mode): a list
        of `(batch, heads, length, length)` tensors (queries on axis 2)."""
        padding_mask = ops.convert_to_tensor(inputs["padding_mask"])
        x = self._embed(inputs["token_ids"], inputs["segment_ids"], padding_mask)
        table, maps = self.relative_positions(x), []
        for transformer_layer in self.transformer_layers:
            x, scores = transformer_layer(
                x, table, padding_mask=padding_mask, return_attention_scores=True
            )
            maps.append(scores)
        return maps

    def get_config(self):
        return {
            **self._base_config(),
            "vocabulary_size": self.vocabulary_size,
            "num_layers": self.num_layers,
            "num_heads": self.num_heads,
            "hidden_dim": self.hidden_dim,
            "intermediate_dim": self.intermediate_dim,
            "max_sequence_length": self.max_sequence_length,
            "position_buckets": self.position_buckets,
            "attention_types": list(self.attention_types),
            "share_position_projections": self.share_position_projections,
            "num_segments": self.num_segments,
            "position_biased_input": self.position_biased_input,
            "embedding_dim": self.embedding_dim,
            "dropout": self.dropout,
            "activation": self.activation,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer_range": self.initializer_range,
        }

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """Loads a Hugging Face `deberta-v2` folder (DeBERTa-v2 and -v3 checkpoints:
        `config.json` and `model.safetensors` or `pytorch_model.bin`; a task model's
        `deberta.` names too). A configuration we cannot follow (`conv_kernel_size`,
        attention without relative positions) is a `ValueError` naming the key; unused
        checkpoint variables are listed in a warning.

        Args:
            path: the checkpoint folder.
            **kwargs: constructor arguments to override (`dropout`, `dtype`).

        Returns:
            A `DebertaV3Backbone` holding the checkpoint's weights.
        """
        from keras_attn.models.deberta import deberta_checkpoint

        return deberta_checkpoint.load_backbone(cls, path, **kwargs)

    def save_pretrained(self, path, model_type=None, tokenizer=None):
        """Writes the Hugging Face `deberta-v2` folder `transformers.AutoModel` loads
        (`config.json`, `model.safetensors`; with a `DebertaV3Tokenizer`, its
        `spm.model` and `tokenizer_config.json`).

        Args:
            path: the folder to write (created if needed).
            model_type: `None` or `"deberta-v2"`.
            tokenizer: a `keras_attn.models.deberta.DebertaV3Tokenizer` to write too.

        Returns:
            The folder.

        Example:

        >>> import tempfile
        >>> from keras_attn.models import DebertaV3Backbone
        >>> backbone = DebertaV3Backbone.from_size("tiny", vocabulary_size=100)
        >>> folder = backbone.save_pretrained(tempfile.mkdtemp())
        >>> sorted(p.name for p in folder.iterdir())
        ['config.json', 'model.safetensors']
        >>> DebertaV3Backbone.from_pretrained(folder).position_buckets
        256
        """
        from keras_attn.models.deberta import deberta_checkpoint

        return deberta_checkpoint.save_backbone(self, path, model_type, tokenizer)
