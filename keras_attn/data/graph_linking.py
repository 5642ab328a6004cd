"""ERNIE's entity linking inside a TensorFlow graph: a table from word forms to entity
ids, matched longest first as `EntityLinker` matches, so a SavedModel or a tf.data
pipeline links raw text with no Python."""

import itertools
import pathlib

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attn.api_export import keras_attn_export

# `keras_attn.knowledge.linking.WORD` in RE2: Python's `[^\W\d_]` is a letter or a
# numeric character that is not a decimal digit.
LETTER = r"[\pL\p{Nl}\p{No}]"
WORD = rf"{LETTER}+(?:['’-]{LETTER}+)*"


# Beside a run's entities.txt: its SHA-256, written with it and checked when it is read.
DIGEST_FILE = "entities.sha256"
# The most of an entities.txt read to check its digest (WordNet has 117,659 synsets of
# 11 characters and a newline: 1.4 MB).
_MAX_ENTITIES_BYTES = 64 << 20


def _digest(data):
    import hashlib

    return hashlib.sha256(data).hexdigest()


def _check_digest(path):
    """A `ValueError` if `path`'s SHA-256 is not the one recorded beside it (when one is)."""
    recorded = path.with_name(DIGEST_FILE)
    if not recorded.is_file():
        return
    try:
        expected = recorded.read_text(encoding="ascii").strip()
        with open(path, "rb") as handle:
            data = handle.read(_MAX_ENTITIES_BYTES + 1)
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"Expected a readable {path} and {recorded}: {error}") from None
    if len(data) > _MAX_ENTITIES_BYTES or _digest(data) != expected:
        raise ValueError(
            f"{path} is not the file its run wrote (its SHA-256 differs from {recorded}): "
            "its synsets' order is the entity table's, and a changed order would link words "
            "to other synsets' rows"
        )


@keras_attn_export("keras_attn.data.GraphLinker", serializable=False)
class GraphLinker(tf.Module):
    """`EntityLinker` as a graph: its mentions of raw text, in TensorFlow ops.

    Every form the linker links (`EntityLinker.surface_forms`: lemmas and their
    inflections, multi-word ones joined by `_`) goes into a hash table to its entity
    id; in the graph, words are found with the linker's pattern, lower-cased, a
    possessive's `'s` cut, and runs of up to `max_words` words one character apart are
    looked up longest first, left to right, none overlapping: the linker's own rules,
    so the two agree (tested on the KJV and Rotten Tomatoes). A `tf.Module`: a
    SavedModel that holds it carries the table.

    Args:
        linker: an `EntityLinker`.
        entity_ids: `{synset: id}`, ids from 1 (a model's entity rows); forms of other
            synsets are not linked.

    Call arguments:
        text: string tensor `(batch,)`.

    Returns:
        A dict of RaggedTensors `(batch, (mentions))`: `starts` and `ends` (UTF-8 byte
        offsets; the end before a possessive's `'s`) and `entity_ids` (int32).

    Example:

    >>> from keras_attn.data import GraphLinker
    >>> from keras_attn.knowledge import EntityLinker, WordNet
    >>> ids = {"01855672-n": 1, "07614500-n": 2}  # goose, ice cream
    >>> linker = GraphLinker(EntityLinker(WordNet.load(), synsets=ids), ids)
    >>> out = linker(["The geese ate ice cream."])
    >>> out["entity_ids"].to_list(), out["starts"].to_list(), out["ends"].to_list()
    ([[1, 2]], [[4, 14]], [[9, 23]])
    """

    def __init__(self, linker, entity_ids, name=None):
        super().__init__(name=name)
        forms = {f: entity_ids[s] for f, s in linker.surface_forms().items() if s in entity_ids}
        if not forms:
            raise ValueError(
                "Expected `entity_ids` to hold some synset the linker links. Received: "
                f"{len(entity_ids)} ids, none linked"
            )
        keys = sorted(forms)
        self.max_words = linker.max_words
        self.num_entities = max(entity_ids.values())
        # The synsets in id order (what a trained model's `entities.txt` lists).
        self.entities = tuple(sorted(entity_ids, key=entity_ids.get))
        self.license = linker.wordnet.license  # its notice goes with what is derived
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys), tf.constant([forms[k] for k in keys], tf.int32)
            ),
            default_value=0,
        )

    @classmethod
    def from_entities(cls, entities, num_entities=None):
        """The linker of WordNet's forms of `entities`: the synsets of a model's entity
        ids 1, 2, ... in order, a list or a file of one per line (a run's `entities.txt`,
        what `save_assets` writes).

        `num_entities`: the model's entity rows; the list must have exactly as many.
        A line that is not one of WordNet 3.0's synsets, a synset twice, or a count
        that is not the model's raises a `ValueError` naming it: links to the wrong
        rows would be a silently wrong model; so does a file that cannot be read, and
        one whose SHA-256 differs from the `DIGEST_FILE` beside it (two synsets
        swapped would link each word to the other's row). A file is read no further
        than one line past the count."""
        from keras_attn.knowledge import EntityLinker, WordNet

        where = "entities"
        if isinstance(entities, (str, pathlib.Path)):
            where = str(entities)
            _check_digest(pathlib.Path(entities))
            limit = None if num_entities is None else num_entities + 1
            try:
                with open(entities, encoding="utf-8") as f:
                    entities = [line.strip() for line in itertools.islice(f, limit)]
            except (OSError, UnicodeDecodeError) as error:
                raise ValueError(
                    f"Expected a readable file of synsets, one per line. Received: {where}: "
                    f"{getattr(error, 'strerror', None) or error}"
                ) from None
            while entities and not entities[-1]:
                entities.pop()
        entities = list(entities)
        if num_entities is not None and len(entities) != num_entities:
            found = f"more than {num_entities}" if len(entities) > num_entities else len(entities)
            raise ValueError(
                f"Expected {num_entities} synsets in {where}, one per row of the model's "
                f"entity table (its ids 1..{num_entities}). Received: {found}"
            )
        wordnet = WordNet.load()
        ids = {}
        for row, synset in enumerate(entities, start=1):
            if synset not in wordnet.pos:
                raise ValueError(
                    f"Expected WordNet 3.0 synset ids (as '01855672-n') in {where}. "
                    f"Received: {synset[:40]!r} at row {row}"
                )
            if ids.setdefault(synset, row) != row:
                raise ValueError(
                    f"Expected each synset once in {where}. Received: {synset!r} at rows "
                    f"{ids[synset]} and {row}"
                )
        return cls(EntityLinker(wordnet, synsets=ids), ids)

    def save_assets(self, folder):
        """Writes `entities.txt` (the synsets in id order, what the `entities` export
        option and `from_entities` read), its SHA-256 (`DIGEST_FILE`, which
        `from_entities` checks) and `WORDNET_LICENSE` (its notice goes with derived
        data)."""
        folder = pathlib.Path(folder)
        text = "\n".join(self.entities) + "\n"
        (folder / "entities.txt").write_text(text, encoding="utf-8")
        (folder / DIGEST_FILE).write_text(_digest(text.encode("utf-8")) + "\n", encoding="utf-8")
        (folder / "WORDNET_LICENSE").write_text(self.license, encoding="utf-8")

    def __call__(self, text):
        text = tf.convert_to_tensor(text, tf.string)
        pieces, starts, ends = tf_text.regex_split_with_offsets(text, WORD, WORD)
        is_word = tf.strings.regex_full_match(pieces, WORD)
        words, starts = (tf.ragged.boolean_mask(t, is_word) for t in (pieces, starts))
        starts = tf.cast(starts, tf.int32)
        # The possessive's 's is cut (as the linker does, on the lower-cased word).
        cut = tf.strings.regex_replace(words, "['’][sS]$", "")
        ends = starts + tf.strings.length(cut)
        forms = tf.strings.regex_replace(tf.strings.lower(cut, encoding="utf-8"), "’", "'")
        forms, starts, ends = (t.to_tensor() for t in (forms, starts, ends))
        batch, count = tf.shape(forms)[0], tf.shape(forms)[1]
        present = tf.sequence_mask(words.row_lengths(), count)
        # A run of words joins only where each gap is one character.
        gap = tf.strings.substr(text[:, None], ends[:, :-1], starts[:, 1:] - ends[:, :-1])
        joined = tf.concat([tf.strings.length(gap, unit="UTF8_CHAR") == 1,
                            tf.zeros([batch, 1], tf.bool)], axis=1)[:, :count]  # fmt: skip
        best_size = tf.zeros([batch, count], tf.int32)
        best_id = tf.zeros([batch, count], tf.int32)
        for size in range(self.max_words, 0, -1):
            key, ok = forms, present
            for k in range(1, size):  # words i .. i + size - 1
                key = key + "_" + _shifted(forms, k, "")
                ok = ok & _shifted(present, k, False) & _shifted(joined, k - 1, False)
            found = tf.where(ok, self.table.lookup(key), 0)
            take = (found > 0) & (best_size == 0)
            best_size = tf.where(take, size, best_size)
            best_id = tf.where(take, found, best_id)

        # Left to right: a word inside a mention taken before starts none.
        def step(next_free, column):
            position, size = column
            take = (size > 0) & (position >= next_free)
            return tf.where(take, position + size, next_free), take

        positions = tf.range(count)
        # One column more than the words: a scan over none (no word in the batch, or
        # an empty batch) cannot stack its outputs.
        sizes = tf.concat([best_size, tf.zeros([batch, 1], tf.int32)], axis=1)
        _, taken = tf.scan(
            lambda carry, column: step(carry[0], column),
            (tf.range(count + 1), tf.transpose(sizes)),
            initializer=(tf.zeros([batch], tf.int32), tf.zeros([batch], tf.bool)),
        )
        taken = tf.transpose(taken)[:, :count]
        last = tf.minimum(positions[None, :] + best_size - 1, count - 1)
        mention_ends = tf.gather(ends, tf.maximum(last, 0), batch_dims=1)
        return {
            "starts": tf.ragged.boolean_mask(starts, taken),
            "ends": tf.ragged.boolean_mask(mention_ends, taken),
            "entity_ids": tf.ragged.boolean_mask(best_id, taken),
        }


def _shifted(values, k, fill):
    """`values[:, i + k]` at `i` (`fill` past the end), `(batch, words)`."""
    pad = tf.fill([tf.shape(values)[0], k], tf.constant(fill, values.dtype))
    return tf.concat([values[:, k:], pad], axis=1)[:, : tf.shape(values)[1]]


@keras_attn_export("keras_attn.data.piece_entities")
def piece_entities(tokenizer, linker, text):
    """Each word piece's entity: a linked mention's id at its first piece, 0 elsewhere,
    aligned with `tokenizer.tokenize(text)` (ERNIE's alignment, in the graph).

    Args:
        tokenizer: a `WordPieceTokenizer`.
        linker: a `GraphLinker`.
        text: string tensor `(batch,)`.

    Returns:
        A RaggedTensor `(batch, (pieces))` of int32 entity ids.

    Example:

    >>> from keras_attn.data import GraphLinker, WordPieceTokenizer, piece_entities
    >>> from keras_attn.knowledge import EntityLinker, WordNet
    >>> ids = {"01855672-n": 1, "07614500-n": 2}  # goose, ice cream
    >>> linker = GraphLinker(EntityLinker(WordNet.load(), synsets=ids), ids)
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "gee", "##se", "ice", "cream"]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=8)
    >>> piece_entities(tokenizer, linker, ["geese ice cream"]).to_list()
    [[1, 0, 2, 0]]
    """
    text = tf.convert_to_tensor(text, tf.string)
    ids, starts, ends = tokenizer.tokenize_with_offsets(text)
    starts, ends = (tf.cast(t, tf.int32) for t in (starts, ends))
    # One column past the longest text (never valid): no axis is empty.
    starts, ends = (tf.pad(t.to_tensor(), [[0, 0], [0, 1]]) for t in (starts, ends))
    width = tf.shape(starts)[1]
    valid = tf.sequence_mask(ids.row_lengths(), width)
    mentions = linker(text)
    start, end = (mentions[k].to_tensor() for k in ("starts", "ends"))
    hits = (starts[:, None, :] < end[..., None]) & (ends[:, None, :] > start[..., None])
    hits &= valid[:, None, :]
    first = tf.where(
        tf.reduce_any(hits, -1), tf.argmax(tf.cast(hits, tf.int32), -1, output_type=tf.int32), -1
    )
    at = tf.equal(first[..., None], tf.range(width)[None, None, :])
    entities = tf.reduce_sum(
        tf.cast(at, tf.int32) * mentions["entity_ids"].to_tensor()[..., None], axis=1
    )
    return tf.RaggedTensor.from_tensor(entities, lengths=ids.row_lengths())


def _char_to_byte(text, offsets):
    """Character offsets `(batch,)` into `text` -> UTF-8 byte offsets (clipped to the
    text; an empty text's are 0)."""
    widths = tf.strings.length(tf.strings.unicode_split(text, "UTF-8"))  # bytes per char
    before = tf.math.cumsum(widths.to_tensor(), axis=1)  # bytes up to each char's end
    ends = tf.concat([tf.zeros([tf.shape(text)[0], 1], before.dtype), before], axis=1)
    clipped = tf.clip_by_value(offsets, 0, tf.cast(widths.row_lengths(), tf.int32))
    return tf.gather(ends, clipped, batch_dims=1)


@keras_attn_export("keras_attn.data.mention_typing_inputs")
def mention_typing_inputs(tokenizer, text, mention_start, mention_end, marker_id, linker=None):
    """ERNIE's entity-typing inputs from raw text, in the graph: what `ernie_inputs`
    packs in Python, for a tf.data pipeline or a SavedModel.

    The pieces of each text, each linked mention's entity at its first piece
    (`piece_entities`), `marker_id` before the first and after the last piece the
    target mention covers, the window of `sequence_length - 2` pieces around the first
    marker, `[CLS]` and `[SEP]`, padding.

    Args:
        tokenizer: a `WordPieceTokenizer`.
        text: string tensor `(batch,)`; valid UTF-8 (a served request's text is
            cleaned first).
        mention_start, mention_end: int32 `(batch,)`, the target mention's characters
            (Unicode code points, as Python's `str` counts them), end exclusive.
        marker_id: the marker token's id (Zhang et al.'s `[ENT]`).
        linker: a `GraphLinker`, or `None`: no entity at all (a text-only backbone's
            inputs, without `entity_ids`).

    Returns:
        `(inputs, has_target)`: a dict of int32 tensors `(batch, sequence_length)`
        (`token_ids`, `segment_ids`, `padding_mask`, `entity_ids` with a linker) and
        `marker_positions` `(batch,)`; and a bool `(batch,)`: whether the span is in
        its text (0 <= start < end <= its length) and covers a word piece. A row
        without one is marked at its first piece: its output means nothing.

    Example:

    >>> from keras_attn.data import GraphLinker, WordPieceTokenizer, mention_typing_inputs
    >>> from keras_attn.knowledge import EntityLinker, WordNet
    >>> ids = {"01855672-n": 1, "07614500-n": 2}  # goose, ice cream
    >>> linker = GraphLinker(EntityLinker(WordNet.load(), synsets=ids), ids)
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[ENT]", "gee", "##se",
    ...          "ice", "cream", "é"]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=9, lowercase=False)
    >>> x, ok = mention_typing_inputs(tokenizer, ["é geese ice cream"], [8], [17], 5, linker)
    >>> x["token_ids"].numpy().tolist(), x["entity_ids"].numpy().tolist()
    ([[2, 10, 6, 7, 5, 8, 9, 5, 3]], [[0, 0, 1, 0, 0, 2, 0, 0, 0]])
    >>> x["marker_positions"].numpy().tolist(), ok.numpy().tolist()
    ([4], [True])
    """
    text = tf.convert_to_tensor(text, tf.string)
    mention_start, mention_end = (
        tf.convert_to_tensor(t, tf.int32) for t in (mention_start, mention_end)
    )
    starts, ends = (_char_to_byte(text, t) for t in (mention_start, mention_end))
    length = tokenizer.sequence_length
    ids, piece_starts, piece_ends = tokenizer.tokenize_with_offsets(text)
    piece_starts, piece_ends = (tf.cast(t, tf.int32) for t in (piece_starts, piece_ends))
    counts = tf.cast(ids.row_lengths(), tf.int32)
    # One column past the longest text (never valid): no axis is empty, even for a
    # batch without a piece.
    ids, piece_starts, piece_ends = (
        tf.pad(t.to_tensor(), [[0, 0], [0, 1]]) for t in (ids, piece_starts, piece_ends)
    )
    width = tf.shape(ids)[1]
    valid = tf.sequence_mask(counts, width)
    if linker is None:
        entities = tf.zeros_like(ids)
    else:
        entities = piece_entities(tokenizer, linker, text).to_tensor(shape=tf.shape(ids))

    target_hits = (piece_starts < ends[:, None]) & (piece_ends > starts[:, None]) & valid
    chars = tf.strings.length(text, unit="UTF8_CHAR")
    has_target = (
        tf.reduce_any(target_hits, -1)
        & (mention_start < mention_end)  # a reversed span: none
        & (mention_start >= 0)  # one outside its text is refused, not clipped
        & (mention_end <= chars)
    )
    first = tf.argmax(tf.cast(target_hits, tf.int32), -1, output_type=tf.int32)
    last = width - 1 - tf.argmax(tf.cast(target_hits[:, ::-1], tf.int32), -1, output_type=tf.int32)
    # Markers before `first` and after `last`: output q reads input q, q - 1 or q - 2.
    q = tf.range(width + 2)[None, :]
    source = tf.where(q <= first[:, None], q, tf.where(q <= last[:, None] + 1, q - 1, q - 2))
    marker = (q == first[:, None]) | (q == last[:, None] + 2)
    source = tf.clip_by_value(source, 0, tf.maximum(width - 1, 0))
    padded_ids = tf.pad(ids, [[0, 0], [0, 2]])
    padded_entities = tf.pad(entities, [[0, 0], [0, 2]])
    marked_ids = tf.where(marker, marker_id, tf.gather(padded_ids, source, batch_dims=1))
    marked_entities = tf.where(marker, 0, tf.gather(padded_entities, source, batch_dims=1))
    total = counts + 2
    # The window of `length - 2` pieces around the first marker.
    keep = length - 2
    begin = tf.maximum(0, tf.minimum(first - keep // 2, total - keep))
    window = begin[:, None] + tf.range(keep)[None, :]
    inside = window < total[:, None]
    window = tf.clip_by_value(window, 0, width + 1)
    pieces = tf.where(inside, tf.gather(marked_ids, window, batch_dims=1), -1)
    linked = tf.where(inside, tf.gather(marked_entities, window, batch_dims=1), 0)
    used = tf.reduce_sum(tf.cast(inside, tf.int32), -1)
    batch = tf.shape(text)[0]
    token_ids = tf.concat([tf.fill([batch, 1], tokenizer.cls_id), pieces,
                           tf.fill([batch, 1], tokenizer.pad_id)], axis=1)  # fmt: skip
    positions = tf.range(length)[None, :]
    token_ids = tf.where(positions == used[:, None] + 1, tokenizer.sep_id, token_ids)
    padding_mask = tf.cast(positions <= used[:, None] + 1, tf.int32)
    token_ids = tf.where(padding_mask > 0, token_ids, tokenizer.pad_id)
    inputs = {
        "token_ids": token_ids,
        "segment_ids": tf.zeros_like(token_ids),
        "padding_mask": padding_mask,
        "marker_positions": first - begin + 1,
    }
    if linker is not None:
        zeros = tf.zeros([batch, 1], tf.int32)
        inputs["entity_ids"] = tf.concat([zeros, linked, zeros], axis=1) * padding_mask
    return inputs, has_target
