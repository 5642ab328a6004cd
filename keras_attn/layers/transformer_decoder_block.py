"""The Transformer decoder layer: masked self-attention, cross-attention, feed-forward."""

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.layers import masking
from keras_attn.layers.transformer_block import TransformerBlock

# The arguments the masks' errors name: (padding mask, attention mask, keys).
_SELF_NAMES = ("decoder_padding_mask", "decoder_attention_mask", "decoder_sequence")
_CROSS_NAMES = ("encoder_padding_mask", "encoder_attention_mask", "encoder_sequence")


@keras_attn_export("keras_attn.layers.TransformerDecoderBlock")
class TransformerDecoderBlock(TransformerBlock):
    """One Transformer decoder layer; without an encoder, a GPT-style causal block.

    "In addition to the two sub-layers in each encoder layer, the decoder inserts
    a third sub-layer, which performs multi-head attention over the output of the
    encoder stack ... We also modify the self-attention sub-layer in the decoder
    stack to prevent positions from attending to subsequent positions"
    (Vaswani et al., 2017). The cross-attention sub-layer exists only if the block
    is built (first called) with an `encoder_sequence`; a block built without one
    is decoder-only (GPT). Post-LN or pre-LN as `norm_first` says. Equivalent to
    `torch.nn.TransformerDecoderLayer(batch_first=True)` with a causal `tgt_mask`.

    Args:
        num_heads: number of attention heads.
        intermediate_dim: width of the feed-forward hidden layer (`d_ff`).
        dropout: dropout on attention probabilities and on each sub-layer output.
        activation: activation of the feed-forward hidden layer.
        layer_norm_epsilon: epsilon of the layer normalisations.
        norm_first: `False` for post-LN, `True` for pre-LN.
        score: scoring function of both attentions (name or `AttentionScore`; an
            instance is a template, each attention gets its own copy).
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
            (T5 shares its first layer's table across the stack). `"t5"` here
            means T5's causal buckets, as in T5's decoder (an instance, e.g.
            `RelativePositionBias(num_heads)`, keeps both sides).
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
            (`MultiHeadAttention`'s `qk_norm_epsilon`, this block's epsilon; Gemma 3).
            Defaults to `False`.
        post_norms: with `norm_first`, also normalise each sub-layer's output before
            the residual sum, `x + f(norm(x))` becoming `x + post_norm(f(norm(x)))`
            (Gemma 2 and 3; `<sub-layer>_post_norm`). Defaults to `False`.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        decoder_sequence: `(batch, target_len, hidden_dim)`.
        encoder_sequence: optional `(batch, source_len, encoder_dim)`.
        decoder_padding_mask: optional `(batch, target_len)`; defaults to the Keras
            mask of `decoder_sequence`.
        decoder_attention_mask: optional `(batch, target_len, target_len)`.
        encoder_padding_mask: optional `(batch, source_len)`; defaults to the
            Keras mask of `encoder_sequence`.
        encoder_attention_mask: optional `(batch, target_len, source_len)`.
        use_causal_mask: whether self-attention is causal. Defaults to `True`.
        self_attention_cache: optional `(batch, 2, cache_len, num_heads, head_dim)`
            keys and values of the self-attention at earlier positions
            (`self_attention.compute_cache`); incremental decoding.
        self_attention_cache_update_index: position of `decoder_sequence`'s first
            row in the cache (needed with `self_attention_cache`). The padding mask
            does not apply in this mode (`decoder_attention_mask` is then
            `(batch, target_len, cache_len)`).
        cross_attention_cache: optional `(batch, 2, source_len, num_heads, head_dim)`,
            the encoder output projected once (`cross_attention.compute_cache`).
        cache_write: `"slice"` or `"scatter"`: how the self-attention cache is
            written (see `MultiHeadAttention`; `"scatter"` for exported graphs).
        training: whether dropout is active.

    Returns:
        `(batch, target_len, hidden_dim)`, and with `self_attention_cache` the
        updated cache: `(outputs, self_attention_cache)`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.layers import TransformerDecoderBlock
    >>> block = TransformerDecoderBlock(num_heads=4, intermediate_dim=128)
    >>> target = np.random.rand(2, 7, 64).astype("float32")
    >>> source = np.random.rand(2, 9, 64).astype("float32")
    >>> tuple(block(target, source).shape)
    (2, 7, 64)

    References:
        - [Vaswani et al., 2017](https://arxiv.org/abs/1706.03762)
        - [Radford et al., 2018](https://openai.com/research/language-unsupervised)
    """

    causal_self_attention = True

    def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
        self._check_hidden_dim(decoder_sequence_shape, "decoder_sequence")
        (
            self.self_attention,
            self.self_attention_layer_norm,
            self.self_attention_dropout,
        ) = self._build_attention("self_attention", decoder_sequence_shape, decoder_sequence_shape)
        self.has_cross_attention = encoder_sequence_shape is not None
        if self.has_cross_attention:
            self._check_encoder_shape(encoder_sequence_shape)
            (
                self.cross_attention,
                self.cross_attention_layer_norm,
                self.cross_attention_dropout,
            ) = self._build_attention(
                "cross_attention", decoder_sequence_shape, encoder_sequence_shape
            )
        self._build_feedforward(decoder_sequence_shape)
        self.built = True

    def _check_encoder_shape(self, shape):
        if len(shape) != 3 or shape[-1] is None:
            raise ValueError(
                "Expected `encoder_sequence` of shape (batch, source_len, features) "
                f"with known features. Received: encoder_sequence.shape={tuple(shape)}"
            )

    def call(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        decoder_attention_mask=None,
        encoder_padding_mask=None,
        encoder_attention_mask=None,
        use_causal_mask=True,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        cache_write="slice",
        training=None,
    ):
        self._check_call_arguments(
            decoder_sequence, encoder_sequence, decoder_padding_mask, encoder_padding_mask,
            encoder_attention_mask, self_attention_cache, self_attention_cache_update_index,
            cross_attention_cache,
        )  # fmt: skip
        target_length = decoder_sequence.shape[1]
        if self_attention_cache is not None:
            self_mask = decoder_attention_mask
        else:
            self_mask = masking.attention_mask(
                decoder_sequence,
                decoder_padding_mask,
                decoder_attention_mask,
                target_length,
                _SELF_NAMES,
            )
        updated_cache = []

        def self_attention(x):
            outputs = self.self_attention(
                x,
                x,
                attention_mask=self_mask,
                use_causal_mask=use_causal_mask,
                cache=self_attention_cache,
                cache_update_index=self_attention_cache_update_index,
                cache_write=cache_write,
                training=training,
            )
            if self_attention_cache is None:
                return outputs
            updated_cache.append(outputs[1])
            return outputs[0]

        x = self._residual(
            decoder_sequence,
            self_attention,
            self.self_attention_layer_norm,
            self.self_attention_dropout,
            training,
            self.self_attention_post_norm,
        )
        if self.has_cross_attention:
            cross_mask = masking.attention_mask(
                encoder_sequence,
                encoder_padding_mask,
                encoder_attention_mask,
                target_length,
                _CROSS_NAMES,
            )

            def cross_attention(x):
                outputs = self.cross_attention(
                    x,
                    encoder_sequence,
                    attention_mask=cross_mask,
                    cache=cross_attention_cache,
                    training=training,
                )
                return outputs if cross_attention_cache is None else outputs[0]

            x = self._residual(
                x,
                cross_attention,
                self.cross_attention_layer_norm,
                self.cross_attention_dropout,
                training,
                self.cross_attention_post_norm,
            )
        x = self._residual(
            x,
            self._feedforward,
            self.feedforward_layer_norm,
            self.feedforward_dropout,
            training,
            self.feedforward_post_norm,
        )
        return x if self_attention_cache is None else (x, updated_cache[0])

    def _check_call_arguments(
        self,
        decoder_sequence,
        encoder_sequence,
        decoder_padding_mask,
        encoder_padding_mask,
        encoder_attention_mask,
        self_attention_cache,
        self_attention_cache_update_index,
        cross_attention_cache,
    ):
        """`call`'s checks of its arguments' presence and shapes, masks aside (theirs are
        `masking.attention_mask`'s): `call` and `compute_output_spec` run them."""
        self._check_hidden_dim(decoder_sequence.shape, "decoder_sequence")
        if (self_attention_cache is None) != (self_attention_cache_update_index is None):
            raise ValueError(
                "`self_attention_cache` and `self_attention_cache_update_index` go "
                "together. Received: self_attention_cache="
                f"{None if self_attention_cache is None else tuple(self_attention_cache.shape)}, "
                f"self_attention_cache_update_index={self_attention_cache_update_index}"
            )
        if (encoder_sequence is not None) != self.has_cross_attention:
            raise ValueError(
                f"Block '{self.name}' was built "
                f"{'with' if self.has_cross_attention else 'without'} cross-attention, "
                "so `encoder_sequence` must be "
                f"{'given' if self.has_cross_attention else 'None'}. Received: "
                f"encoder_sequence={'None' if encoder_sequence is None else encoder_sequence.shape}"
            )
        if encoder_sequence is None and (
            encoder_padding_mask is not None or encoder_attention_mask is not None
        ):
            raise ValueError(
                "`encoder_padding_mask` and `encoder_attention_mask` need an "
                "`encoder_sequence`. Received: encoder_sequence=None"
            )
        if encoder_sequence is not None:
            self._check_encoder_shape(encoder_sequence.shape)
        elif cross_attention_cache is not None:
            raise ValueError(
                f"Block '{self.name}' has no cross-attention. Received: cross_attention_cache"
            )
        # Keys are the cache's positions; padding of the new rows says nothing of them.
        if self_attention_cache is not None and decoder_padding_mask is not None:
            raise ValueError(
                "`decoder_padding_mask` does not apply with `self_attention_cache` "
                "(mask cache positions with `decoder_attention_mask`)."
            )

    def compute_output_spec(
        self,
        decoder_sequence,
        encoder_sequence=None,
        decoder_padding_mask=None,
        decoder_attention_mask=None,
        encoder_padding_mask=None,
        encoder_attention_mask=None,
        self_attention_cache=None,
        self_attention_cache_update_index=None,
        cross_attention_cache=None,
        **kwargs,
    ):
        """`call`'s outputs for symbolic inputs, without tracing `call` (a functional
        model builds faster): the same checks of the sequences, masks and caches, the
        output shaped as `decoder_sequence`, then the updated cache if one was given."""
        self._check_call_arguments(
            decoder_sequence, encoder_sequence, decoder_padding_mask, encoder_padding_mask,
            encoder_attention_mask, self_attention_cache, self_attention_cache_update_index,
            cross_attention_cache,
        )  # fmt: skip
        length = decoder_sequence.shape[1]
        if self_attention_cache is None:
            masking.check_masks(
                decoder_sequence, decoder_padding_mask, decoder_attention_mask, length, _SELF_NAMES
            )
        if encoder_sequence is not None:
            masking.check_masks(
                encoder_sequence, encoder_padding_mask, encoder_attention_mask, length, _CROSS_NAMES
            )
        outputs = keras.KerasTensor(decoder_sequence.shape, dtype=self.compute_dtype)
        if self_attention_cache is None:
            return outputs
        return outputs, keras.KerasTensor(self_attention_cache.shape, self_attention_cache.dtype)
