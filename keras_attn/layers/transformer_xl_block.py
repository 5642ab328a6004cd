"""The Transformer-XL / XLNet layer: relative self-attention with memory, then a feed-forward."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int
from keras_attn.layers import masking
from keras_attn.layers.dropout import Dropout
from keras_attn.layers.relative_attention import RelativeMultiHeadAttention
from keras_attn.layers.transformer_block import ResidualBlock


@keras_attn_export("keras_attn.layers.TransformerXLBlock")
class TransformerXLBlock(ResidualBlock):
    """One Transformer-XL layer (Dai et al., 2019), with XLNet's two-stream option.

    `h = LayerNorm(x + Dropout(RelativeAttention([memory; x])))`, then
    `LayerNorm(h + Dropout(W_2 Dropout(act(W_1 h))))` (post-LN, as both papers;
    `norm_first=True` moves each LayerNorm inside its residual branch). The memory
    is this layer's input over earlier segments: its keys and values come first,
    with the gradient stopped, and query `i` sits at position `memory_len + i`.

    XLNet's two-stream attention (Yang et al., 2019, 2.3) is a second call path: the
    query stream `g` attends to the content stream `[memory; x]` (never to itself)
    with the same weights, then goes through the same feed-forward net. With a
    `target_mapping` the query stream holds only the predicted positions: row `p`
    of `g` is placed at the position `target_mapping[p]` selects, which is exact
    because the attention projections have no bias.

    Args:
        num_heads: attention heads.
        intermediate_dim: width of the feed-forward hidden layer.
        dropout: dropout on the attention probabilities, the sub-layer outputs and
            the feed-forward hidden layer, in [0, 1).
        activation: feed-forward activation (Transformer-XL: `"relu"`; XLNet:
            `"gelu"`).
        layer_norm_epsilon: epsilon of the two LayerNorms.
        norm_first: pre-LN instead of the papers' post-LN.
        key_dim: size of each head (`None`: `hidden_dim // num_heads`).
        segment_attention: XLNet's relative segment term (call argument
            `segment_matrix`).
        clamp_length: clamp the relative distances of the encodings (XLNet's
            `clamp_len`; `None`: no clamp).
        kernel_initializer: initializer of all kernels.
        bias_initializer: initializer of all biases (and of the attention's `u`,
            `v`, `s` and segment encodings).
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(batch, length, hidden_dim)`, the content stream.
        memory: optional `(batch, memory_len, hidden_dim)`, this layer's inputs over
            the earlier positions.
        padding_mask: optional `(batch, length)`, True for real tokens (default: the
            Keras mask of `inputs`).
        attention_mask: optional boolean `(batch, length, memory_len + length)`,
            True where allowed, for the content stream.
        segment_matrix: with `segment_attention`, boolean `(batch, length,
            memory_len + length)`, True where query and key are in different segments.
        use_causal_mask: position `memory_len + i` attends to keys `<= memory_len + i`.
        query_stream: optional `(batch, num_predict, hidden_dim)` query stream `g`
            (`(batch, length, hidden_dim)` without `target_mapping`).
        query_attention_mask: boolean `(batch, length, memory_len + length)` for the
            query stream (required with `query_stream`: it must hide each target).
        target_mapping: optional `(batch, num_predict, length)`, one-hot rows: the
            position each row of `query_stream` predicts.
        training: whether dropout is active.

    Returns:
        `(batch, length, hidden_dim)`; with `query_stream`, a tuple of it and the
        query stream's output, shaped like `query_stream`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.layers import TransformerXLBlock
    >>> block = TransformerXLBlock(num_heads=2, intermediate_dim=64)
    >>> segment = np.random.rand(2, 5, 32).astype("float32")
    >>> memory = np.random.rand(2, 4, 32).astype("float32")  # the previous segment's inputs
    >>> tuple(block(segment, memory=memory, use_causal_mask=True).shape)
    (2, 5, 32)

    References:
        - [Dai et al., 2019](https://arxiv.org/abs/1901.02860)
        - [Yang et al., 2019](https://arxiv.org/abs/1906.08237), section 2.3
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        dropout=0.0,
        activation="relu",
        layer_norm_epsilon=1e-5,
        norm_first=False,
        key_dim=None,
        segment_attention=False,
        clamp_length=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(
            num_heads,
            intermediate_dim,
            dropout=dropout,
            activation=activation,
            layer_norm_epsilon=layer_norm_epsilon,
            norm_first=norm_first,
            key_dim=key_dim,
            kernel_initializer=kernel_initializer,
            bias_initializer=bias_initializer,
            **kwargs,
        )
        check_positive_int("clamp_length", clamp_length, allow_none=True)
        self.segment_attention = bool(segment_attention)
        self.clamp_length = clamp_length

    def build(self, inputs_shape):
        hidden_dim = self._check_hidden_dim(inputs_shape, "inputs")
        self.self_attention = RelativeMultiHeadAttention(
            self.num_heads,
            self.key_dim or hidden_dim // self.num_heads,
            dropout=self.dropout,
            segment_attention=self.segment_attention,
            clamp_length=self.clamp_length,
            name="self_attention",
            **self._sublayer_kwargs(),
        )
        self.self_attention.build(inputs_shape)
        self.self_attention_layer_norm = self._layer_norm("self_attention_layer_norm", inputs_shape)
        self.self_attention_dropout = Dropout(
            self.dropout, name="self_attention_dropout", dtype=self.dtype_policy
        )
        self._build_feedforward(inputs_shape, inner_dropout=True)
        self.built = True

    def _feedforward_residual(self, x, training):
        return self._residual(
            x,
            lambda y: self._feedforward(y, training=training),
            self.feedforward_layer_norm,
            self.feedforward_dropout,
            training,
        )

    def call(
        self,
        inputs,
        memory=None,
        padding_mask=None,
        attention_mask=None,
        segment_matrix=None,
        use_causal_mask=False,
        query_stream=None,
        query_attention_mask=None,
        target_mapping=None,
        training=None,
    ):
        if padding_mask is None:
            padding_mask = masking.keras_mask(inputs)
        content = inputs
        if self.norm_first:
            content = self.self_attention_layer_norm(inputs)
            memory = None if memory is None else self.self_attention_layer_norm(memory)
        shared = dict(
            value=content,
            memory=memory,
            value_mask=padding_mask,
            segment_matrix=segment_matrix,
            use_causal_mask=use_causal_mask,
            training=training,
        )
        h = self._residual(
            inputs,
            lambda y: self.self_attention(y, attention_mask=attention_mask, **shared),
            self.self_attention_layer_norm,
            self.self_attention_dropout,
            training,
        )
        h = self._feedforward_residual(h, training)
        if query_stream is None:
            if target_mapping is not None or query_attention_mask is not None:
                raise ValueError(
                    "`target_mapping` and `query_attention_mask` need a `query_stream`. "
                    "Received: query_stream=None"
                )
            return h
        if query_attention_mask is None:
            raise ValueError(
                "A `query_stream` needs its `query_attention_mask` (each target hidden from "
                "its own query). Received: query_attention_mask=None"
            )

        def place(g):  # (batch, num_predict, dim) -> (batch, length, dim)
            if target_mapping is None:
                return g
            return ops.einsum("bpd,bpl->bld", g, ops.cast(target_mapping, g.dtype))

        def gather_back(attended):  # (batch, length, dim) -> (batch, num_predict, dim)
            if target_mapping is None:
                return attended
            return ops.einsum("bld,bpl->bpd", attended, ops.cast(target_mapping, attended.dtype))

        g = self._residual(
            query_stream,
            lambda y: gather_back(
                self.self_attention(place(y), attention_mask=query_attention_mask, **shared)
            ),
            self.self_attention_layer_norm,
            self.self_attention_dropout,
            training,
        )
        return h, self._feedforward_residual(g, training)

    def compute_output_shape(self, inputs_shape, **kwargs):
        return tuple(inputs_shape)

    def compute_output_spec(self, inputs, query_stream=None, **kwargs):
        h = keras.KerasTensor(inputs.shape, self.compute_dtype)
        if query_stream is None:
            return h
        return h, keras.KerasTensor(query_stream.shape, self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"segment_attention": self.segment_attention, "clamp_length": self.clamp_length}
        )
        return config
