"""ERNIE's aggregator: self-attention over the tokens and over their entities, then the
information fusion that mixes each entity into the token it is aligned with."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int
from keras_attn.layers import masking
from keras_attn.layers.dropout import Dropout
from keras_attn.layers.multi_head_attention import MultiHeadAttention
from keras_attn.layers.transformer_block import TransformerBlock


@keras_attn_export("keras_attn.layers.KnowledgeFusionBlock")
class KnowledgeFusionBlock(TransformerBlock):
    """One layer of ERNIE's knowledgeable encoder (Zhang et al., 2019, §3.3).

    The tokens `w` and the entities `e` first pass their own multi-head self-attention
    (each a Transformer sub-layer: `LayerNorm(x + Dropout(MH-ATT(x)))`), giving `w̃` and
    `ẽ`; then, for a token `j` aligned with an entity `k`,

        h_j = σ(W̃_t w̃_j + W̃_e ẽ_k + b̃),   w_j' = σ(W_t h_j + b_t),   e_k' = σ(W_e h_j + b_e),

    and for a token with no entity the token-only form `h_j = σ(W̃_t w̃_j + b̃)`
    (σ: GELU, as in the paper). With `residual=True` (the default) the outputs are
    those of ERNIE's released code, a Transformer sub-layer around each projection:
    `w_j' = LayerNorm(w̃_j + Dropout(W_t h_j + b_t))`, `e_k' = LayerNorm(ẽ_k + Dropout(
    W_e h_j + b_e))`; the paper's σ outputs keep no residual, and a stack of them
    shrinks its signal layer by layer at BERT's initialisation (measured: LoRA's
    gradients 1e-5 after two such blocks), so `residual=False` is there for the
    equations as printed. Entities are given aligned to the tokens, as ERNIE's
    code holds them: `entities[:, j]` is the entity of the mention whose first word
    piece is token `j`, `entity_mask[:, j]` whether there is one; the entities attend
    only to each other. Entity outputs where there is no entity are zero, and a token
    without an entity does not depend on any entity input (tested).

    Args:
        num_heads: heads of the tokens' self-attention.
        intermediate_dim: width of the fused state `h`.
        entity_num_heads: heads of the entities' self-attention (default `num_heads`).
        dropout: dropout on attention probabilities and sub-layer outputs.
        activation: σ (default `"gelu"`, the exact GELU).
        residual: the released code's outputs (residual and LayerNorm) rather than
            the paper's `σ(W h + b)`.
        layer_norm_epsilon: epsilon of the two attention sub-layers' LayerNorms.
        kernel_initializer, bias_initializer: of every kernel and bias.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        tokens: `(batch, length, token_dim)`.
        entities: `(batch, length, entity_dim)`, aligned to the tokens.
        padding_mask: optional `(batch, length)`, True for real tokens (default: the
            Keras mask of `tokens`).
        entity_mask: optional `(batch, length)`, True where a token has an entity
            (default: the Keras mask of `entities`, else every real token).
        training: whether dropout is active.

    Returns:
        `(tokens', entities')`, shaped as the inputs.

    Example:

    >>> import numpy as np
    >>> from keras_attn.layers import KnowledgeFusionBlock
    >>> block = KnowledgeFusionBlock(num_heads=2, intermediate_dim=32, entity_num_heads=1)
    >>> tokens, entities = np.random.rand(1, 5, 16), np.random.rand(1, 5, 8)
    >>> entity_mask = np.array([[False, True, False, False, True]])
    >>> new_tokens, new_entities = block(tokens, entities, entity_mask=entity_mask)
    >>> tuple(new_tokens.shape), tuple(new_entities.shape)
    ((1, 5, 16), (1, 5, 8))
    >>> import keras
    >>> float(np.abs(keras.ops.convert_to_numpy(new_entities)[0, 0]).max())  # no entity
    0.0

    References:
        - [Zhang et al., 2019, ERNIE](https://arxiv.org/abs/1905.07129)
    """

    layout_roles = {
        "fusion_token_dense": "column",
        "fusion_entity_dense": "column",
        "token_output_dense": "row",
        "entity_output_dense": "row",
    }

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        entity_num_heads=None,
        dropout=0.0,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        residual=True,
        **kwargs,
    ):
        super().__init__(
            num_heads,
            intermediate_dim,
            dropout=dropout,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            **kwargs,
        )
        check_positive_int("entity_num_heads", entity_num_heads, allow_none=True)
        # ERNIE's fusion is its own feed-forward net: the decoders' block options do
        # not apply (refused rather than left unused).
        decoder_options = {
            key: getattr(self, key)
            for key, default in (
                ("normalization", "layer_norm"),
                ("gated_feedforward", False),
                ("post_norms", False),
                ("qk_norm", False),
                ("qkv_bias", None),
            )
            if getattr(self, key) != default
        }
        if decoder_options:
            raise ValueError(
                f"KnowledgeFusionBlock takes none of the decoders' block options. Received: "
                f"{decoder_options}"
            )
        self.entity_num_heads = entity_num_heads or num_heads
        self.residual = bool(residual)

    def build(self, tokens_shape, entities_shape=None):
        token_dim = self._check_hidden_dim(tokens_shape, "tokens")
        if entities_shape is None or len(entities_shape) != 3 or entities_shape[-1] is None:
            raise ValueError(
                "Expected `entities` of shape (batch, length, entity_dim) with a known "
                f"entity_dim. Received: entities.shape={entities_shape}"
            )
        entity_dim = entities_shape[-1]
        if entity_dim % self.entity_num_heads:
            raise ValueError(
                f"`entities`' entity_dim ({entity_dim}) must be divisible by "
                f"`entity_num_heads` ({self.entity_num_heads}). Received: "
                f"entities.shape={tuple(entities_shape)}"
            )
        self.token_attention, self.token_attention_layer_norm, self.token_attention_dropout = (
            self._build_attention("token_attention", tokens_shape, tokens_shape)
        )
        self.entity_attention = MultiHeadAttention(
            num_heads=self.entity_num_heads,
            key_dim=entity_dim // self.entity_num_heads,
            dropout=self.dropout,
            name="entity_attention",
            **self._sublayer_kwargs(),
        )
        self.entity_attention.build(entities_shape, entities_shape)
        self.entity_attention_layer_norm = self._layer_norm(
            "entity_attention_layer_norm", entities_shape
        )
        self.entity_attention_dropout = Dropout(
            self.dropout, name="entity_attention_dropout", dtype=self.dtype_policy
        )

        def dense(name, units, shape, use_bias=True):
            layer = keras.layers.Dense(
                units, use_bias=use_bias, name=name, **self._sublayer_kwargs()
            )
            layer.build(shape)
            return layer

        fused = (*tokens_shape[:-1], self.intermediate_dim)
        self.fusion_token_dense = dense("fusion_token_dense", self.intermediate_dim, tokens_shape)
        self.fusion_entity_dense = dense(
            "fusion_entity_dense", self.intermediate_dim, entities_shape, use_bias=False
        )
        self.token_output_dense = dense("token_output_dense", token_dim, fused)
        self.entity_output_dense = dense("entity_output_dense", entity_dim, fused)
        if self.residual:
            self.token_output_layer_norm = self._layer_norm("token_output_layer_norm", tokens_shape)
            self.entity_output_layer_norm = self._layer_norm(
                "entity_output_layer_norm", entities_shape
            )
            self.output_dropout = Dropout(
                self.dropout, name="output_dropout", dtype=self.dtype_policy
            )
        self.built = True

    def _masks(self, tokens, entities, padding_mask, entity_mask):
        names = ("padding_mask", "attention_mask", "tokens")
        padding_mask = masking.check_masks(tokens, padding_mask, None, tokens.shape[1], names)
        if entity_mask is None:
            entity_mask = masking.keras_mask(entities)
        if entity_mask is None:
            entity_mask = (
                padding_mask
                if padding_mask is not None
                else ops.ones(ops.shape(tokens)[:2], "bool")
            )
        masking.check_padding_mask(entity_mask, tokens, "entity_mask", "tokens")
        entity_mask = ops.cast(entity_mask, "bool")
        if padding_mask is not None:
            entity_mask = ops.logical_and(entity_mask, ops.cast(padding_mask, "bool"))
        return padding_mask, entity_mask

    def call(self, tokens, entities, padding_mask=None, entity_mask=None, training=None):
        padding_mask, entity_mask = self._masks(tokens, entities, padding_mask, entity_mask)
        token_mask = masking.key_padding_to_attention_mask(padding_mask)
        entity_attention_mask = masking.key_padding_to_attention_mask(entity_mask)

        def token_attention(x):
            return self.token_attention(x, x, attention_mask=token_mask, training=training)

        def entity_attention(x):
            return self.entity_attention(
                x, x, attention_mask=entity_attention_mask, training=training
            )

        present = ops.cast(entity_mask, self.compute_dtype)[..., None]
        attended_tokens = self._residual(
            tokens,
            token_attention,
            self.token_attention_layer_norm,
            self.token_attention_dropout,
            training,
        )
        attended_entities = self._residual(
            entities * present,
            entity_attention,
            self.entity_attention_layer_norm,
            self.entity_attention_dropout,
            training,
        )
        fused = self.activation(
            self.fusion_token_dense(attended_tokens)
            + present * self.fusion_entity_dense(attended_entities * present)
        )
        if not self.residual:  # the paper's equations as printed
            new_tokens = self.activation(self.token_output_dense(fused))
            new_entities = self.activation(self.entity_output_dense(fused)) * present
            return new_tokens, new_entities
        drop = self.output_dropout
        new_tokens = self.token_output_layer_norm(
            attended_tokens + drop(self.token_output_dense(fused), training=training)
        )
        new_entities = self.entity_output_layer_norm(
            attended_entities + drop(self.entity_output_dense(fused), training=training)
        )
        return new_tokens, new_entities * present

    def compute_mask(self, tokens, entities, padding_mask=None, entity_mask=None):
        return masking.keras_mask(tokens), masking.keras_mask(entities)

    def compute_output_spec(self, tokens, entities, padding_mask=None, entity_mask=None, **_):
        self._check_hidden_dim(tokens.shape, "tokens")
        return (
            keras.KerasTensor(tokens.shape, dtype=self.compute_dtype),
            keras.KerasTensor(entities.shape, dtype=self.compute_dtype),
        )

    def get_config(self):
        config = super().get_config()
        for name in ("norm_first", "key_dim", "score", "window", "position_bias",
                     "num_key_value_heads", "rotary_max_wavelength"):  # fmt: skip
            config.pop(name, None)
        config.update(entity_num_heads=self.entity_num_heads, residual=self.residual)
        return config
