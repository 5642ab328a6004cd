"""KagNet's schema graphs (Lin et al., 2019): the paths of up to three hops between a
statement's concepts and a choice's, over a knowledge graph's relations and their
inverses, and the arrays a `KagNet` model reads. Plain Python and numpy."""

import dataclasses
import itertools

import numpy as np

from keras_attn.api_export import keras_attn_export
from keras_attn.knowledge.wordnet import INVERSES


@keras_attn_export("keras_attn.knowledge.ConceptGraph", serializable=False)
class ConceptGraph:
    """Facts `(head, relation, tail)` as a graph walked both ways: each fact is an edge
    from head to tail labelled `relation` and one back labelled its inverse (WordNet's
    name for it, `hyponym` for `hypernym`, else `relation + "_inverse"`).

    Relation ids run from 1 (0 is padding in `schema_arrays`): the facts' relations in
    sorted order, then their inverses in the same order (`relation_names`).

    Args:
        facts: `(head, relation, tail)` triples (`WordNet.noun_facts()`).

    Call arguments:
        None: a graph to walk (`paths`, `neighbors`, `relation_names`).

    Example:

    >>> from keras_attn.knowledge import ConceptGraph
    >>> graph = ConceptGraph([("dog", "hypernym", "canine"),
    ...                       ("canine", "hypernym", "carnivore")])
    >>> [graph.describe(p) for p in graph.paths("dog", "carnivore")]
    ['dog -hypernym-> canine -hypernym-> carnivore']
    >>> [graph.describe(p) for p in graph.paths("carnivore", "dog")]
    ['carnivore -hyponym-> canine -hyponym-> dog']
    """

    def __init__(self, facts):
        facts = list(facts)
        kept = sorted({relation for _, relation, _ in facts})
        inverses = []
        for name in kept:  # a symmetric relation's way back is still told apart
            inverse = INVERSES.get(name)
            unusable = inverse is None or inverse == name or inverse in kept
            inverses.append(f"{name}_inverse" if unusable else inverse)
        self.relation_names = ["<pad>", *kept, *inverses]
        forward = {name: i + 1 for i, name in enumerate(kept)}
        backward = {name: i + 1 + len(kept) for i, name in enumerate(kept)}
        neighbors = {}
        for head, relation, tail in facts:
            neighbors.setdefault(head, {}).setdefault(tail, []).append(forward[relation])
            neighbors.setdefault(tail, {}).setdefault(head, []).append(backward[relation])
        self.neighbors = {
            node: {other: sorted(ids) for other, ids in sorted(near.items())}
            for node, near in neighbors.items()
        }
        self._sets = {node: set(near) for node, near in self.neighbors.items()}

    @property
    def num_relations(self):
        """Relation ids, both directions (padding not counted)."""
        return len(self.relation_names) - 1

    def paths(self, source, target, max_hops=3, max_paths=None):
        """The simple paths from `source` to `target` of at most `max_hops` hops,
        shortest first (then in a fixed order), at most `max_paths`: each a pair
        `(nodes, relation ids)`, `len(nodes) == len(relations) + 1`."""
        if max_hops not in (1, 2, 3):
            raise ValueError(f"Expected `max_hops` 1, 2 or 3. Received: max_hops={max_hops!r}")
        if source == target or source not in self.neighbors or target not in self.neighbors:
            return []
        found = []
        near = self.neighbors

        def add(nodes):
            steps = [near[a][b] for a, b in itertools.pairwise(nodes)]
            found.extend((tuple(nodes), rels) for rels in itertools.product(*steps))

        if target in near[source]:
            add([source, target])
        if max_hops >= 2:
            for middle in sorted(self._sets[source] & self._sets[target]):
                add([source, middle, target])
        if max_hops >= 3:
            for first in near[source]:
                if first == target:
                    continue
                for second in sorted(self._sets[first] & self._sets[target]):
                    if second != source:
                        add([source, first, second, target])
                if max_paths is not None and len(found) >= max_paths:
                    break
        return found[:max_paths]

    def describe(self, path):
        """A path as text: `dog -hypernym-> canine -hypernym-> carnivore`."""
        nodes, relations = path
        parts = [str(nodes[0])]
        for relation, node in zip(relations, nodes[1:], strict=True):
            parts.append(f"-{self.relation_names[relation]}-> {node}")
        return " ".join(parts)


@keras_attn_export("keras_attn.knowledge.SchemaGraph", serializable=False)
@dataclasses.dataclass(frozen=True)
class SchemaGraph:
    """A statement-choice pair's schema graph: for each (question concept, answer
    concept) pair, the paths between them (`ConceptGraph.paths`).

    Args:
        pairs: `((question concept, answer concept, paths), ...)`.

    Call arguments:
        None: a record (`nodes` lists its concepts in order of first appearance).

    Example:

    >>> from keras_attn.knowledge import ConceptGraph, schema_graph
    >>> graph = ConceptGraph([("dog", "hypernym", "canine"), ("canine", "hypernym", "carnivore")])
    >>> schema = schema_graph(graph, ["dog"], ["carnivore", "cat"])
    >>> schema.nodes, [len(paths) for _, _, paths in schema.pairs]
    (['dog', 'carnivore', 'canine', 'cat'], [1, 0])
    """

    pairs: tuple

    @property
    def nodes(self):
        nodes = {}
        for question, answer, paths in self.pairs:
            nodes.setdefault(question, None)
            nodes.setdefault(answer, None)
            for path_nodes, _ in paths:
                nodes.update(dict.fromkeys(path_nodes))
        return list(nodes)


@keras_attn_export("keras_attn.knowledge.schema_graph")
def schema_graph(graph, question_concepts, answer_concepts, max_hops=3, max_paths=16):
    """The `SchemaGraph` of every (question, answer) concept pair: the paths of up to
    `max_hops` hops between them in `graph` (a `ConceptGraph`), at most `max_paths` per
    pair, shortest first.

    Example:

    >>> from keras_attn.knowledge import ConceptGraph, schema_graph
    >>> graph = ConceptGraph([("a", "hypernym", "b"), ("b", "hypernym", "c")])
    >>> schema_graph(graph, ["a"], ["c"], max_hops=1).pairs
    (('a', 'c', []),)
    """
    return SchemaGraph(tuple(
        (question, answer, graph.paths(question, answer, max_hops, max_paths))
        for question in dict.fromkeys(question_concepts)
        for answer in dict.fromkeys(answer_concepts)
    ))  # fmt: skip


@keras_attn_export("keras_attn.knowledge.schema_arrays")
def schema_arrays(schemas, concept_ids, max_nodes=32, max_pairs=4, max_paths=16, max_hops=3):
    """`SchemaGraph`s as the arrays a `KagNet` model reads, one row each.

    Node positions in `pair_nodes` and `path_nodes` count from 1 into the row's
    `graph_nodes` (0: padding). A path that would bring the row over `max_nodes` nodes
    is left out, as are pairs past `max_pairs` and paths past `max_paths`; a concept
    `concept_ids` does not hold leaves its pairs out.

    Args:
        schemas: `SchemaGraph`s.
        concept_ids: `{concept: id}`, ids from 1 (the model's concept rows).
        max_nodes, max_pairs, max_paths, max_hops: the arrays' sizes.

    Returns:
        A dict of numpy arrays: `graph_nodes` `(n, max_nodes)` concept ids,
        `graph_adjacency` `(n, max_nodes, max_nodes)` (1 where a path's hop joins two
        nodes, both ways), `pair_nodes` `(n, max_pairs, 2)`, `path_nodes`
        `(n, max_pairs, max_paths, max_hops + 1)` and `path_relations`
        `(n, max_pairs, max_paths, max_hops)` (0 past a path's end).

    Example:

    >>> from keras_attn.knowledge import ConceptGraph, schema_arrays, schema_graph
    >>> graph = ConceptGraph([("a", "hypernym", "b"), ("b", "hypernym", "c")])
    >>> x = schema_arrays([schema_graph(graph, ["a"], ["c"])], {"a": 1, "b": 2, "c": 3},
    ...                   max_nodes=4, max_pairs=1, max_paths=2)
    >>> x["graph_nodes"].tolist(), x["path_nodes"][0, 0].tolist()
    ([[1, 3, 2, 0]], [[1, 3, 2, 0], [0, 0, 0, 0]])
    >>> x["path_relations"][0, 0].tolist()
    [[1, 1, 0], [0, 0, 0]]
    """
    schemas = list(schemas)
    n = len(schemas)
    out = {
        "graph_nodes": np.zeros((n, max_nodes), "int32"),
        "graph_adjacency": np.zeros((n, max_nodes, max_nodes), "float32"),
        "pair_nodes": np.zeros((n, max_pairs, 2), "int32"),
        "path_nodes": np.zeros((n, max_pairs, max_paths, max_hops + 1), "int32"),
        "path_relations": np.zeros((n, max_pairs, max_paths, max_hops), "int32"),
    }
    for row, schema in enumerate(schemas):
        _pack_row(schema, concept_ids, {k: v[row] for k, v in out.items()}, max_hops)
    return out


def _pack_row(schema, concept_ids, row, max_hops):
    """One schema graph into `row`, views of the arrays `schema_arrays` fills."""
    max_nodes = len(row["graph_nodes"])
    max_pairs, max_paths = row["path_nodes"].shape[:2]
    position = {}  # concept -> its place in graph_nodes, from 1

    def place(concepts):
        new = [c for c in dict.fromkeys(concepts) if c not in position]
        if len(position) + len(new) > max_nodes:
            return False
        for concept in new:
            position[concept] = len(position) + 1
            row["graph_nodes"][position[concept] - 1] = concept_ids[concept]
        return True

    pairs = [p for p in schema.pairs if p[0] in concept_ids and p[1] in concept_ids]
    for slot, (question, answer, paths) in enumerate(pairs[:max_pairs]):
        if not place([question, answer]):
            break
        row["pair_nodes"][slot] = position[question], position[answer]
        kept = 0
        for nodes, relations in paths:
            if kept == max_paths or len(relations) > max_hops:
                continue
            if not all(c in concept_ids for c in nodes) or not place(nodes):
                continue
            where = [position[c] for c in nodes]
            row["path_nodes"][slot, kept, : len(where)] = where
            row["path_relations"][slot, kept, : len(relations)] = relations
            for a, b in itertools.pairwise(where):
                row["graph_adjacency"][a - 1, b - 1] = row["graph_adjacency"][b - 1, a - 1] = 1.0
            kept += 1
