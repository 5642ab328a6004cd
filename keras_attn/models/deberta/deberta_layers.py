"""DeBERTa's layers around the attention (internal): the shared relative-position table
and the post-LN block."""

import keras
from keras import ops

from keras_attn.layers import DisentangledAttention, Dropout


def initializer(stddev):
    return keras.initializers.TruncatedNormal(stddev=stddev)


@keras.saving.register_keras_serializable(package="keras_attn")
class RelativePositionTable(keras.layers.Layer):
    """The `(2 * span, width)` relative-position embeddings every layer shares, after
    their LayerNorm (DeBERTa's `norm_rel_ebd="layer_norm"`) (internal).

    Call arguments:
        inputs: any tensor; only its dtype is used (the table is the layer's own).

    Returns:
        The table, `(2 * span, width)`.
    """

    layout_roles = {"embeddings": "table"}

    def __init__(self, rows, width, normalize=True, epsilon=1e-7, stddev=0.02, **kwargs):
        super().__init__(**kwargs)
        self.rows, self.width, self.normalize = rows, width, normalize
        self.epsilon, self.stddev = epsilon, stddev

    def build(self, inputs_shape=None):
        self.embeddings = self.add_weight(
            name="embeddings", shape=(self.rows, self.width), initializer=initializer(self.stddev)
        )
        self.layer_norm = None
        if self.normalize:
            self.layer_norm = keras.layers.LayerNormalization(
                epsilon=self.epsilon, dtype=self.dtype_policy, name="layer_norm"
            )
            self.layer_norm.build((self.rows, self.width))
        self.built = True

    def call(self, inputs):
        table = ops.cast(self.embeddings, self.compute_dtype)
        return table if self.layer_norm is None else self.layer_norm(table)

    def compute_output_shape(self, inputs_shape):
        return (self.rows, self.width)

    def get_config(self):
        return {
            **super().get_config(),
            "rows": self.rows,
            "width": self.width,
            "normalize": self.normalize,
            "epsilon": self.epsilon,
            "stddev": self.stddev,
        }


@keras.saving.register_keras_serializable(package="keras_attn")
class DebertaBlock(keras.layers.Layer):
    """One post-LN DeBERTa layer (internal): disentangled attention, dropout, residual,
    LayerNorm; feed-forward (GELU), dropout, residual, LayerNorm.

    Call arguments:
        inputs: `(batch, length, width)`: the queries and the residual.
        relative_embeddings: the shared `(2 * span, width)` table.
        value: optional `(batch, length, width)` the keys and values come from
            (default `inputs`): the enhanced mask decoder's states.
        padding_mask: `(batch, length)`, 1 at real tokens.
        training: dropout on or off.
        return_attention_scores: also return the probabilities.

    Returns:
        `(batch, length, width)` (and the probabilities).
    """

    # Megatron's split of the feed-forward (keras_attn.models.layout_maps): column, then row.
    layout_roles = {"intermediate_dense": "column", "output_dense": "row"}

    def __init__(self, attention, intermediate_dim, dropout, activation, epsilon, stddev, **kw):
        super().__init__(**kw)
        self.attention_config = dict(attention)
        self.intermediate_dim, self.dropout = intermediate_dim, dropout
        self.activation, self.epsilon, self.stddev = activation, epsilon, stddev
        self.supports_masking = True

    def build(self, inputs_shape, relative_embeddings_shape=None):
        width = inputs_shape[-1]
        policy, init = self.dtype_policy, initializer(self.stddev)
        self.attention = DisentangledAttention(
            **self.attention_config, kernel_initializer=init, dtype=policy, name="attention"
        )
        self.attention.build(inputs_shape, (None, width))
        self.attention_dropout = Dropout(self.dropout, dtype=policy, name="attention_dropout")
        self.attention_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.epsilon, dtype=policy, name="attention_layer_norm"
        )
        self.attention_layer_norm.build(inputs_shape)
        self.intermediate_dense = keras.layers.Dense(
            self.intermediate_dim,
            activation=self.activation,
            kernel_initializer=init,
            dtype=policy,
            name="intermediate_dense",
        )
        self.intermediate_dense.build(inputs_shape)
        self.output_dense = keras.layers.Dense(
            width, kernel_initializer=init, dtype=policy, name="output_dense"
        )
        self.output_dense.build((None, None, self.intermediate_dim))
        self.output_dropout = Dropout(self.dropout, dtype=policy, name="output_dropout")
        self.output_layer_norm = keras.layers.LayerNormalization(
            epsilon=self.epsilon, dtype=policy, name="output_layer_norm"
        )
        self.output_layer_norm.build(inputs_shape)
        self.built = True

    def call(
        self,
        inputs,
        relative_embeddings,
        value=None,
        padding_mask=None,
        training=None,
        return_attention_scores=False,
    ):
        attended, scores = self.attention(
            inputs,
            relative_embeddings,
            value=value,
            padding_mask=padding_mask,
            training=training,
            return_attention_scores=True,
        )
        x = self.attention_layer_norm(inputs + self.attention_dropout(attended, training=training))
        y = self.output_dense(self.intermediate_dense(x))
        x = self.output_layer_norm(x + self.output_dropout(y, training=training))
        return (x, scores) if return_attention_scores else x

    def compute_output_shape(self, inputs_shape, relative_embeddings_shape=None, value_shape=None):
        return tuple(inputs_shape)

    def get_config(self):
        return {
            **super().get_config(),
            "attention": self.attention_config,
            "intermediate_dim": self.intermediate_dim,
            "dropout": self.dropout,
            "activation": self.activation,
            "epsilon": self.epsilon,
            "stddev": self.stddev,
        }
