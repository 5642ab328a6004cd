"""KagNet in miniature (the second of two): "a X is a kind of ___", five
choices, the answer a hypernym two or three hops up, distractors of the answer's
lexicographer file and depth that are not X's ancestors."""

import dataclasses

import numpy as np

from keras_attn.api_export import keras_attn_export

UP = ("hypernym", "instance_hypernym")


@keras_attn_export("keras_attn.knowledge.HypernymQuestion", serializable=False)
@dataclasses.dataclass(frozen=True)
class HypernymQuestion:
    """ "a X is a kind of ___": the concept X, the choices (synsets), the answer's index
    among them and its distance up the hypernym tree.

    Args:
        concept: X's synset.
        choices: the choices' synsets.
        answer: the index of the right one.
        hops: how far above X it is (2 or 3).

    Call arguments:
        None: a record (`statement(wordnet, i)` is choice `i`'s text).

    Example:

    >>> from keras_attn.knowledge import HypernymQuestion, WordNet
    >>> question = HypernymQuestion("02084071-n", ("02075296-n", "00015388-n"), 0, 2)
    >>> question.statement(WordNet.load(), 0)
    'a dog is a kind of carnivore'
    """

    concept: str
    choices: tuple
    answer: int
    hops: int

    def statement(self, wordnet, choice):
        """Choice `choice`'s statement: `"a X is a kind of Y"` with the first lemmas."""
        x, y = (self.concept, self.choices[choice])
        x, y = (wordnet.lemmas[s][0].replace("_", " ") for s in (x, y))
        return f"a {x} is a kind of {y}"


def _ancestors(wordnet, synset):
    """`{ancestor: distance}` up hypernym and instance-hypernym links (the shortest)."""
    distance, frontier = {}, [synset]
    for step in range(1, 64):
        frontier = sorted({up for s in frontier for r in UP for up in wordnet.related(s, r)}
                          - distance.keys() - {synset})  # fmt: skip
        if not frontier:
            break
        distance.update(dict.fromkeys(frontier, step))
    return distance


@keras_attn_export("keras_attn.knowledge.hypernym_questions")
def hypernym_questions(wordnet, synsets, num_choices=5, hops=(2, 3), seed=0, graph=None):
    """One `HypernymQuestion` per noun synset of `synsets` (those a corpus mentions)
    that has an ancestor exactly `hops` up (its shortest distance) among `synsets`.

    The answer is drawn among those ancestors; the `num_choices - 1` distractors among
    `synsets` of the answer's lexicographer file and depth (distance to the root) within
    one, never X or an ancestor of X. With `graph` (a `ConceptGraph`), only distractors
    within three hops of X, as the answer is: then that a path joins X and a choice
    tells nothing, only what the path says does. A synset with too few distractors asks
    nothing.

    Args:
        wordnet: a `WordNet`.
        synsets: the synsets questions and choices come from.
        num_choices: choices per question (>= 2).
        hops: the answer's allowed distances above X.
        seed: the draws' seed.
        graph: optional `ConceptGraph`: distractors joined to X by a path.

    Returns:
        A list of `HypernymQuestion`s, in `synsets`' sorted order.

    Example:

    >>> from keras_attn.knowledge import WordNet, hypernym_questions
    >>> wordnet = WordNet.load()
    >>> pool = [s for s in wordnet.lexname if wordnet.lexname[s] == "noun.animal"][:3000]
    >>> pool += ["02084071-n", "02075296-n"]  # dog, carnivore
    >>> questions = hypernym_questions(wordnet, pool, num_choices=3, seed=0)
    >>> dog = next(q for q in questions if q.concept == "02084071-n")
    >>> len(dog.choices), dog.hops, dog.choices[dog.answer] in ("02075296-n", "01886756-n")
    (3, 2, True)
    """
    if not isinstance(num_choices, int) or num_choices < 2:
        raise ValueError(f"Expected `num_choices` an int >= 2. Received: {num_choices!r}")
    if not hops or any(h not in (1, 2, 3) for h in hops):
        raise ValueError(f"Expected `hops` among 1, 2 and 3. Received: hops={hops!r}")
    pool = sorted({s for s in synsets if wordnet.pos.get(s) == "n"})
    ancestors = {s: _ancestors(wordnet, s) for s in pool}
    depth = {}  # the shortest distance to a root
    for s, up in ancestors.items():
        tops = [up[a] for a in up if not any(wordnet.related(a, r) for r in UP)]
        depth[s] = min(tops, default=0)
    by_class = {}
    for s in pool:
        by_class.setdefault((wordnet.lexname[s], depth[s]), []).append(s)
    rng = np.random.default_rng(seed)
    questions = []
    in_pool = set(pool)
    for concept in pool:
        up = ancestors[concept]
        options = sorted(a for a, d in up.items() if d in hops and a in in_pool)
        if not options:
            continue
        answer = options[rng.integers(len(options))]
        near = [s for d in (-1, 0, 1)
                for s in by_class.get((wordnet.lexname[answer], depth[answer] + d), [])
                if s != concept and s not in up]  # fmt: skip
        if graph is not None:
            near = _joined(graph, concept, [near[i] for i in rng.permutation(len(near))],
                           num_choices - 1)  # fmt: skip
        if len(near) < num_choices - 1:
            continue
        choices = [near[i] for i in rng.choice(len(near), num_choices - 1, replace=False)]
        where = int(rng.integers(num_choices))
        choices.insert(where, answer)
        questions.append(HypernymQuestion(concept, tuple(choices), where, up[answer]))
    return questions


def _joined(graph, concept, candidates, wanted):
    """The first `wanted` of `candidates` within three hops of `concept` in `graph`."""
    near = graph.neighbors.get(concept, {})
    two = set(near).union(*(graph.neighbors[n] for n in near)) - {concept}
    found = []
    for candidate in candidates:
        if candidate in two or not two.isdisjoint(graph.neighbors.get(candidate, ())):
            found.append(candidate)
            if len(found) == wanted:
                break
    return found


@keras_attn_export("keras_attn.knowledge.split_by_answer")
def split_by_answer(questions, test_fraction=0.2, seed=0):
    """`(train, test)`: the questions whose answer is one of a `test_fraction` of the
    answers (drawn with `seed`) are `test`, so no test answer is ever a training one.

    Example:

    >>> from keras_attn.knowledge import HypernymQuestion, split_by_answer
    >>> questions = [HypernymQuestion(f"x{i}", (f"a{i % 5}", "b"), 0, 2) for i in range(20)]
    >>> train, test = split_by_answer(questions, 0.2, seed=0)
    >>> len(train), len(test), {q.choices[0] for q in train} & {q.choices[0] for q in test}
    (16, 4, set())
    """
    if not 0 < test_fraction < 1:
        raise ValueError(f"Expected `test_fraction` in (0, 1). Received: {test_fraction!r}")
    answers = sorted({q.choices[q.answer] for q in questions})
    rng = np.random.default_rng(seed)
    test_answers = set(rng.permutation(answers)[: max(1, round(test_fraction * len(answers)))])
    train = [q for q in questions if q.choices[q.answer] not in test_answers]
    test = [q for q in questions if q.choices[q.answer] in test_answers]
    return train, test
