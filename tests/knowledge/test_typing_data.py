"""The supersense-typing data (issue 60, miniature 1): lemmas whose senses share one
lexname, mentions from text, a split where test lemmas never meet training and held-out
sentences never appear in it; linking coverage counted as the closing note reports it."""

import pytest

from keras_attn.knowledge import (
    EntityLinker,
    TypingExample,
    WordNet,
    linking_coverage,
    single_class_lemmas,
    split_by_lemma,
    typing_examples,
)

pytestmark = pytest.mark.xdist_group("wordnet")


@pytest.fixture(scope="module")
def wordnet():
    return WordNet.load()


def test_lemmas_of_one_class_and_their_mentions(wordnet):
    classes = single_class_lemmas(wordnet)
    assert len(classes) == 107_027 and len(set(classes.values())) == 26
    assert "goose" not in classes and classes["giraffe"] == "noun.animal"
    texts = ["A giraffe and two geese by the seashore.", "It was not so, sadly?"]
    found = typing_examples(texts, EntityLinker(wordnet), classes)
    assert [(e.text[e.start : e.end], e.label) for e in found] == [
        ("giraffe", "noun.animal"),
        ("seashore", "noun.object"),
    ]
    counts = linking_coverage(texts, EntityLinker(wordnet))
    assert counts["texts"] == 2 and counts["mentions"] == counts["linked_words"] >= 3
    assert counts["words"] == 13 and counts["linked_texts"] == 1


def test_the_split_keeps_test_lemmas_and_held_out_texts_out_of_training():
    examples = [
        TypingExample(f"text {i % 37}", 0, 4, f"lemma{i % 11}", "", "noun.act") for i in range(300)
    ]
    parts = split_by_lemma(examples, unseen_fraction=0.3, seen_fraction=0.2, seed=1)
    assert sum(len(p) for p in parts.values()) <= len(examples)
    lemmas = {name: {e.lemma for e in part} for name, part in parts.items()}
    texts = {name: {e.text for e in part} for name, part in parts.items()}
    assert not lemmas["unseen"] & lemmas["train"] and lemmas["seen"] <= lemmas["train"]
    assert not texts["train"] & (texts["seen"] | texts["unseen"])
    assert parts == split_by_lemma(examples, 0.3, 0.2, seed=1)  # the seed decides
    with pytest.raises(ValueError, match="`unseen_fraction` in \\[0, 1\\)"):
        split_by_lemma(examples, unseen_fraction=1.0)
