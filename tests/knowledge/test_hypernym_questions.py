"""KagNet's miniature questions: the answer two or three hops up, distractors of its
lexicographer file and depth that are never X's ancestors (and, asked, joined to X by a
path as the answer is), and a split where no test answer is a training answer."""

import pytest

from keras_attn.knowledge import (
    ConceptGraph,
    HypernymQuestion,
    WordNet,
    hypernym_questions,
    split_by_answer,
)
from keras_attn.knowledge.hypernym_questions import _ancestors

pytestmark = pytest.mark.xdist_group("wordnet")


@pytest.fixture(scope="module")
def wordnet():
    return WordNet.load()


def test_questions_follow_the_design(wordnet):
    pool = [s for s in sorted(wordnet.lexname) if wordnet.pos[s] == "n"][::20]
    questions = hypernym_questions(wordnet, pool, num_choices=5, seed=3)
    assert len(questions) > 300 and {q.hops for q in questions} == {2, 3}
    graph = ConceptGraph(wordnet.noun_facts())
    joined = hypernym_questions(wordnet, pool, num_choices=5, seed=3, graph=graph)
    assert 0 < len(joined) < len(questions)
    for question in questions[:60] + joined[:60]:
        up = _ancestors(wordnet, question.concept)
        answer = question.choices[question.answer]
        assert up[answer] == question.hops and len(set(question.choices)) == 5
        for choice in question.choices:
            assert choice in pool and wordnet.lexname[choice] == wordnet.lexname[answer]
            if choice != answer:
                assert choice not in up and choice != question.concept
    for question in joined[:60]:
        assert all(graph.paths(question.concept, c, 3, 1) for c in question.choices)
    assert hypernym_questions(wordnet, pool, seed=3) == questions  # the seed decides
    text = HypernymQuestion("02084071-n", ("02075296-n",), 0, 2).statement(wordnet, 0)
    assert text == "a dog is a kind of carnivore"
    with pytest.raises(ValueError, match="`num_choices` an int >= 2"):
        hypernym_questions(wordnet, pool, num_choices=1)
    with pytest.raises(ValueError, match="`hops` among 1, 2 and 3"):
        hypernym_questions(wordnet, pool, hops=(4,))


def test_no_test_answer_is_a_training_answer():
    questions = [HypernymQuestion(f"x{i}", (f"a{i % 7}", "b", "c"), 0, 2) for i in range(70)]
    train, test = split_by_answer(questions, 0.3, seed=1)
    assert len(train) + len(test) == 70 and test
    assert not {q.choices[0] for q in train} & {q.choices[0] for q in test}
    assert split_by_answer(questions, 0.3, seed=1) == (train, test)
    with pytest.raises(ValueError, match="`test_fraction` in \\(0, 1\\)"):
        split_by_answer(questions, 1.0)
