"""The Transformer encoder layer: self-attention, then a feed-forward network."""

import functools

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.layers import masking
from keras_attn.layers.dropout import Dropout
from keras_attn.layers.transformer_block import TransformerBlock

_NAMES = ("padding_mask", "attention_mask", "inputs")  # in the masks' errors


class _SharedSublayers:
    """The blocks whose sub-layers a block uses: held outside Keras's tracking, so a
    block does not adopt the whole source block (only the sub-layers it takes)."""

    def __init__(self, attention, feedforward):
        self.attention = attention
        self.feedforward = feedforward


@keras_attn_export("keras_attn.layers.TransformerEncoderBlock")
class TransformerEncoderBlock(TransformerBlock):
    """One Transformer encoder layer, post-LN (the papers) or pre-LN.

    "Each layer has two sub-layers. The first is a multi-head self-attention
    mechanism, and the second is a simple, position-wise fully connected
    feed-forward network. We employ a residual connection around each of the two
    sub-layers, followed by layer normalization" (Vaswani et al., 2017). With
    `norm_first=True` the normalisation moves inside the residual branch (pre-LN,
    Xiong et al., 2020); a stack of pre-LN blocks then needs a final LayerNorm.
    Equivalent to `torch.nn.TransformerEncoderLayer(batch_first=True)`.

    Args:
        num_heads: number of attention heads.
        intermediate_dim: width of the feed-forward hidden layer (`d_ff`).
        dropout: dropout on attention probabilities and on each sub-layer output.
        activation: activation of the feed-forward hidden layer (`"relu"`;
            `"gelu"` is the exact erf GELU of BERT).
        layer_norm_epsilon: epsilon of the layer normalisations.
        norm_first: `False` for post-LN, `True` for pre-LN.
        score: scoring function of the attention (name or `AttentionScore`; an
            instance is a template, copied into the block).
        key_dim: size of each head (`None`: `hidden_dim // num_heads`).
        kernel_initializer: initializer of all kernels.
        bias_initializer: initializer of all biases.
        window: sliding-window self-attention: position `i` attends to `|i - j| <=
            window` (with the causal mask, `i - window <= j <= i`), computed
            blockwise in linear time and memory (`MultiHeadAttention`'s `window`);
            `None` (default): full attention.
        position_bias: a relative-position bias for the self-attention
            (`MultiHeadAttention`'s `position_bias`: `"t5"`, `"alibi"`, a
            `PositionBias` instance or `None`, the default); each block has its own
            (T5 shares its first layer's table across the stack).
        num_key_value_heads: key/value heads of every attention sub-layer, shared
            by groups of query heads (grouped-query attention; 1: multi-query;
            `MultiHeadAttention`'s `num_key_value_heads`); `None` (default): `num_heads`.
        rotary_max_wavelength: rotary position embedding of the self-attention's
            queries and keys (`MultiHeadAttention`'s; Llama: 10000); `None`: none.
        rotary_scaling_factor: RoPE's linear position scaling (positions divided by
            it; `MultiHeadAttention`'s). Defaults to `1.0`.
        normalization: `"layer_norm"` (default) or `"rms_norm"` (`keras.layers.
            RMSNormalization`: no centring, no bias, as Llama and Gemma).
        gated_feedforward: a gated feed-forward net, `W_out(activation(x W_gate) *
            (x W_in))` (Shazeer, 2020; `"silu"`: Llama's SwiGLU, tanh GELU: Gemma's
            GeGLU), with a third projection `feedforward_gate_dense`. Defaults to
            `False`.
        use_bias: whether the attention's and the feed-forward net's projections
            have biases (Llama, Gemma: `False`). Defaults to `True`.
        qkv_bias: whether the attention's query, key and value projections have
            biases, its output projection following `use_bias` (Qwen 2: `True` with
            `use_bias=False`). Defaults to `None`: `use_bias`.
        qk_norm: RMS-normalise each query and key head before RoPE
            (`MultiHeadAttention`'s `qk_norm_epsilon`, this block's epsilon). Defaults
            to `False`.
        post_norms: with `norm_first`, also normalise each sub-layer's output before
            the residual sum (Gemma's). Defaults to `False`.
        shared_attention: another `TransformerEncoderBlock`, already built, whose
            self-attention and its LayerNorm this block uses, the same variables
            (ALBERT's shared-attention variant); `None` (default): its own.
        shared_feedforward: likewise for the feed-forward network and its LayerNorm
            (ALBERT's shared-FFN). Neither is part of `get_config`: the model that
            shares rebuilds the sharing.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        inputs: `(batch, length, hidden_dim)`.
        padding_mask: optional `(batch, length)`, True for real tokens; defaults
            to the Keras mask of `inputs`.
        attention_mask: optional boolean `(batch, length, length)`.
        training: whether dropout is active.
        return_attention_scores: also return the attention probabilities.

    Returns:
        `(batch, length, hidden_dim)`; with `return_attention_scores`, a tuple
        `(outputs, scores)`, scores `(batch, heads, length, length)`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.layers import TransformerEncoderBlock
    >>> block = TransformerEncoderBlock(num_heads=4, intermediate_dim=128)
    >>> x = np.random.rand(2, 10, 64).astype("float32")
    >>> padding_mask = np.arange(10)[None, :] < np.array([[10], [6]])
    >>> tuple(block(x, padding_mask=padding_mask).shape)
    (2, 10, 64)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
        - [Xiong et al., 2020](https://arxiv.org/abs/2002.04745)
    """

    def __init__(self, *args, shared_attention=None, shared_feedforward=None, **kwargs):
        super().__init__(*args, **kwargs)
        for name, source in (
            ("shared_attention", shared_attention),
            ("shared_feedforward", shared_feedforward),
        ):
            if source is not None and not isinstance(source, TransformerEncoderBlock):
                raise TypeError(
                    f"Expected `{name}` to be a TransformerEncoderBlock or None. "
                    f"Received: {name} of type {type(source).__name__}"
                )
        self._shared = _SharedSublayers(shared_attention, shared_feedforward)

    def build(self, inputs_shape):
        self._check_hidden_dim(inputs_shape, "inputs")
        self._check_shared_built(inputs_shape)
        if self._shared.attention is None:
            (
                self.self_attention,
                self.self_attention_layer_norm,
                self.self_attention_dropout,
            ) = self._build_attention("self_attention", inputs_shape, inputs_shape)
        else:
            self.self_attention = self._shared.attention.self_attention
            self.self_attention_layer_norm = self._shared.attention.self_attention_layer_norm
            self.self_attention_post_norm = self._shared.attention.self_attention_post_norm
            self.self_attention_dropout = Dropout(
                self.dropout, name="self_attention_dropout", dtype=self.dtype_policy
            )
        if self._shared.feedforward is None:
            self._build_feedforward(inputs_shape)
        else:
            source = self._shared.feedforward
            self.feedforward_intermediate_dense = source.feedforward_intermediate_dense
            self.feedforward_gate_dense = source.feedforward_gate_dense
            self.feedforward_intermediate_dropout = None
            self.feedforward_output_dense = source.feedforward_output_dense
            self.feedforward_layer_norm = source.feedforward_layer_norm
            self.feedforward_post_norm = source.feedforward_post_norm
            self.feedforward_dropout = Dropout(
                self.dropout, name="feedforward_dropout", dtype=self.dtype_policy
            )
        self.built = True

    def _check_shared_built(self, inputs_shape):
        for name, source in (
            ("shared_attention", self._shared.attention),
            ("shared_feedforward", self._shared.feedforward),
        ):
            if source is None:
                continue
            if not source.built:
                raise ValueError(
                    f"Expected `{name}` to be built (called once) before the block that "
                    f"shares it. Received: {name}={source.name!r}, not built"
                )
            hidden_dim = source.feedforward_output_dense.units
            if hidden_dim != inputs_shape[-1]:
                raise ValueError(
                    f"Expected inputs of the width of `{name}` ({hidden_dim}). "
                    f"Received: inputs.shape={tuple(inputs_shape)}"
                )

    def call(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        self._check_hidden_dim(inputs.shape, "inputs")
        padding, mask = masking.padding_and_attention_mask(
            inputs, padding_mask, attention_mask, inputs.shape[1], _NAMES
        )
        if not (return_attention_scores or training or self.self_attention.window is not None):
            real_rows = self.compute_plan.real_rows(padding)
            if real_rows is not None:
                return self._call_on_real_rows(inputs, real_rows, mask)

        scores = []

        def self_attention(x):
            if not return_attention_scores:
                return self.self_attention(x, x, attention_mask=mask, training=training)
            output, probabilities = self.self_attention(
                x, x, attention_mask=mask, training=training, return_attention_scores=True
            )
            scores.append(probabilities)  # (batch, heads, length, length)
            return output

        outputs = self._sublayers(inputs, self_attention, training)
        return (outputs, scores[0]) if return_attention_scores else outputs

    def _sublayers(self, x, self_attention, training, rows=None):
        """The self-attention sub-layer (`self_attention(x)`), then the feed-forward one,
        each with its residual, norm and dropout; `rows`: the real rows `x` came from."""
        x = self._residual(
            x,
            self_attention,
            self.self_attention_layer_norm,
            self.self_attention_dropout,
            training,
            self.self_attention_post_norm,
            rows,
        )
        return self._residual(
            x,
            self._feedforward,
            self.feedforward_layer_norm,
            self.feedforward_dropout,
            training,
            self.feedforward_post_norm,
            rows,
        )

    def _call_on_real_rows(self, inputs, real_rows, mask):
        """`call` on the real tokens' rows alone (what `compute_plan.real_rows` gave: a
        served graph's plan), zeros at the padding positions."""
        attend = functools.partial(
            self.self_attention.rows_attend, real_rows=real_rows, attention_mask=mask
        )
        rows = self._sublayers(real_rows.gather(inputs), attend, False, real_rows)
        return real_rows.scatter(rows)

    def compute_output_spec(
        self,
        inputs,
        padding_mask=None,
        attention_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        """`call`'s outputs for symbolic inputs, without tracing `call` (a functional
        model builds about 40% faster): the same checks of `inputs` and the masks, the
        output shaped as `inputs`, then the self-attention's scores."""
        self._check_hidden_dim(inputs.shape, "inputs")
        masking.check_masks(inputs, padding_mask, attention_mask, inputs.shape[1], _NAMES)
        outputs = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        _, scores = self.self_attention.compute_output_spec(
            inputs, inputs, return_attention_scores=True
        )
        return outputs, scores
