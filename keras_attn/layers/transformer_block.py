"""What the Transformer blocks share: arguments, sub-layers, residuals (internal)."""

import keras

from keras_attn.argument_checks import (
    check_key_value_heads,
    check_positive_int,
    check_positive_number,
    check_rate,
)
from keras_attn.layers import position_bias as position_biases
from keras_attn.layers.compute_plan import PLAIN
from keras_attn.layers.dropout import Dropout
from keras_attn.layers.layer_utils import clone_initializer
from keras_attn.layers.multi_head_attention import PROJECTIONS, MultiHeadAttention
from keras_attn.layers.quantized_blocks import BlockDense
from keras_attn.layers.quantized_blocks.block_formats import check_kernel_formats
from keras_attn.layers.row_products import feedforward
from keras_attn.layers.scoring import lookup as scoring

# What `TransformerBlock`'s `kernel_formats` may name: its sub-layers with kernels.
BLOCK_SUBLAYERS = (
    *PROJECTIONS,
    "feedforward_gate_dense",
    "feedforward_intermediate_dense",
    "feedforward_output_dense",
)

# `TransformerBlock`'s `normalization`: Keras's `LayerNormalization` (Ba et al., 2016) or
# `RMSNormalization` (Zhang and Sennrich, 2019; Llama, Gemma).
NORMALIZATIONS = ("layer_norm", "rms_norm")


class ResidualBlock(keras.layers.Layer):
    """Base of every block: an attention sub-layer and a feed-forward net, each wrapped
    as `LayerNorm(x + Dropout(f(x)))` (post-LN, `norm_first=False`) or
    `x + Dropout(f(LayerNorm(x)))` (pre-LN), and the arguments those need.
    """

    # Megatron's split of the feed-forward (keras_attn.models.layout_maps): column, then row.
    layout_roles = {
        "feedforward_intermediate_dense": "column",
        "feedforward_gate_dense": "column",
        "feedforward_output_dense": "row",
    }

    # The choices of Llama-shaped blocks (`TransformerBlock` takes them as arguments):
    # LayerNorm or RMSNorm, a gated feed-forward net, projections with or without biases.
    normalization = "layer_norm"
    gated_feedforward = False
    use_bias = True
    post_norms = False
    # How the norms and the feed-forward net are written into a graph (Keras's own ops);
    # an exporter gives a copy of the block another (`keras_attn.export.serving_plan`).
    compute_plan = PLAIN

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        dropout=0.0,
        activation="relu",
        layer_norm_epsilon=1e-5,
        norm_first=False,
        key_dim=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        **kwargs,
    ):
        super().__init__(**kwargs)
        check_positive_int("num_heads", num_heads)
        check_positive_int("intermediate_dim", intermediate_dim)
        check_positive_int("key_dim", key_dim, allow_none=True)
        check_rate("dropout", dropout)
        check_positive_number("layer_norm_epsilon", layer_norm_epsilon)
        self.num_heads = num_heads
        self.intermediate_dim = intermediate_dim
        self.dropout = float(dropout)
        self.activation = keras.activations.get(activation)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.norm_first = bool(norm_first)
        self.key_dim = key_dim
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.supports_masking = True

    def _sublayer_kwargs(self):
        return dict(
            kernel_initializer=clone_initializer(self.kernel_initializer),
            bias_initializer=clone_initializer(self.bias_initializer),
            dtype=self.dtype_policy,
        )

    def _check_hidden_dim(self, shape, name):
        if len(shape) != 3 or shape[-1] is None:
            raise ValueError(
                f"Expected `{name}` of shape (batch, length, hidden_dim) with a known "
                f"hidden_dim. Received: {name}.shape={tuple(shape)}"
            )
        hidden_dim = shape[-1]
        if self.key_dim is None and hidden_dim % self.num_heads:
            raise ValueError(
                f"`{name}`'s hidden_dim ({hidden_dim}) must be divisible by `num_heads` "
                f"({self.num_heads}) when `key_dim` is None. Received: {name}.shape="
                f"{tuple(shape)}, num_heads={self.num_heads}"
            )
        return hidden_dim

    def _layer_norm(self, name, shape):
        if self.normalization == "rms_norm":
            norm = keras.layers.RMSNormalization(
                epsilon=self.layer_norm_epsilon, name=name, dtype=self.dtype_policy
            )
        else:
            norm = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon, name=name, dtype=self.dtype_policy
            )
        norm.build(shape)
        return norm

    def _feedforward_dense(self, units, activation, name):
        kind = getattr(self, "kernel_formats", {}).get(name)
        if kind is not None:  # kept in GGUF's blocks
            return BlockDense(
                units, kind, activation=activation, use_bias=self.use_bias, name=name,
                dtype=self.dtype_policy,
            )  # fmt: skip
        return keras.layers.Dense(
            units, activation=activation, use_bias=self.use_bias, name=name,
            **self._sublayer_kwargs(),
        )  # fmt: skip

    def _build_feedforward(self, shape, inner_dropout=False):
        """`feedforward_*` sub-layers; `inner_dropout` adds dropout after the activation
        (Transformer-XL's and XLNet's feed-forward nets)."""
        hidden_dim = shape[-1]
        self.feedforward_gate_dense = None
        if self.gated_feedforward:  # activation(x W_gate) * (x W_in), Shazeer (2020)
            self.feedforward_gate_dense = self._feedforward_dense(
                self.intermediate_dim, self.activation, "feedforward_gate_dense"
            )
            self.feedforward_gate_dense.build(shape)
        self.feedforward_intermediate_dense = self._feedforward_dense(
            self.intermediate_dim,
            None if self.gated_feedforward else self.activation,
            "feedforward_intermediate_dense",
        )
        self.feedforward_intermediate_dense.build(shape)
        self.feedforward_intermediate_dropout = None
        if inner_dropout:
            self.feedforward_intermediate_dropout = Dropout(
                self.dropout, name="feedforward_intermediate_dropout", dtype=self.dtype_policy
            )
        self.feedforward_output_dense = self._feedforward_dense(
            hidden_dim, None, "feedforward_output_dense"
        )
        self.feedforward_output_dense.build((*shape[:-1], self.intermediate_dim))
        self.feedforward_layer_norm = self._layer_norm("feedforward_layer_norm", shape)
        self.feedforward_post_norm = None
        if self.post_norms:
            self.feedforward_post_norm = self._layer_norm("feedforward_post_norm", shape)
        self.feedforward_dropout = Dropout(
            self.dropout, name="feedforward_dropout", dtype=self.dtype_policy
        )

    def _residual(self, x, sublayer, norm, dropout, training, post_norm=None, rows=None):
        """Post-LN `norm(x + dropout(f(x)))` or pre-LN `x + dropout(f(norm(x)))`; with a
        `post_norm` (Gemma's), pre-LN `x + dropout(post_norm(f(norm(x))))`. `rows`: the
        `compute_plan.real_rows` that `x`'s rows came from, or None."""
        normalize = self.compute_plan.normalize
        y = sublayer(normalize(norm, x, rows) if self.norm_first else x)
        if post_norm is not None:
            y = normalize(post_norm, y, rows)
        y = x + dropout(y, training=training)
        return y if self.norm_first else normalize(norm, y, rows)

    def _feedforward(self, x, training=None):
        return feedforward(
            self.feedforward_intermediate_dense,
            self.feedforward_output_dense,
            x,
            self.feedforward_intermediate_dropout,
            training,
            gate=self.feedforward_gate_dense,
            plan=self.compute_plan,
        )

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "num_heads": self.num_heads,
                "intermediate_dim": self.intermediate_dim,
                "dropout": self.dropout,
                "activation": keras.activations.serialize(self.activation),
                "layer_norm_epsilon": self.layer_norm_epsilon,
                "norm_first": self.norm_first,
                "key_dim": self.key_dim,
                "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
                "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            }
        )
        return config


class TransformerBlock(ResidualBlock):
    """Base of `TransformerEncoderBlock` and `TransformerDecoderBlock`: a
    `MultiHeadAttention` of any scoring, window and position bias per attention sub-layer.
    """

    def __init__(
        self,
        num_heads,
        intermediate_dim,
        dropout=0.0,
        activation="relu",
        layer_norm_epsilon=1e-5,
        norm_first=False,
        score="scaled_dot",
        key_dim=None,
        kernel_initializer="glorot_uniform",
        bias_initializer="zeros",
        window=None,
        position_bias=None,
        num_key_value_heads=None,
        rotary_max_wavelength=None,
        rotary_scaling_factor=1.0,
        normalization="layer_norm",
        gated_feedforward=False,
        use_bias=True,
        qkv_bias=None,
        qk_norm=False,
        post_norms=False,
        kernel_formats=None,
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
        check_positive_int("window", window, allow_none=True)
        check_key_value_heads(num_key_value_heads, num_heads)
        check_positive_number("rotary_max_wavelength", rotary_max_wavelength, allow_none=True)
        # A name or a config (raises on an unknown name): each attention sub-layer
        # builds its own copy, an instance is a template, not shared.
        self.score = scoring.serialize(score)
        self.window = window  # sliding-window self-attention (MultiHeadAttention's `window`)
        # The self-attention's relative-position bias (a name or a config, as `score`).
        self.position_bias = position_biases.serialize(position_bias)
        self.num_key_value_heads = num_key_value_heads  # grouped-query attention
        self.rotary_max_wavelength = rotary_max_wavelength  # RoPE in the self-attention
        check_positive_number("rotary_scaling_factor", rotary_scaling_factor)
        self.rotary_scaling_factor = float(rotary_scaling_factor)
        if normalization not in NORMALIZATIONS:
            raise ValueError(
                f"Expected `normalization` to be one of {NORMALIZATIONS}. "
                f"Received: normalization={normalization!r}"
            )
        self.normalization = normalization
        self.gated_feedforward = bool(gated_feedforward)
        self.use_bias = bool(use_bias)
        self.qkv_bias = None if qkv_bias is None else bool(qkv_bias)
        self.qk_norm = bool(qk_norm)
        if post_norms and not norm_first:
            raise ValueError(
                "`post_norms` (a norm after each sub-layer, Gemma's) goes with pre-LN blocks. "
                f"Received: post_norms={post_norms}, norm_first={norm_first}"
            )
        self.post_norms = bool(post_norms)
        # Sub-layers whose kernels stay in GGUF's blocks (`BlockDense`): the
        # self-attention's projections and the feed-forward net's.
        self.kernel_formats = check_kernel_formats(kernel_formats, BLOCK_SUBLAYERS)

    def _build_attention(self, prefix, query_shape, value_shape):
        """Builds `<prefix>`, `<prefix>_layer_norm` and `<prefix>_dropout`."""
        hidden_dim = query_shape[-1]
        self_attention = prefix == "self_attention"
        attention = MultiHeadAttention(
            num_heads=self.num_heads,
            key_dim=self.key_dim or hidden_dim // self.num_heads,
            dropout=self.dropout,
            score=self.score,
            window=self.window if self_attention else None,
            position_bias=self._self_attention_bias() if self_attention else None,
            num_key_value_heads=self.num_key_value_heads,
            rotary_max_wavelength=self.rotary_max_wavelength if self_attention else None,
            rotary_scaling_factor=self.rotary_scaling_factor,
            use_bias=self.use_bias if self.qkv_bias is None else self.qkv_bias,
            output_bias=self.use_bias,
            qk_norm_epsilon=self.layer_norm_epsilon if self.qk_norm else None,
            kernel_formats={
                name: kind
                for name, kind in self.kernel_formats.items()
                if self_attention and name in PROJECTIONS
            },
            name=prefix,
            **self._sublayer_kwargs(),
        )
        attention.build(query_shape, value_shape)
        norm = self._layer_norm(f"{prefix}_layer_norm", query_shape)
        post_norm = None  # Gemma's norm of the sub-layer's output, `<prefix>_post_norm`
        if self.post_norms:
            post_norm = self._layer_norm(f"{prefix}_post_norm", query_shape)
        setattr(self, f"{prefix}_post_norm", post_norm)
        dropout = Dropout(self.dropout, name=f"{prefix}_dropout", dtype=self.dtype_policy)
        return attention, norm, dropout

    # Whether the self-attention is causal (the decoder's): "t5" then means T5's
    # causal buckets, as in T5's decoder.
    causal_self_attention = False

    def _self_attention_bias(self):
        if self.position_bias == "t5" and self.causal_self_attention:
            return "t5_causal"
        return self.position_bias

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "score": self.score,
                "window": self.window,
                "position_bias": self.position_bias,
                "num_key_value_heads": self.num_key_value_heads,
                "rotary_max_wavelength": self.rotary_max_wavelength,
                "rotary_scaling_factor": self.rotary_scaling_factor,
                "normalization": self.normalization,
                "gated_feedforward": self.gated_feedforward,
                "use_bias": self.use_bias,
                "qkv_bias": self.qkv_bias,
                "qk_norm": self.qk_norm,
                "post_norms": self.post_norms,
                "kernel_formats": self.kernel_formats or None,
            }
        )
        return config
