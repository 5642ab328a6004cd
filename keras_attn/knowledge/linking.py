"""Text to WordNet noun synsets: each mention's characters, its synset (the most frequent
sense by SemCor counts) and, given a tokenizer's offsets, its word pieces. Plain
Python: the data pipelines call it before tokenising."""

import dataclasses
import re

from keras_attn.api_export import keras_attn_export

# Words: letters, with inner apostrophes and hyphens ("don't", "well-known").
WORD = re.compile(r"[^\W\d_]+(?:['’-][^\W\d_]+)*")
NUMBERS = set(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
    "eighty ninety hundred thousand million billion first second third".split()
)
MODALS = set("can could may might must shall should will would ought need dare".split())
# Function words whose first noun sense is not the word meant ("he": helium, "it":
# information technology, "in": inch, "us": the United States, "does": female deer).
FUNCTION_WORDS = set(
    "a an the i me my mine we us our ours you your yours he him his she her hers it its they "
    "them their theirs this that these those who whom whose which what where when why how "
    "am is are was were be been being do does did done have has had having not no nor or and "
    "but if then than so as at by for from in into of off on onto out over to up upon with "
    "within without about above after again against all any both each few more most other "
    "some such only own same too very just also even ever yet still here there thee thou thy "
    "thine ye unto hath doth shalt wilt art let lo oh o".split()
)
CONTRACTIONS = re.compile(r"['’](t|re|ve|ll|d|m)$")  # a possessive 's keeps its stem
POSSESSIVE = re.compile(r"['’]s$")
STOP_WORDS = frozenset(NUMBERS | MODALS | FUNCTION_WORDS)


@keras_attn_export("keras_attn.knowledge.Mention", serializable=False)
@dataclasses.dataclass(frozen=True)
class Mention:
    """A span of text linked to a synset: characters `[start, end)`, the lemma it was
    read as, the synset (`"02084071-n"`).

    Args:
        start, end: the mention's characters in its text, `[start, end)`.
        lemma: the WordNet lemma it was read as (`"ice_cream"`).
        synset: the synset it is linked to.

    Call arguments:
        None: a record.

    Example:

    >>> from keras_attn.knowledge import Mention
    >>> text = "two geese"
    >>> mention = Mention(4, 9, "goose", "01855672-n")
    >>> text[mention.start : mention.end], mention.lemma
    ('geese', 'goose')
    """

    start: int
    end: int
    lemma: str
    synset: str


@keras_attn_export("keras_attn.knowledge.EntityLinker", serializable=False)
class EntityLinker:
    """Links nouns in text to WordNet synsets, as ERNIE links mentions to entities.

    Words are matched longest first (a WordNet lemma of up to `max_words` words, "ice
    cream" before "ice"), lower-cased and reduced to their base forms by WordNet's
    exception lists and suffix rules (`WordNet.morphy`: "geese" -> "goose", "boxes" ->
    "box"; a possessive's stem: "dog's" -> "dog"); a word of `stop_words` (modals,
    numbers, function words: their first sense is not the one meant) or a contraction
    is never a mention, nor a single word SemCor tags more often as a verb, adjective or
    adverb than as a noun ("ate", "wait": there is no part-of-speech tagger here, and
    WordNet's sense counts are the evidence it has). Each mention takes the
    lemma's most frequent noun sense by SemCor counts (WordNet's sense order breaks
    ties), or only senses in `synsets` when given (the entities a model knows).

    Args:
        wordnet: a `WordNet`.
        max_words: the longest lemma matched, in words.
        stop_words: lower-case words never linked.
        synsets: optional collection of synset ids to link to (others are skipped).

    Call arguments:
        text: a string.

    Returns:
        The `Mention`s in `text`, in order, none overlapping.

    Example:

    >>> from keras_attn.knowledge import EntityLinker, WordNet
    >>> linker = EntityLinker(WordNet.load())
    >>> [(m.lemma, m.synset) for m in linker("The geese ate ice cream; it can wait.")]
    [('goose', '01855672-n'), ('ice_cream', '07614500-n')]
    """

    def __init__(self, wordnet, max_words=3, stop_words=STOP_WORDS, synsets=None):
        if not isinstance(max_words, int) or max_words < 1:
            raise ValueError(f"Expected `max_words` an int >= 1. Received: {max_words!r}")
        self.wordnet = wordnet
        self.max_words = max_words
        self.stop_words = frozenset(stop_words)
        self.synsets = None if synsets is None else frozenset(synsets)

    def sense(self, lemma):
        """The most frequent noun sense of a base form `lemma`, or `None`."""
        senses = self.wordnet.index.get((lemma, "n"), [])
        if self.synsets is not None:
            senses = [s for s in senses if s in self.synsets]
        if not senses:
            return None
        counts = self.wordnet.sense_counts
        return max(senses, key=lambda s: (counts.get((lemma, s), 0), -senses.index(s)))

    def _tagged(self, word, pos):
        """How often SemCor tags `word`'s senses as `pos` (its base forms' senses)."""
        counts = self.wordnet.sense_counts
        return sum(
            counts.get((base, s), 0)
            for base in self.wordnet.morphy(word, pos)
            for s in self.wordnet.index[(base, pos)]
        )

    def _allowed(self, words):
        """Whether a run of words may be a mention before its senses are read: a single
        word that is no stop word or contraction and that SemCor does not tag more
        often as a verb, adjective or adverb than as a noun."""
        if len(words) != 1:
            return True
        word = words[0]
        if word in self.stop_words or CONTRACTIONS.search(word):
            return False
        noun = self._tagged(word, "n")
        return not any(self._tagged(word, pos) > noun for pos in ("v", "a", "r"))

    def _lemma(self, words):
        """The base form of a run of words, if WordNet has one as a noun."""
        if not self._allowed(words):
            return None
        joined = "_".join(words)
        for base in self.wordnet.morphy(joined, "n"):
            if self.sense(base) is not None:
                return base
        return None

    def surface_forms(self):
        """`{form: synset}`: every lower-case form this linker links on its own (the
        words of a lemma joined by `_`, inflected as WordNet's exception lists and
        detachment rules read them back), and the synset it links it to. A table of
        these is the linker in a graph (`keras_attn.data.GraphLinker`): each form is
        decided as `_lemma` decides it, so the table agrees with the linker."""
        table = {}
        for form, bases in self._form_bases().items():
            for base in bases:  # `_lemma`'s loop: the first base form with a sense
                synset = self.sense(base)
                if synset is not None:
                    table[form] = synset
                    break
        return table

    def _form_bases(self):
        """`{form: morphy's base forms}` of the forms `_lemma` does not refuse before
        reading senses (stop words, contractions, words tagged more often as another
        part of speech); the same for every linker of these settings, so kept on the
        WordNet (4 s to make)."""
        from keras_attn.knowledge.wordnet import SUFFIXES

        key = (self.max_words, self.stop_words)
        cache = self.wordnet.__dict__.setdefault("_linker_form_bases", {})
        if key in cache:
            return cache[key]

        def inflected(lemma):
            yield lemma
            for suffix, ending in SUFFIXES["n"]:
                if lemma.endswith(ending):
                    yield lemma[: len(lemma) - len(ending)] + suffix

        lemmas = [lemma for lemma, pos in self.wordnet.index if pos == "n"]
        forms = {f for lemma in lemmas for f in inflected(lemma)}
        forms.update(form for form, pos in self.wordnet.exceptions if pos == "n")
        forms.update(  # morphy's "-ful" rule: "boxesful" -> "boxful"
            f + "ful" for lemma in lemmas if lemma.endswith("ful") for f in inflected(lemma[:-3])
        )
        bases = {}
        for form in sorted(forms):
            words = form.split("_")
            if len(words) <= self.max_words and self._allowed(words):
                found = self.wordnet.morphy(form, "n")
                if found:
                    bases[form] = found
        cache[key] = bases
        return bases

    def __call__(self, text):
        """The mentions in `text` (a string), in order, none overlapping."""
        if not isinstance(text, str):
            raise TypeError(f"Expected `text` a string. Received: {type(text).__name__}")
        words = []
        for match in WORD.finditer(text):
            word = match.group().lower().replace("’", "'")
            cut = len(word) - 2 if POSSESSIVE.search(word) else len(word)
            words.append((match.start(), match.start() + cut, word[:cut]))
        mentions, i = [], 0
        while i < len(words):
            for size in range(min(self.max_words, len(words) - i), 0, -1):
                run = words[i : i + size]
                if any(run[k + 1][0] - run[k][1] != 1 for k in range(size - 1)):
                    continue  # the words of a lemma are one space apart
                lemma = self._lemma([w for _, _, w in run])
                if lemma is not None:
                    mentions.append(Mention(run[0][0], run[-1][1], lemma, self.sense(lemma)))
                    i += size
                    break
            else:
                i += 1
        return mentions


@keras_attn_export("keras_attn.knowledge.align_mentions")
def align_mentions(text, mentions, piece_starts, piece_ends):
    """Each mention's word pieces: `[(first piece, last piece)]`, from the pieces' UTF-8
    byte offsets in `text` (a tokenizer's `tokenize_with_offsets`); `None` for a
    mention no piece covers (cut off by the sequence length).

    Example:

    >>> from keras_attn.knowledge import Mention, align_mentions
    >>> align_mentions("an ice cream", [Mention(3, 12, "ice_cream", "07614500-n")],
    ...                [0, 3, 7], [2, 6, 12])
    [(1, 2)]
    """
    spans = []
    for mention in mentions:
        start = len(text[: mention.start].encode("utf-8"))
        end = len(text[: mention.end].encode("utf-8"))
        inside = [
            i for i, (s, e) in enumerate(zip(piece_starts, piece_ends, strict=True))
            if s < end and e > start
        ]  # fmt: skip
        spans.append((inside[0], inside[-1]) if inside else None)
    return spans
