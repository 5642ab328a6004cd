"""TransE (issue 60, acceptance 2): its scores equal the formula transcribed loop by
loop, on every backend; it learns a graph it is shown (filtered ranks fall); the margin
loss, the corruption and the filtered ranking do what Bordes et al. say."""

import math

import keras
import numpy as np
import pytest

from keras_attn.knowledge import TransE, corrupted_batches, filtered_ranks, margin_ranking_loss

BACKENDS = pytest.mark.backends("tensorflow", "jax", "torch")


def _loop_score(entities, relations, h, r, t, norm):
    """-‖e_h + r - e_t‖_p, one coordinate at a time."""
    total = 0.0
    for i in range(len(entities[h])):
        gap = float(entities[h][i]) + float(relations[r][i]) - float(entities[t][i])
        total += abs(gap) if norm == 1 else gap * gap
    return -(total if norm == 1 else math.sqrt(total))


@BACKENDS
@pytest.mark.parametrize("norm", [1, 2])
def test_scores_equal_the_formula_loop_by_loop(norm):
    model = TransE(num_entities=7, num_relations=3, embedding_dim=5, norm=norm, seed=3)
    triples = np.array([[0, 1, 2], [6, 2, 0], [3, 0, 3], [5, 1, 4]])
    scores = keras.ops.convert_to_numpy(model(triples))
    entities = keras.ops.convert_to_numpy(model.entity_embedding.embeddings)
    relations = keras.ops.convert_to_numpy(model.relation_embedding.embeddings)
    np.testing.assert_allclose(np.linalg.norm(entities, axis=1), 1, atol=1e-6)  # unit rows
    expected = [_loop_score(entities, relations, *triple, norm) for triple in triples.tolist()]
    np.testing.assert_allclose(scores, expected, atol=1e-5)
    # Every entity in a slot, as the filtered ranking reads them.
    every = model.score_all(triples[:, 0], triples[:, 1], triples[:, 2], "tail")
    np.testing.assert_allclose(every[np.arange(4), triples[:, 2]], expected, atol=1e-5)
    heads = model.score_all(triples[:, 0], triples[:, 1], triples[:, 2], "head")
    np.testing.assert_allclose(heads[np.arange(4), triples[:, 0]], expected, atol=1e-5)


@BACKENDS
def test_it_learns_a_graph_and_keeps_entities_on_the_sphere():
    """A chain of 30 entities under "next" and "previous" (each the other's inverse; a
    chain, not a ring: translations cannot close a cycle): after training the true
    neighbour is among the top three (the head itself often ranks first: TransE's
    relations stay short), where it started near the middle."""
    n = 30
    steps = range(n - 1)
    triples = np.array([(i, 0, i + 1) for i in steps] + [(i + 1, 1, i) for i in steps])
    model = TransE(n, 2, embedding_dim=16, norm=1, margin=1.0, seed=0)
    model.compile(optimizer=keras.optimizers.SGD(0.05))
    known = set(map(tuple, triples.tolist()))
    before = filtered_ranks(model.score_all, triples, known, n)
    batches = corrupted_batches(triples, n, batch_size=20, seed=0)
    model.fit(batches, steps_per_epoch=300, shuffle=False, verbose=0)  # shuffled already
    after = filtered_ranks(model.score_all, triples, known, n)
    assert np.mean(after <= 3) > 0.9 and np.mean(before <= 3) < 0.3, (before, after)
    entities = keras.ops.convert_to_numpy(model.entity_embedding.embeddings)
    np.testing.assert_allclose(np.linalg.norm(entities, axis=1), 1, atol=1e-5)


def test_the_margin_loss_corruption_and_filtered_ranks():
    loss = margin_ranking_loss(2.0)
    scores = np.array([[-1.0, -4.0], [-1.0, -2.0], [-3.0, -1.0]])  # margins met, not, not
    assert float(loss(None, scores)) == pytest.approx((0 + 1 + 4) / 3)
    triples = np.array([[0, 0, 1], [1, 0, 2], [2, 1, 3]])
    batches = corrupted_batches(triples, 50, batch_size=3, seed=1)
    changed = []
    for _ in range(20):
        x, y = next(batches)
        assert sorted(map(tuple, x["positive"].tolist())) == sorted(map(tuple, triples.tolist()))
        differs = x["positive"] != x["negative"]
        assert not differs[:, 1].any() and not (differs[:, 0] & differs[:, 2]).any()
        changed.append(differs[:, [0, 2]].sum(0))
    assert (np.sum(changed, 0) > 10).all()  # heads and tails both replaced
    assert next(corrupted_batches(triples[:1], 5, batch_size=8))[0]["positive"].shape == (1, 3)
    with pytest.raises(ValueError, match=r"int \(facts, 3\)"):
        next(corrupted_batches(np.zeros((2, 2)), 5))

    def score_all(heads, relations, tails, side):  # entity 4 scores highest, then 3, ...
        return np.tile(np.arange(5.0), (len(heads), 1))

    # (0, 0, 2): entities 4 and 3 above the tail 2, but (0, 0, 4) is known: rank 2.
    ranks = filtered_ranks(score_all, np.array([[0, 0, 2]]), {(0, 0, 2), (0, 0, 4)}, 5)
    assert ranks.tolist() == [2, 5]  # the tail's rank, then the head's (0: last of five)


def test_bad_arguments_and_the_config():
    for kwargs, match in (
        (dict(num_entities=0, num_relations=1), "num_entities"),
        (dict(num_entities=2, num_relations=True), "num_relations"),
        (dict(num_entities=2, num_relations=1, norm=3), "`norm` 1 or 2"),
        (dict(num_entities=2, num_relations=1, margin=0), "`margin` > 0"),
    ):
        with pytest.raises(ValueError, match=match):
            TransE(**kwargs)
    model = TransE(4, 2, embedding_dim=3, norm=2, margin=0.5, seed=1)
    again = TransE.from_config(model.get_config())
    assert (again.norm, again.margin, again.embedding_dim) == (2, 0.5, 3)
    with pytest.raises(ValueError, match="`side`"):
        model.score_all([0], [0], [1], "middle")


def test_entity_vectors_files_are_checked_before_they_are_trusted(tmp_path):
    import zipfile

    from keras_attn.knowledge import read_entity_vectors

    good = tmp_path / "good.npz"
    np.savez(good, synsets=np.array(["a", "b"]), vectors=np.ones((2, 3)))
    synsets, vectors = read_entity_vectors(good)
    assert synsets == ["a", "b"] and vectors.dtype == np.float32 and vectors.shape == (2, 3)
    cases = {
        "twice.npz": dict(synsets=np.array(["a", "a"]), vectors=np.ones((2, 3))),
        "rows.npz": dict(synsets=np.array(["a"]), vectors=np.ones((2, 3))),
        "nan.npz": dict(synsets=np.array(["a"]), vectors=np.full((1, 3), np.nan)),
        "ints.npz": dict(synsets=np.array(["a"]), vectors=np.ones((1, 3), "int32")),
        "objects.npz": dict(synsets=np.array(["a"], object), vectors=np.ones((1, 3))),
        "missing.npz": dict(vectors=np.ones((1, 3))),
    }
    messages = {"twice.npz": "1 distinct synsets of 2", "rows.npz": "for 2 rows",
                "nan.npz": "NaN", "ints.npz": "2-D float", "objects.npz": "claims",
                "missing.npz": "no 'synsets' array"}  # fmt: skip
    for name, arrays in cases.items():
        np.savez(tmp_path / name, **arrays)
        with pytest.raises(ValueError, match=messages[name]):
            read_entity_vectors(tmp_path / name)
    (tmp_path / "text.npz").write_text("not a zip")
    with pytest.raises(ValueError, match="cannot read it as an .npz"):
        read_entity_vectors(tmp_path / "text.npz")
    with zipfile.ZipFile(good) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    members["vectors.npy"] = members["vectors.npy"].replace(b"(2, 3)", b"(2, 30000)")
    with zipfile.ZipFile(tmp_path / "crafted.npz", "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    with pytest.raises(ValueError, match="claims 480,000 bytes"):
        read_entity_vectors(tmp_path / "crafted.npz")
