"""KagNet on TensorFlow, JAX and PyTorch: its graph side equals Lin et al.'s equations
transcribed loop by loop (GCN, path LSTM, path and pair attention), the model fits with
its own defaults and round-trips a `.keras` file, and its sizes are checked."""

import keras
import numpy as np
import pytest

from keras_attn.models import KagNet
from tests import model_harness as harness

pytestmark = pytest.mark.backends("tensorflow", "jax", "torch")
SIZES = (6, 2, 3, 3)  # nodes, pairs, paths, hops
CONCEPTS, RELATIONS = 9, 4


def _graph_inputs(rows):
    """Schema arrays with full, partial, empty and padded pairs and paths."""
    rng = np.random.default_rng(0)
    nodes, pairs, paths, hops = SIZES

    def ids(high, *shape):
        return rng.integers(1, high + 1, (rows, *shape)).astype("int32")

    x = {
        "graph_nodes": ids(CONCEPTS, nodes),
        "graph_adjacency": (rng.random((rows, nodes, nodes)) < 0.4).astype("float32"),
        "pair_nodes": ids(nodes, pairs, 2),
        "path_nodes": ids(nodes, pairs, paths, hops + 1),
        "path_relations": ids(RELATIONS, pairs, paths, hops),
    }
    x["graph_nodes"][0, -1] = 0  # a padding node
    x["pair_nodes"][1, 1] = 0  # row 1 has one pair
    x["path_relations"][0, 0, 1, 2:] = 0  # a 2-hop path
    x["path_nodes"][0, 0, 1, 3:] = 0
    x["path_relations"][0, 1, 1:] = 0  # a pair with one path
    x["path_relations"][0, 1, 0, 1:] = 0
    x["path_relations"][1, 0] = 0  # a pair with none
    return x


def _model(**options):
    return harness.seeded(
        lambda: KagNet(
            harness.tiny_bert(),
            CONCEPTS,
            RELATIONS,
            num_choices=2,
            schema_sizes=SIZES,
            concept_dim=4,
            relation_dim=3,
            lstm_units=5,
            hidden_dim=6,
            dropout=0.0,
            **options,
        )  # fmt: skip
    )()


def _inputs():
    x = {k: v.reshape(2, 2, *v.shape[1:]) for k, v in _graph_inputs(4).items()}
    text = harness.encoder_inputs()
    for name, value in text.items():
        x[name] = np.stack([value, value[::-1]], axis=1)
    return x


def _lstm(steps, kernel, recurrent, bias):
    """Keras's LSTM (gates i, f, c, o; sigmoid and tanh), one step at a time."""
    units = recurrent.shape[0]
    h, c = np.zeros(units), np.zeros(units)
    for x in steps:
        z = x @ kernel + h @ recurrent + bias
        i, f = 1 / (1 + np.exp(-z[:units])), 1 / (1 + np.exp(-z[units : 2 * units]))
        g, o = np.tanh(z[2 * units : 3 * units]), 1 / (1 + np.exp(-z[3 * units :]))
        c = f * c + i * g
        h = o * np.tanh(c)
    return h


def _reference(
    layer, statement, concepts, adjacency, pair_nodes, path_nodes, relations, relation_vectors
):
    """Lin et al.'s equations, loop by loop, for one row."""
    w = {v.path.split("/", 1)[1]: harness.to_numpy(v) for v in layer.weights}
    h = concepts.astype("float64")
    for i in range(layer.gcn_layers):
        new = np.zeros_like(h)
        for n in range(len(h)):
            total = sum(adjacency[n, j] * h[j] for j in range(len(h)))
            degree = max(adjacency[n].sum(), 1.0)
            z = h[n] @ w[f"gcn_self_{i}/kernel"] + w[f"gcn_self_{i}/bias"]
            z = z + (total / degree) @ w[f"gcn_neighbors_{i}/kernel"]
            new[n] = np.maximum(z, 0.0)
        h = new

    def node(position):
        return h[position - 1] if position > 0 else np.zeros(h.shape[1])

    lstm = [w[f"path_lstm/lstm_cell/{n}"] for n in ("kernel", "recurrent_kernel", "bias")]
    path_query = statement @ w["path_query/kernel"] + w["path_query/bias"]
    pair_query = statement @ w["pair_query/kernel"] + w["pair_query/bias"]
    parts, scores = [], []
    for q in range(pair_nodes.shape[0]):
        if pair_nodes[q, 0] == 0:
            continue
        encoded, alphas = [], []
        for p in range(path_nodes.shape[1]):
            hops = int((relations[q, p] > 0).sum())
            if hops == 0:
                continue
            steps = [
                np.concatenate([node(path_nodes[q, p, t]), relation_vectors[q, p, t],
                                node(path_nodes[q, p, t + 1])])
                for t in range(hops)
            ]  # fmt: skip
            encoded.append(_lstm(steps, *lstm))
            alphas.append(path_query @ encoded[-1])
        pair_paths = np.zeros(layer.lstm_units)
        if encoded:
            alphas = np.exp(np.array(alphas) - max(alphas))
            alphas /= alphas.sum()
            pair_paths = sum(a * e for a, e in zip(alphas, encoded, strict=True))
        ends = np.concatenate([node(pair_nodes[q, 0]), node(pair_nodes[q, 1])])
        parts.append(np.concatenate([ends, pair_paths]))
        scores.append(pair_query @ ends)
    if not parts:
        return np.zeros(2 * h.shape[1] + layer.lstm_units)
    betas = np.exp(np.array(scores) - max(scores))
    betas /= betas.sum()
    return sum(b * part for b, part in zip(betas, parts, strict=True))


def test_the_graph_side_equals_the_equations_loop_by_loop():
    model = _model()
    x = _graph_inputs(4)
    rng = np.random.default_rng(1)
    statement = rng.normal(size=(4, 16)).astype("float32")
    concepts = rng.normal(size=(4, SIZES[0], 4)).astype("float32")
    relations = rng.normal(size=(*x["path_relations"].shape, 3)).astype("float32")
    layer = model.path_reasoning
    got = harness.to_numpy(layer(statement, concepts, x["graph_adjacency"], x["pair_nodes"],
                                 x["path_nodes"], relations, x["path_relations"] > 0))  # fmt: skip
    for row in range(4):
        arrays = [x[k][row] for k in ("graph_adjacency", "pair_nodes", "path_nodes",
                                      "path_relations")]  # fmt: skip
        expected = _reference(layer, statement[row], concepts[row], *arrays, relations[row])
        assert np.abs(got[row] - expected).max() < 1e-5, row


@pytest.mark.slow
def test_kagnet_fits_reloads_and_checks_its_sizes(tmp_path):
    x = _inputs()
    model = _model()
    assert not model.concept_embedding.trainable  # TransE's vectors, frozen
    vectors = np.random.default_rng(2).normal(size=(CONCEPTS, 4)).astype("float32")
    model.set_concept_vectors(vectors)
    graph = keras.Model(model.input, model.hidden_dense.input)  # [s; g], before the MLP
    before = harness.to_numpy(graph(x))
    changed = dict(x, path_relations=np.where(x["path_relations"] > 0, 1, 0).astype("int32"))
    assert np.abs(harness.to_numpy(graph(changed)) - before).max() > 1e-6  # relations count
    reloaded = harness.run_task_test(_model, x, np.array([0, 1]), tmp_path)
    model.save(tmp_path / "kagnet.keras")
    assert not keras.saving.load_model(tmp_path / "kagnet.keras").concept_embedding.trainable
    assert not reloaded.concept_embedding.trainable
    with pytest.raises(ValueError, match=r"shape \(9, 4\)"):
        model.set_concept_vectors(vectors[:3])
    with pytest.raises(ValueError, match="`schema_sizes` four positive ints"):
        KagNet(harness.tiny_bert(), CONCEPTS, RELATIONS, 2, schema_sizes=(4, 2, 3))
    with pytest.raises(ValueError, match="num_choices"):
        KagNet(harness.tiny_bert(), CONCEPTS, RELATIONS, 1)
    with pytest.raises(TypeError, match="BertBackbone"):
        KagNet(harness.tiny_xlnet(), CONCEPTS, RELATIONS, 2)
