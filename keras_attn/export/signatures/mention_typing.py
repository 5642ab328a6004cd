"""`EntityTyping`: the type of a mention in raw text, entity linking in the graph."""

import pathlib

import numpy as np
import tensorflow as tf

from keras_attn.export.signatures import common
from keras_attn.export.signatures.signature_kinds import serves


def _entities(entities, model):
    """The synsets in entity-id order (a list, or a file of one per line), checked
    against the backbone's table; `None` for a text-only (BERT) backbone."""
    wanted = getattr(model.backbone, "num_entities", None)
    if wanted is None:
        return None
    if entities is None:
        raise ValueError(
            "Expected `entities`: the synsets of the model's entity ids 1.."
            f"{wanted} (a list or a file, one per line), to link raw text. Received: None"
        )
    if isinstance(entities, (str, pathlib.Path)):
        entities = pathlib.Path(entities).read_text(encoding="utf-8").split()
    entities = list(entities)
    if len(entities) != wanted or len(set(entities)) != len(entities):
        raise ValueError(
            f"Expected {wanted} distinct entities, one per row of the model's entity table "
            f"(num_entities). Received: {len(entities)}, {len(set(entities))} distinct"
        )
    return {synset: i + 1 for i, synset in enumerate(entities)}


def _char_to_byte(text, offsets):
    """Character offsets `(batch,)` into `text` -> UTF-8 byte offsets (clipped to the
    text; an empty text's are 0)."""
    widths = tf.strings.length(tf.strings.unicode_split(text, "UTF-8"))  # bytes per char
    before = tf.math.cumsum(widths.to_tensor(), axis=1)  # bytes up to each char's end
    ends = tf.concat([tf.zeros([tf.shape(text)[0], 1], before.dtype), before], axis=1)
    clipped = tf.clip_by_value(offsets, 0, tf.cast(widths.row_lengths(), tf.int32))
    return tf.gather(ends, clipped, batch_dims=1)


def _piece_entities(tokenizer, linker, text):
    if isinstance(linker, _NoLinks):
        return tf.zeros_like(tokenizer.tokenize(text), tf.int32)
    from keras_attn.data import piece_entities

    return piece_entities(tokenizer, linker, text)


def typing_inputs(tokenizer, linker, marker_id, text, starts, ends):
    """The packed inputs `ernie_inputs` makes, in the graph: pieces, each mention's
    entity at its first piece, the markers around the target, the window, `[CLS]` and
    `[SEP]`, padded to the tokenizer's `sequence_length`."""
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

    entities = _piece_entities(tokenizer, linker, text).to_tensor(shape=tf.shape(ids))

    target_hits = (piece_starts < ends[:, None]) & (piece_ends > starts[:, None]) & valid
    has_target = tf.reduce_any(target_hits, -1) & (starts < ends)  # a reversed span: none
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
    entity_ids = tf.concat([tf.zeros([batch, 1], tf.int32), linked,
                            tf.zeros([batch, 1], tf.int32)], axis=1) * padding_mask  # fmt: skip
    inputs = {
        "token_ids": token_ids,
        "segment_ids": tf.zeros_like(token_ids),
        "padding_mask": padding_mask,
        "entity_ids": entity_ids,
        "marker_positions": first - begin + 1,
    }
    return inputs, has_target


@serves("entity_typing", labels=None, entities=None, marker="[ENT]")
def entity_typing_signatures(model, tokenizer, labels, entities, marker):
    """`serving_default`: `text`, `mention_start`, `mention_end` (characters) -> the
    mention's type; entity linking in the graph (`GraphLinker`); `serve_token_ids`."""
    from keras_attn.data import GraphLinker
    from keras_attn.knowledge import EntityLinker, WordNet

    names = common.label_names(labels, model.num_classes)
    entity_ids = _entities(entities, model)
    if marker not in tokenizer.vocabulary:
        raise ValueError(f"Expected the marker {marker!r} in the tokenizer's vocabulary")
    marker_id = tokenizer.vocabulary.index(marker)
    wordnet = WordNet.load()
    linker = None
    if entity_ids is not None:
        linker = GraphLinker(EntityLinker(wordnet, synsets=entity_ids), entity_ids)
    no_links = _NoLinks()

    def classify(inputs):
        if linker is None:
            inputs = {k: v for k, v in inputs.items() if k != "entity_ids"}
        logits = common.float32(model(inputs, training=False))
        probabilities = tf.nn.softmax(logits, axis=-1)
        label_ids = tf.argmax(probabilities, axis=-1)
        return logits, probabilities, label_ids, tf.gather(names, label_ids)

    def serve_text(text, mention_start, mention_end):
        text = common.clean_text(text)
        starts, ends = (_char_to_byte(text, o) for o in (mention_start, mention_end))
        inputs, has_target = typing_inputs(
            tokenizer, linker or no_links, marker_id, text, starts, ends
        )
        _, probabilities, label_ids, labels = classify(inputs)
        # A span outside its text, as the Python path refuses it, has no type either
        # (not the clipped span's).
        chars = tf.strings.length(text, unit="UTF8_CHAR")
        has_target &= (mention_start >= 0) & (mention_end <= chars)
        return {
            "probabilities": probabilities,
            # A mention no piece covers (empty, reversed, out of range, cut): no type.
            "label_ids": tf.where(has_target, label_ids, -1),
            "labels": tf.where(has_target, labels, ""),
        }

    def serve_token_ids(token_ids, segment_ids, padding_mask, entity_ids, marker_positions):
        logits, probabilities, _, _ = classify({
            "token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask,
            "entity_ids": entity_ids, "marker_positions": marker_positions,
        })  # fmt: skip
        return {"logits": logits, "probabilities": probabilities}

    texts = ["a giraffe ate", "the geese by the seashore"]
    offsets = {"mention_start": [2, 4], "mention_end": [9, 9]}
    warm = {"text": texts, **{k: np.array(v, "int32") for k, v in offsets.items()}}
    signatures = common.Signatures()
    signatures.add(
        "serving_default",
        serve_text,
        [common.strings("text"), common.ids("mention_start", 1), common.ids("mention_end", 1)],
        warm,
    )
    example, _ = typing_inputs(
        tokenizer, linker or no_links, marker_id, tf.constant(texts),
        tf.constant([2, 4]), tf.constant([9, 9]),
    )  # fmt: skip
    signatures.add(
        "serve_token_ids",
        serve_token_ids,
        [*common.token_id_specs(), common.ids("entity_ids"), common.ids("marker_positions", 1)],
        {k: v.numpy() for k, v in example.items()},
    )
    if linker is not None:
        signatures.tracked.append(linker)
        signatures.assets["WORDNET_LICENSE"] = wordnet.license
    return signatures


class _NoLinks:
    """A linker that links nothing (a text-only typing model)."""

    num_entities = 0

    def __call__(self, text):
        lengths = tf.zeros([tf.shape(text)[0]], tf.int64)
        empty = tf.RaggedTensor.from_row_lengths(tf.zeros([0], tf.int32), lengths)
        return {"starts": empty, "ends": empty, "entity_ids": empty}
