"""KagNet's schema graphs: paths both ways over WordNet's relations and inverses,
shortest first and capped, and the arrays a model reads, cut where they must be."""

import numpy as np
import pytest

from keras_attn.knowledge import (
    ConceptGraph,
    SchemaGraph,
    WordNet,
    schema_arrays,
    schema_graph,
)

pytestmark = pytest.mark.xdist_group("wordnet")
DOG, CANINE, CARNIVORE = "02084071-n", "02083346-n", "02075296-n"


def test_paths_over_wordnet_both_ways():
    wordnet = WordNet.load()
    graph = ConceptGraph(wordnet.noun_facts())
    assert graph.num_relations == 16 and graph.relation_names[0] == "<pad>"
    assert {"hypernym", "hyponym", "part_holonym", "part_meronym"} <= set(graph.relation_names)
    up = graph.paths(DOG, CARNIVORE)
    assert [graph.describe(p) for p in up][0] == (
        f"{DOG} -hypernym-> {CANINE} -hypernym-> {CARNIVORE}"
    )
    down = graph.paths(CARNIVORE, DOG)
    assert down[0] == ((CARNIVORE, CANINE, DOG), (graph.relation_names.index("hyponym"),) * 2)
    assert all(len(p[1]) <= 3 and len(set(p[0])) == len(p[0]) for p in up + down)  # simple
    lengths = [len(p[1]) for p in graph.paths(DOG, "00015388-n", max_paths=50)]  # animal
    assert lengths == sorted(lengths) and len(lengths) <= 50  # shortest first, capped
    assert graph.paths(DOG, DOG) == [] and graph.paths(DOG, "no such synset") == []
    with pytest.raises(ValueError, match="`max_hops` 1, 2 or 3"):
        graph.paths(DOG, CARNIVORE, max_hops=4)


def test_symmetric_relations_keep_their_way_back_apart():
    graph = ConceptGraph([("a", "antonym", "b"), ("a", "hypernym", "c")])
    assert graph.relation_names == ["<pad>", "antonym", "hypernym", "antonym_inverse", "hyponym"]
    assert graph.paths("b", "a") == [(("b", "a"), (3,))]


def test_schema_arrays_cut_where_they_must():
    facts = [("a", "hypernym", "b"), ("b", "hypernym", "c"), ("a", "part_holonym", "d"),
             ("d", "hypernym", "c")]  # fmt: skip
    graph = ConceptGraph(facts)
    schema = schema_graph(graph, ["a"], ["c", "x"])
    assert isinstance(schema, SchemaGraph) and [len(p[2]) for p in schema.pairs] == [2, 0]
    ids = {c: i + 1 for i, c in enumerate("abcd")}  # "x" has no id: its pair is left out
    full = schema_arrays([schema], ids, max_nodes=4, max_pairs=2, max_paths=2, max_hops=3)
    assert full["graph_nodes"].tolist() == [[1, 3, 2, 4]]
    assert full["pair_nodes"].tolist() == [[[1, 2], [0, 0]]]
    assert full["path_relations"][0, 0, :, :2].tolist() == [[1, 1], [2, 1]]  # part_holonym: 2
    adjacency = full["graph_adjacency"][0]
    assert np.array_equal(adjacency, adjacency.T) and adjacency.sum() == 8  # 4 hops, both ways
    small = schema_arrays([schema], ids, max_nodes=3, max_pairs=1, max_paths=2, max_hops=2)
    assert small["path_nodes"][0, 0].tolist() == [[1, 3, 2], [0, 0, 0]]  # "d" would not fit
    short = schema_arrays([schema], ids, max_nodes=4, max_pairs=1, max_paths=2, max_hops=1)
    assert not short["path_relations"].any()  # 2-hop paths do not fit in one hop
    assert schema_arrays([], ids)["graph_nodes"].shape == (0, 32)
    by_hand = SchemaGraph((("a", "c", graph.paths("a", "c")),))
    assert by_hand.nodes == ["a", "c", "b", "d"] == schema_graph(graph, ["a"], ["c"]).nodes
