"""Supersense typing in context (the first of two miniatures): mentions of nouns whose
every WordNet sense shares one lexicographer file, so the label is right whichever
sense is meant; split by lemma so test lemmas never occur in training."""

import dataclasses

import numpy as np

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.knowledge.TypingExample", serializable=False)
@dataclasses.dataclass(frozen=True)
class TypingExample:
    """One mention to type: its text, characters `[start, end)`, lemma, linked synset
    and label (the lemma's lexicographer file, `noun.animal`).

    Args:
        text: the sentence.
        start, end: the mention's characters, `[start, end)`.
        lemma: its WordNet lemma.
        synset: the synset it is linked to.
        label: the lemma's lexicographer file.

    Call arguments:
        None: a record.

    Example:

    >>> from keras_attn.knowledge import TypingExample
    >>> example = TypingExample("a giraffe", 2, 9, "giraffe", "02439033-n", "noun.animal")
    >>> example.text[example.start : example.end], example.label
    ('giraffe', 'noun.animal')
    """

    text: str
    start: int
    end: int
    lemma: str
    synset: str
    label: str


@keras_attn_export("keras_attn.knowledge.single_class_lemmas")
def single_class_lemmas(wordnet):
    """`{lemma: lexname}` of the noun lemmas whose noun senses all share one
    lexicographer file (107,027 of WordNet's 117,798 noun lemmas; 26 classes).

    Example:

    >>> from keras_attn.knowledge import WordNet, single_class_lemmas
    >>> classes = single_class_lemmas(WordNet.load())
    >>> classes["giraffe"], "goose" in classes  # a goose is also food and a person
    ('noun.animal', False)
    """
    classes = {}
    for (lemma, pos), synsets in wordnet.index.items():
        if pos == "n":
            names = {wordnet.lexname[s] for s in synsets}
            if len(names) == 1:
                classes[lemma] = names.pop()
    return classes


@keras_attn_export("keras_attn.knowledge.typing_examples")
def typing_examples(texts, linker, classes):
    """The mentions in `texts` (strings) that `linker` links to a lemma of `classes`
    (`single_class_lemmas`), one `TypingExample` each, in order.

    Example:

    >>> from keras_attn.knowledge import EntityLinker, WordNet, single_class_lemmas
    >>> from keras_attn.knowledge import typing_examples
    >>> wordnet = WordNet.load()
    >>> found = typing_examples(["The geese and a giraffe walked by the seashore."],
    ...                         EntityLinker(wordnet), single_class_lemmas(wordnet))
    >>> [(e.lemma, e.label) for e in found]  # not "goose": three lexnames
    [('giraffe', 'noun.animal'), ('seashore', 'noun.object')]
    """
    examples = []
    for text in texts:
        for mention in linker(text):
            label = classes.get(mention.lemma)
            if label is not None:
                examples.append(
                    TypingExample(text, mention.start, mention.end, mention.lemma,
                                  mention.synset, label)
                )  # fmt: skip
    return examples


@keras_attn_export("keras_attn.knowledge.split_by_lemma")
def split_by_lemma(examples, unseen_fraction=0.2, seen_fraction=0.1, seed=0):
    """`{"train", "unseen", "seen"}`: the examples of a `unseen_fraction` of the
    lemmas (drawn with `seed`) are `unseen` (never in training); of the other lemmas'
    examples, those in a `seen_fraction` of the texts are `seen` (held-out sentences
    of lemmas trained on), and no text of `seen` or `unseen` is in `train`.

    Example:

    >>> from keras_attn.knowledge import TypingExample, split_by_lemma
    >>> examples = [TypingExample(f"text {i}", 0, 4, f"lemma{i % 10}", "", "noun.act")
    ...             for i in range(100)]
    >>> parts = split_by_lemma(examples, 0.2, 0.1, seed=0)
    >>> {k: len(v) for k, v in parts.items()}
    {'train': 72, 'unseen': 20, 'seen': 8}
    """
    for name, value in (("unseen_fraction", unseen_fraction), ("seen_fraction", seen_fraction)):
        if not 0 <= value < 1:
            raise ValueError(f"Expected `{name}` in [0, 1). Received: {name}={value!r}")
    rng = np.random.default_rng(seed)
    lemmas = sorted({e.lemma for e in examples})
    unseen_lemmas = set(rng.permutation(lemmas)[: round(unseen_fraction * len(lemmas))])
    unseen = [e for e in examples if e.lemma in unseen_lemmas]
    unseen_texts = {e.text for e in unseen}
    texts = sorted({e.text for e in examples if e.lemma not in unseen_lemmas} - unseen_texts)
    seen_texts = set(rng.permutation(texts)[: round(seen_fraction * len(texts))])
    train, seen = [], []
    for e in examples:
        if e.lemma in unseen_lemmas:
            continue
        if e.text in seen_texts:
            seen.append(e)
        elif e.text not in unseen_texts:
            train.append(e)
    return {"train": train, "unseen": unseen, "seen": seen}


@keras_attn_export("keras_attn.knowledge.linking_coverage")
def linking_coverage(texts, linker):
    """How much of `texts` `linker` links: `texts`, `linked_texts` (with a mention),
    `mentions`, `words`, `linked_words` (the words inside mentions).

    Example:

    >>> from keras_attn.knowledge import EntityLinker, WordNet, linking_coverage
    >>> counts = linking_coverage(["A giraffe ate ice cream.", "So it was."],
    ...                           EntityLinker(WordNet.load()))
    >>> counts["linked_texts"], counts["mentions"], counts["linked_words"], counts["words"]
    (1, 2, 3, 8)
    """
    from keras_attn.knowledge.linking import WORD

    counts = dict(texts=0, linked_texts=0, mentions=0, words=0, linked_words=0)
    for text in texts:
        mentions = linker(text)
        counts["texts"] += 1
        counts["linked_texts"] += bool(mentions)
        counts["mentions"] += len(mentions)
        counts["words"] += len(WORD.findall(text))
        counts["linked_words"] += sum(len(WORD.findall(text[m.start : m.end])) for m in mentions)
    return counts
