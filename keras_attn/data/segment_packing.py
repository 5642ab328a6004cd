"""Segments of token ids packed into a model's inputs, in the graph: the one packer every
tokenizer's `pack` calls (`pack_segments`), and `transformers`' `longest_first` trimming
(`trim_longest_first`) beside Google BERT's round robin."""

import tensorflow as tf
import tensorflow_text as tf_text

TRIMMERS = ("round_robin", "longest_first")


TRIMMINGS = ("round_robin", "longest_first")


def check_truncate(truncate):
    """`truncate` if it is one of `TRIMMINGS`, else a `ValueError` naming them."""
    if truncate not in TRIMMINGS:
        raise ValueError(f"Expected `truncate` in {TRIMMINGS}. Received: truncate={truncate!r}")
    return truncate


def pack_segments(
    segments,
    sequence_length,
    start_id,
    end_id,
    pad_id,
    trim="round_robin",
    separators=1,
    segment_ids=True,
):
    """Ragged segments `[(batch, (pieces)), ...]` -> `start A end [end] B end`, trimmed
    to `sequence_length` and padded, as a model's three inputs.

    As keras-hub's `MultiSegmentPacker` does, with the two trimmings our tokenizers
    match: `"round_robin"` (Google BERT's, `tf_text.RoundRobinTrimmer`: `WordPieceTokenizer`)
    and `"longest_first"` (`transformers`': RoBERTa's and DeBERTa-v3's tokenizers).

    Args:
        segments: one or more `tf.RaggedTensor`s of token ids, `(batch, (pieces))`.
        sequence_length: the packed rows' length.
        start_id, end_id, pad_id: the first token (`[CLS]`, `<s>`), the token closing
            each segment (`[SEP]`, `</s>`), the padding.
        trim: `"round_robin"` or `"longest_first"`: how the segments share the room.
        separators: end tokens between two segments (RoBERTa: 2, `</s></s>`).
        segment_ids: number the segments 0, 1, ... (`False`: all 0, as RoBERTa).

    Returns:
        A dict of int32 `(batch, sequence_length)`: `token_ids`, `segment_ids`,
        `padding_mask` (1 for real tokens).

    Example:

    >>> import tensorflow as tf
    >>> from keras_attn.data.segment_packing import pack_segments
    >>> a, b = tf.ragged.constant([[5, 6, 7]]), tf.ragged.constant([[8, 9]])
    >>> packed = pack_segments([a, b], 8, start_id=0, end_id=2, pad_id=1, separators=2,
    ...                        trim="longest_first", segment_ids=False)
    >>> packed["token_ids"].numpy().tolist(), packed["padding_mask"].numpy().tolist()
    ([[0, 5, 6, 2, 2, 8, 9, 2]], [[1, 1, 1, 1, 1, 1, 1, 1]])
    """
    if trim not in TRIMMERS:
        raise ValueError(f"Expected `trim` in {TRIMMERS}. Received: trim={trim!r}")
    extra = separators - 1  # end tokens opening each later segment
    budget = sequence_length - 1 - len(segments) - extra * (len(segments) - 1)
    if trim == "round_robin":
        segments = tf_text.RoundRobinTrimmer(max_seq_length=budget).trim(segments)
    else:
        segments = trim_longest_first(segments, budget)
    if extra:
        segments = [segments[0]] + [
            tf.concat([tf.fill([s.nrows(), extra], tf.cast(end_id, s.dtype)), s], axis=1)
            for s in segments[1:]
        ]
    token_ids, segments_of = tf_text.combine_segments(
        segments, start_of_sequence_id=start_id, end_of_segment_id=end_id
    )
    token_ids, padding_mask = tf_text.pad_model_inputs(
        token_ids, max_seq_length=sequence_length, pad_value=pad_id
    )
    if segment_ids:
        segments_of, _ = tf_text.pad_model_inputs(segments_of, max_seq_length=sequence_length)
    else:
        segments_of = tf.zeros_like(token_ids)
    return {
        "token_ids": tf.cast(token_ids, tf.int32),
        "segment_ids": tf.cast(segments_of, tf.int32),
        "padding_mask": tf.cast(padding_mask, tf.int32),
    }


def trim_longest_first(segments, budget):
    """Cuts one or two ragged `(batch, (pieces))` segments to `budget` pieces in all, as
    Hugging Face's tokenizers do (`truncation="longest_first"`): a pair over the budget
    keeps the shorter whole if it fits in half, the longer gets the rest; when both
    are longer than half, each keeps half and the longer one (the second, if equal)
    the odd piece. Google's BERT trims the other way round on a tie
    (`tf_text.RoundRobinTrimmer`, what `WordPieceTokenizer` does).

    Args:
        segments: a list of one or two `tf.RaggedTensor`s.
        budget: the pieces to keep in all, a Python int.

    Returns:
        The list of trimmed segments.
    """
    if len(segments) == 1:
        return [segments[0][:, :budget]]
    first, second = segments
    lengths = [tf.cast(s.row_lengths(), tf.int32) for s in (first, second)]
    shorter = tf.minimum(*lengths)
    fits_in_half = 2 * shorter <= budget
    keep_shorter = tf.where(fits_in_half, shorter, budget // 2)
    keep_longer = tf.where(fits_in_half, budget - shorter, budget // 2 + budget % 2)
    first_longer = lengths[0] > lengths[1]
    over = lengths[0] + lengths[1] > budget
    keeps = (
        tf.where(over, tf.where(first_longer, keep_longer, keep_shorter), lengths[0]),
        tf.where(over, tf.where(first_longer, keep_shorter, keep_longer), lengths[1]),
    )
    return [
        tf.ragged.boolean_mask(s, tf.ragged.range(n) < k[:, None])
        for s, n, k in zip((first, second), lengths, keeps, strict=True)
    ]
