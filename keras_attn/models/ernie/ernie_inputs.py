"""ERNIE's inputs from text: word pieces, each linked mention's entity at its first
piece, and `[ENT]` markers around the mention a task asks about (entity typing)."""

import numpy as np

from keras_attn.api_export import keras_attn_export
from keras_attn.knowledge.linking import Mention, align_mentions


def _window(length, keep, size):
    """The start of a `size`-long window of `length` items that holds index `keep`
    as near its middle as the ends allow."""
    return max(0, min(keep - size // 2, length - size))


@keras_attn_export("keras_attn.models.ernie_inputs")
def ernie_inputs(tokenizer, texts, mentions, entity_ids, targets=None, marker="[ENT]"):
    """Packs texts for an `ErnieBackbone`: `[CLS] pieces [SEP]` with each mention's
    entity at its first word piece, and, for entity typing, `marker` before and after
    each text's target mention (Zhang et al.'s `[ENT]`).

    A text longer than the tokenizer's `sequence_length` keeps the window of pieces
    around its target (the start without one); a mention cut off by it has no entity.
    Mentions whose synset `entity_ids` does not hold are left without one (id 0).

    Args:
        tokenizer: a `WordPieceTokenizer` (its `sequence_length`, ids and offsets).
        texts: strings.
        mentions: for each text, its `Mention`s (an `EntityLinker`'s output).
        entity_ids: `{synset: id}`, ids from 1 (the backbone's entity rows).
        targets: optional `(start, end)` characters per text: the mention to mark.
        marker: the marker token; it must be in the tokenizer's vocabulary.

    Returns:
        A dict of numpy int32 arrays `(len(texts), sequence_length)`: `token_ids`,
        `segment_ids`, `padding_mask`, `entity_ids`; with `targets`, also
        `marker_positions` `(len(texts),)`: the first marker's index.

    Example:

    >>> from keras_attn.data import WordPieceTokenizer
    >>> from keras_attn.knowledge import Mention
    >>> from keras_attn.models import ernie_inputs
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "[ENT]", "a", "ice",
    ...          "cream", "melts"]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=8)
    >>> x = ernie_inputs(tokenizer, ["an ice cream melts"],
    ...                  [[Mention(3, 12, "ice_cream", "07614500-n")]],
    ...                  {"07614500-n": 7}, targets=[(3, 12)])
    >>> x["token_ids"].tolist(), x["entity_ids"].tolist(), x["marker_positions"].tolist()
    ([[2, 1, 5, 7, 8, 5, 9, 3]], [[0, 0, 0, 7, 0, 0, 0, 0]], [2])
    """
    texts = list(texts)
    mentions = list(mentions)
    if len(mentions) != len(texts):
        raise ValueError(
            "Expected one list of mentions per text. Received: "
            f"{len(texts)} texts, {len(mentions)} lists of mentions"
        )
    if targets is not None:
        targets = list(targets)
        if len(targets) != len(texts):
            raise ValueError(
                f"Expected one target per text. Received: {len(texts)} texts, "
                f"{len(targets)} targets"
            )
        if marker not in tokenizer.vocabulary:
            raise ValueError(
                f"Expected the marker {marker!r} in the tokenizer's vocabulary (add it, or "
                "pass `marker=` a token it has, as '[unused0]'). Received: not there"
            )
        marker_id = tokenizer.vocabulary.index(marker)
    length = tokenizer.sequence_length
    arrays = {
        name: np.zeros((len(texts), length), "int32")
        for name in ("token_ids", "segment_ids", "padding_mask", "entity_ids")
    }
    if targets is not None:
        arrays["marker_positions"] = np.zeros((len(texts),), "int32")
    if not texts:
        return arrays
    pieces, starts, ends = (t.to_list() for t in tokenizer.tokenize_with_offsets(texts))
    for row, text in enumerate(texts):
        ids, entities = list(pieces[row]), [0] * len(pieces[row])
        for mention, span in zip(
            mentions[row],
            align_mentions(text, mentions[row], starts[row], ends[row]),
            strict=True,
        ):
            if span is not None:
                entities[span[0]] = entity_ids.get(mention.synset, 0)
        keep = 0
        if targets is not None:
            start, end = targets[row]
            if not 0 <= start < end <= len(text):
                raise ValueError(
                    f"Expected each target `(start, end)` with 0 <= start < end <= "
                    f"len(text). Received: {targets[row]!r} for text {row} of length {len(text)}"
                )
            span = align_mentions(text, [Mention(start, end, "", "")], starts[row], ends[row])[0]
            if span is None:
                raise ValueError(
                    f"Expected each target to cover a word piece. Received: {targets[row]!r} "
                    f"in text {row}, {text[start:end]!r}"
                )
            first, last = span
            ids[first : last + 1] = [marker_id, *ids[first : last + 1], marker_id]
            entities[first : last + 1] = [0, *entities[first : last + 1], 0]
            keep = first
        begin = _window(len(ids), keep, length - 2)
        ids = [tokenizer.cls_id, *ids[begin : begin + length - 2], tokenizer.sep_id]
        entities = [0, *entities[begin : begin + length - 2], 0]
        arrays["token_ids"][row, : len(ids)] = ids
        arrays["entity_ids"][row, : len(ids)] = entities
        arrays["padding_mask"][row, : len(ids)] = 1
        if targets is not None:
            arrays["marker_positions"][row] = keep - begin + 1
    return arrays
