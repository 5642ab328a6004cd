"""`transformers`' `longest_first` truncation of one or two ragged segments, in the graph."""

import tensorflow as tf


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
