"""ERNIE's entity linking inside a TensorFlow graph: a table from word forms to entity
ids, matched longest first as `EntityLinker` matches, so a SavedModel or a tf.data
pipeline links raw text with no Python."""

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attn.api_export import keras_attn_export

# `keras_attn.knowledge.linking.WORD` in RE2: Python's `[^\W\d_]` is a letter or a
# numeric character that is not a decimal digit.
LETTER = r"[\pL\p{Nl}\p{No}]"
WORD = rf"{LETTER}+(?:['’-]{LETTER}+)*"


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
        self._license = linker.wordnet.license
        self.table = tf.lookup.StaticHashTable(
            tf.lookup.KeyValueTensorInitializer(
                tf.constant(keys), tf.constant([forms[k] for k in keys], tf.int32)
            ),
            default_value=0,
        )

    def save_assets(self, folder):
        """Writes `entities.txt` (the synsets in id order, what the `entities` export
        option reads) and `WORDNET_LICENSE` (its notice goes with derived data)."""
        import pathlib

        folder = pathlib.Path(folder)
        (folder / "entities.txt").write_text("\n".join(self.entities) + "\n", encoding="utf-8")
        (folder / "WORDNET_LICENSE").write_text(self._license, encoding="utf-8")

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
