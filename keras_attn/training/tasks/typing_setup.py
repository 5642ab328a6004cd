"""`keras-attn finetune` with `data.task: entity_typing`: ERNIE's fine-tuning for entity
typing (Zhang et al., 2019, section 4.3) on a user's file of typed mentions.

The marker (`[ENT]`) goes into the vocabulary when it is not there (a new embedding
row, as GPT-1's added tokens); an ERNIE backbone's entities are linked in the input
pipeline with WordNet's forms of the synsets its folder's `entities.txt` lists (the
ones `keras-attn pretrain --objective ernie` wrote); a BERT backbone reads the text
alone. The run folder keeps `entities.txt` and WordNet's licence beside `model.keras`,
so `keras-attn export` serves raw text with linking inside and nothing to pass."""

import logging
import pathlib

import tensorflow as tf

from keras_attn.data import GraphLinker, WordPieceTokenizer, mention_typing_inputs
from keras_attn.models.functional_model import with_vocabulary_size
from keras_attn.training.config import ConfigError

logger = logging.getLogger("keras_attn.training")


def with_marker(backbone, tokenizer, marker):
    """`(backbone, tokenizer, marker id)`: `marker` added to a WordPiece vocabulary
    (last) and to the backbone's token embedding (a new row) when it is not in them."""
    if not marker or any(c.isspace() for c in marker):
        raise ConfigError("model.marker", f"a token with no space in it; got {marker!r}")
    if marker not in tokenizer.vocabulary:
        if not isinstance(tokenizer, WordPieceTokenizer):
            raise ConfigError(
                "model.marker",
                f"a token of the backbone's {type(tokenizer).__name__} vocabulary (only a "
                f"WordPiece vocabulary takes a new one); {marker!r} is not in it",
            )
        tokenizer = WordPieceTokenizer(
            [*tokenizer.vocabulary, marker],
            lowercase=tokenizer.lowercase,
            strip_accents=tokenizer.strip_accents,
            sequence_length=tokenizer.sequence_length,
        )
        if backbone.vocabulary_size < tokenizer.vocabulary_size:
            backbone = with_vocabulary_size(backbone, tokenizer.vocabulary_size)
        added = len(tokenizer.vocabulary) - 1
        logger.info("model.marker %r added to the vocabulary (id %d)", marker, added)
    return backbone, tokenizer, tokenizer.vocabulary.index(marker)


def entity_linker(backbone, folder):
    """The `GraphLinker` of an ERNIE backbone's entities (`folder/entities.txt`, checked
    against its table), or `None` for a backbone without entities."""
    wanted = getattr(backbone, "num_entities", None)
    if wanted is None:
        return None
    path = pathlib.Path(folder) / "entities.txt"
    if not path.is_file():
        raise ConfigError(
            "model.backbone",
            f"a folder with entities.txt beside the ERNIE backbone (the synsets of its "
            f"{wanted} entity rows, as `keras-attn pretrain --objective ernie` writes it); "
            f"{str(folder)!r} has none",
        )
    from keras_attn.knowledge.wordnet import WordNetError

    try:
        return GraphLinker.from_entities(path, wanted)
    except WordNetError:
        raise  # WordNet's own files, named: not entities.txt's fault
    except ValueError as error:
        raise ConfigError("model.backbone", f"a readable entities.txt: {error}") from None


def markable(data, tokenizer, chunk=4096):
    """The rows of `data` (a `MentionTypingData`) whose mention covers a word piece of
    `tokenizer` (one of characters it drops alone covers none): their indices; each
    other row is counted and shown in a warning, never typed from a wrong piece."""
    kept, left = [], []
    for start in range(0, len(data), chunk):
        rows = slice(start, start + chunk)
        _, has_target = mention_typing_inputs(
            tokenizer,
            tf.constant(data.texts[rows]),
            tf.constant(data.mention_starts[rows], tf.int32),
            tf.constant(data.mention_ends[rows], tf.int32),
            marker_id=0,
        )
        for i, ok in enumerate(has_target.numpy(), start=start):
            (kept if ok else left).append(i)
    if left:
        shown = "; ".join(
            f"{data.texts[i][:40]!r} ({data.mention_starts[i]}, {data.mention_ends[i]})"
            for i in left[:3]
        )
        logger.warning(
            "%s: left out %d mention(s) that cover no word piece of the backbone's "
            "tokenizer: %s", data.report.file if data.report else "data", len(left), shown,
        )  # fmt: skip
    return kept


def typing_batches(tokenizer, data, marker_id, linker):
    """indices -> `(inputs, labels)` of those rows of `data`: `mention_typing_inputs`
    (linking in the graph with `linker`), for the input pipeline."""
    texts = tf.constant(data.texts)
    starts = tf.constant(data.mention_starts, tf.int32)
    ends = tf.constant(data.mention_ends, tf.int32)
    labels = tf.constant(data.labels, tf.int32)

    def make(indices):
        inputs, _ = mention_typing_inputs(
            tokenizer, *(tf.gather(t, indices) for t in (texts, starts, ends)), marker_id, linker
        )
        return inputs, tf.gather(labels, indices)

    return make
