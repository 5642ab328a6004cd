"""BERT's masked-LM output layer, tied to the token embedding (internal to the tasks)."""

import keras
from keras import ops


class MaskedLMHead(keras.layers.Layer):
    """Logits over the vocabulary at chosen positions, with the output weights tied
    to the input embedding: gather -> dense -> GELU -> LayerNorm -> `x E^T + b`.

    "The output layer is tied to the token embedding matrix (plus a transform: dense,
    GELU, LayerNorm, and an output bias)" (SPEC, after Devlin et al.'s code). The
    transform maps to the embedding width, so a factorised (ALBERT) embedding works.
    It reads the backbone's `token_embedding` table without owning it; the task model
    that builds it rebuilds it on load, which is why it is not a public, standalone layer.
    """

    def __init__(
        self,
        token_embedding,
        activation="gelu",
        layer_norm_epsilon=1e-12,
        kernel_initializer="glorot_uniform",
        **kwargs,
    ):
        super().__init__(**kwargs)
        # A function, so Keras does not track (and save) the backbone's table twice.
        self._embeddings = lambda: token_embedding.embeddings
        self.activation = keras.activations.get(activation)
        self.layer_norm_epsilon = layer_norm_epsilon
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def build(self, sequence_shape, positions_shape):
        vocabulary_size, embedding_dim = self._embeddings().shape
        self.dense = keras.layers.Dense(
            embedding_dim,
            activation=self.activation,
            kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy,
            name="dense",
        )
        self.dense.build(sequence_shape)
        self.layer_norm = keras.layers.LayerNormalization(
            epsilon=self.layer_norm_epsilon, dtype=self.dtype_policy, name="layer_norm"
        )
        self.layer_norm.build((*sequence_shape[:-1], embedding_dim))
        self.output_bias = self.add_weight(
            name="output_bias", shape=(vocabulary_size,), initializer="zeros"
        )
        self.built = True

    def call(self, sequence, positions):
        x = ops.take_along_axis(sequence, ops.expand_dims(positions, -1), axis=1)  # (b, p, hidden)
        x = self.layer_norm(self.dense(x))  # (batch, predictions, embedding_dim)
        embeddings = ops.cast(self._embeddings(), x.dtype)
        logits = ops.matmul(x, ops.transpose(embeddings)) + ops.cast(self.output_bias, x.dtype)
        return ops.cast(logits, "float32")  # (batch, predictions, vocabulary), for a stable loss

    def compute_output_spec(self, sequence, positions):
        # float32 whatever the policy: `call` casts the logits (Keras would report the
        # compute dtype, e.g. float16, for a shape-only `compute_output_shape`).
        return keras.KerasTensor((*positions.shape, self._embeddings().shape[0]), dtype="float32")
