"""KagNet's graph side (Lin et al., 2019): a GCN over the schema graph's concept vectors,
an LSTM over each path, attention over a pair's paths and over the pairs, both
conditioned on the statement (internal to `KagNet`)."""

import keras
from keras import ops

NEGATIVE = -1e9


def _gather_nodes(states, positions):
    """`states` `(m, nodes, d)` at 1-based `positions` `(m, ...)` (0: a zero vector)."""
    m = ops.shape(positions)[0]
    flat = ops.reshape(positions, (m, -1))
    picked = ops.take_along_axis(states, ops.maximum(flat - 1, 0)[..., None], axis=1)
    picked = picked * ops.cast(ops.greater(flat, 0), states.dtype)[..., None]
    return ops.reshape(picked, (*ops.shape(positions), states.shape[-1]))


def _masked_softmax(scores, valid):
    """Softmax over the last axis among `valid` entries; all zero where none is."""
    scores = ops.where(valid, scores, NEGATIVE)
    scores = scores - ops.max(scores, axis=-1, keepdims=True)
    weights = ops.exp(scores) * ops.cast(valid, scores.dtype)
    return weights / ops.maximum(ops.sum(weights, axis=-1, keepdims=True), 1e-30)


@keras.saving.register_keras_serializable(package="keras_attn")
class PathReasoning(keras.layers.Layer):
    """The schema graph as one vector per statement-choice pair (internal).

    GCN (`gcn_layers` times): `h_i' = act(W_self h_i + W (sum_{j in N(i)} h_j) / |N(i)|)`.
    Each path `(c_0, r_1, c_1, ..., c_k)` is an LSTM over the hops `[h_{t-1}; r_t; h_t]`,
    its last state `p`. Within a concept pair, `alpha_k = softmax_k(T_1(s) . p_k)` and
    `R = sum_k alpha_k p_k`; over the pairs, `beta = softmax(T_2(s) . [h_q; h_a])` and the
    output `g = sum beta [h_q; h_a; R]` (zero where a row has no pair, and `R = 0` for a
    pair without paths).

    Call arguments: `statement` `(m, s)`, `concepts` `(m, nodes, d)`, `adjacency`
    `(m, nodes, nodes)`, `pair_nodes` `(m, pairs, 2)`, `path_nodes`
    `(m, pairs, paths, hops + 1)`, `relations` `(m, pairs, paths, hops, r)` (relation
    vectors) and `hop_mask` `(m, pairs, paths, hops)`.
    Returns `g` `(m, 2 d + lstm_units)`.
    """

    def __init__(self, gcn_layers=2, lstm_units=64, activation="relu",
                 kernel_initializer="glorot_uniform", **kwargs):  # fmt: skip
        super().__init__(**kwargs)
        self.gcn_layers = gcn_layers
        self.lstm_units = lstm_units
        self.activation = keras.activations.get(activation)
        self.kernel_initializer = keras.initializers.get(kernel_initializer)

    def _dense(self, name, units, input_dim, use_bias=True):
        layer = keras.layers.Dense(
            units, use_bias=use_bias, kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy, name=name,
        )  # fmt: skip
        layer.build((None, input_dim))
        return layer

    def build(self, statement_shape, concepts_shape, adjacency_shape, pair_nodes_shape,
              path_nodes_shape, relations_shape, hop_mask_shape):  # fmt: skip
        width, concept_dim = statement_shape[-1], concepts_shape[-1]
        relation_dim = relations_shape[-1]
        self.gcn_self = [
            self._dense(f"gcn_self_{i}", concept_dim, concept_dim) for i in range(self.gcn_layers)
        ]
        self.gcn_neighbors = [
            self._dense(f"gcn_neighbors_{i}", concept_dim, concept_dim, use_bias=False)
            for i in range(self.gcn_layers)
        ]
        self.path_lstm = keras.layers.LSTM(
            self.lstm_units, kernel_initializer=self.kernel_initializer,
            dtype=self.dtype_policy, name="path_lstm",
        )  # fmt: skip
        self.path_lstm.build((None, None, 2 * concept_dim + relation_dim))
        self.path_query = self._dense("path_query", self.lstm_units, width)
        self.pair_query = self._dense("pair_query", 2 * concept_dim, width)
        self.built = True

    def call(self, statement, concepts, adjacency, pair_nodes, path_nodes, relations, hop_mask):
        h = concepts
        degree = ops.maximum(ops.sum(adjacency, axis=-1, keepdims=True), 1.0)
        for self_dense, neighbor_dense in zip(self.gcn_self, self.gcn_neighbors, strict=True):
            h = self.activation(self_dense(h) + neighbor_dense(ops.matmul(adjacency, h) / degree))

        m, pairs, paths, hops = ops.shape(hop_mask)
        along = _gather_nodes(h, path_nodes)  # (m, pairs, paths, hops + 1, d)
        steps = ops.concatenate([along[..., :-1, :], relations, along[..., 1:, :]], axis=-1)
        steps = ops.reshape(steps, (m * pairs * paths, hops, steps.shape[-1]))
        mask = ops.reshape(hop_mask, (m * pairs * paths, hops))
        # A row with no hop: an unmasked first step keeps every backend's LSTM defined;
        # the path is dropped from the attention below.
        has_path = ops.any(mask, axis=-1)
        mask = ops.logical_or(mask, ops.logical_and(~has_path[:, None], ops.arange(hops) == 0))
        encoded = self.path_lstm(steps, mask=mask)
        encoded = ops.reshape(encoded, (m, pairs, paths, self.lstm_units))

        valid_paths = ops.reshape(has_path, (m, pairs, paths))
        alpha = ops.einsum("mu,mqpu->mqp", self.path_query(statement), encoded)
        alpha = _masked_softmax(alpha, valid_paths)
        pair_paths = ops.einsum("mqp,mqpu->mqu", alpha, encoded)

        ends = _gather_nodes(h, pair_nodes)  # (m, pairs, 2, d)
        ends = ops.reshape(ends, (m, pairs, 2 * ends.shape[-1]))
        beta = ops.einsum("md,mqd->mq", self.pair_query(statement), ends)
        beta = _masked_softmax(beta, ops.greater(pair_nodes[..., 0], 0))
        return ops.einsum("mq,mqd->md", beta, ops.concatenate([ends, pair_paths], axis=-1))

    def compute_output_spec(self, statement, concepts, *args):
        width = 2 * concepts.shape[-1] + self.lstm_units
        return keras.KerasTensor((statement.shape[0], width), dtype=self.compute_dtype)

    def get_config(self):
        config = super().get_config()
        config.update(
            gcn_layers=self.gcn_layers,
            lstm_units=self.lstm_units,
            activation=keras.activations.serialize(self.activation),
            kernel_initializer=keras.initializers.serialize(self.kernel_initializer),
        )
        return config
