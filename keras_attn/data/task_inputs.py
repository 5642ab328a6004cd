"""Model inputs for the fine-tuning tasks: tagging, span QA, multiple choice (in-graph)."""

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attn.api_export import keras_attn_export


def _as_ragged(values, dtype):
    if isinstance(values, tf.RaggedTensor):
        return values
    if isinstance(values, tf.Tensor):
        return tf.RaggedTensor.from_tensor(values)
    return tf.ragged.constant(values, dtype)


def _pad(ragged, length, value):
    padded, _ = tf_text.pad_model_inputs(ragged, max_seq_length=length, pad_value=value)
    return tf.cast(padded, tf.int32)


def _flank(ragged, value):
    """`[value] + row + [value]` for every row of a 2-D RaggedTensor."""
    edge = tf.fill([ragged.nrows(), 1], tf.cast(value, ragged.dtype))
    return tf.concat([edge, ragged, edge], axis=1)


@keras_attn_export("keras_attn.data.tagging_inputs")
def tagging_inputs(tokenizer, words, tags=None):
    """Words and per-word tags -> `[CLS] pieces [SEP]` inputs with per-piece labels.

    Sub-word alignment as in the BERT paper's NER setup ("we use the representation
    of the first sub-token as the input to the token-level classifier"): the first
    piece of every word carries the word's tag with weight 1; its other pieces,
    `[CLS]`, `[SEP]` and padding have weight 0. Sentences longer than the
    tokenizer's `sequence_length` are truncated (their last words get no label; see
    `word_ids`), as does a word that yields no piece at all (only control
    characters).

    Args:
        tokenizer: a `WordPieceTokenizer`.
        words: `(batch, (words))` strings, a RaggedTensor or nested lists.
        tags: optional `(batch, (words))` int tag ids, the same shape as `words`.

    Returns:
        A dict: `token_ids`, `segment_ids`, `padding_mask` (the model's inputs),
        `word_ids` (index of the word each piece belongs to, -1 for special tokens
        and padding) and, with `tags`, `labels` (0 where not scored) and
        `sample_weight` (1.0 on first pieces), all `(batch, sequence_length)`.

    Example:

    >>> from keras_attn.data import WordPieceTokenizer, tagging_inputs
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "new", "york", "##er", "sings"]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=7)
    >>> inputs = tagging_inputs(tokenizer, [["New", "Yorker", "sings"]], [[1, 2, 0]])
    >>> inputs["token_ids"].numpy().tolist(), inputs["word_ids"].numpy().tolist()
    ([[2, 5, 6, 7, 8, 3, 0]], [[-1, 0, 1, 1, 2, -1, -1]])
    >>> inputs["labels"].numpy().tolist(), inputs["sample_weight"].numpy().tolist()
    ([[0, 1, 2, 0, 0, 0, 0]], [[0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0]])
    """
    length = tokenizer.sequence_length
    words = _as_ragged(words, tf.string)
    pieces = tokenizer.tokenize(words)  # (batch, words, pieces)
    per_word = pieces.values  # (all words, pieces)
    word_of_piece = per_word.value_rowids()  # flat word index of every piece
    word_in_sentence = tf.ragged.range(words.row_lengths()).flat_values
    first_piece = tf.ragged.range(per_word.row_lengths()).flat_values == 0
    row_lengths = pieces.merge_dims(1, 2).row_lengths()  # pieces per sentence
    budget = length - 2

    def per_piece(flat_values, fill):
        ragged = tf.RaggedTensor.from_row_lengths(flat_values, row_lengths)[:, :budget]
        return _pad(_flank(ragged, fill), length, fill)

    outputs = tokenizer.pack([pieces.merge_dims(1, 2)])
    outputs["word_ids"] = per_piece(
        tf.cast(tf.gather(word_in_sentence, word_of_piece), tf.int32), -1
    )
    if tags is not None:
        tags = _as_ragged(tags, tf.int32)
        tf.debugging.assert_equal(
            tags.row_lengths(),
            words.row_lengths(),
            message="Expected `tags` with one tag per word, the shape of `words`.",
        )
        tag_of_piece = tf.gather(tf.cast(tags.flat_values, tf.int32), word_of_piece)
        labels = per_piece(tf.where(first_piece, tag_of_piece, -1), -1)
        outputs["labels"] = tf.maximum(labels, 0)
        outputs["sample_weight"] = tf.cast(labels >= 0, tf.float32)
    return outputs


@keras_attn_export("keras_attn.data.span_qa_inputs")
def span_qa_inputs(
    tokenizer, questions, contexts, answer_starts=None, answer_ends=None, max_question_length=64
):
    """Questions and contexts -> `[CLS] question [SEP] context [SEP]` with answer positions.

    The question is cut to `max_question_length` pieces and the context to what is
    left of the tokenizer's `sequence_length`. Answers are byte spans of the
    context (`SpanQAData`): the answer's first and last pieces are the labels; an
    unanswerable question (start -1) or an answer cut off by truncation points at
    `[CLS]` (position 0), as BERT does for SQuAD 2.0, and `answer_in_window`
    tells the two cases apart. The pair is packed as the tokenizer packs pairs
    (RoBERTa's `<s> question </s></s> context </s>`), its `pair_special_tokens`
    saying where the context starts.

    Args:
        tokenizer: a `WordPieceTokenizer`, or a family's tokenizer with
            `tokenize_with_offsets`, `pack` and `pair_special_tokens` (RoBERTa's,
            DeBERTa-v3's).
        questions: `(batch,)` strings.
        contexts: `(batch,)` strings.
        answer_starts: optional `(batch,)` int, UTF-8 byte offset of each answer
            in its context (-1: no answer).
        answer_ends: optional `(batch,)` int, byte offset just past each answer.
        max_question_length: pieces kept of each question.

    Returns:
        A dict: the model's inputs `token_ids`, `segment_ids`, `padding_mask`;
        `context_mask` (1 on context pieces), `token_starts` / `token_ends` (each
        piece's byte span in the context, -1 elsewhere), all `(batch,
        sequence_length)`; with answers also `start_positions`, `end_positions`
        and `answer_in_window` `(batch,)`.

    Example:

    >>> from keras_attn.data import WordPieceTokenizer, span_qa_inputs
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "who", "sang", "ann", "?", "."]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=10)
    >>> inputs = span_qa_inputs(tokenizer, ["Who sang?"], ["Ann sang."], [0], [3])
    >>> inputs["token_ids"].numpy().tolist()
    [[2, 5, 6, 8, 3, 7, 6, 9, 3, 0]]
    >>> int(inputs["start_positions"][0]), int(inputs["end_positions"][0])
    (5, 5)
    """
    length = tokenizer.sequence_length
    head, middle, tail = tokenizer.pair_special_tokens  # [CLS] q [SEP] c [SEP]: 1, 1, 1
    question = tokenizer.tokenize(questions)[:, :max_question_length]
    context, starts, ends = tokenizer.tokenize_with_offsets(contexts)
    question_length = tf.cast(question.row_lengths(), tf.int32)
    room = tf.maximum(length - head - middle - tail - question_length, 0)
    keep = tf.ragged.range(tf.cast(context.row_lengths(), tf.int32)) < tf.expand_dims(room, 1)
    context, starts, ends = (tf.ragged.boolean_mask(r, keep) for r in (context, starts, ends))
    outputs = tokenizer.pack([question, context])

    # Per-piece context facts: -1 (or 0) on [CLS], the question, [SEP]s and padding.
    def in_context(values, fill):
        before = tf.ones_like(question, tf.int64) * fill

        def edge(n):
            return tf.fill([question.nrows(), n], tf.cast(fill, tf.int64))

        joined = [edge(head), before, edge(middle), tf.cast(values, tf.int64), edge(tail)]
        return _pad(tf.concat(joined, axis=1), length, fill)

    outputs["context_mask"] = in_context(tf.ones_like(context, tf.int64), 0)
    outputs["token_starts"] = in_context(starts, -1)
    outputs["token_ends"] = in_context(ends, -1)
    if answer_starts is None:
        return outputs

    answer_starts = tf.cast(tf.convert_to_tensor(answer_starts), tf.int64)
    answer_ends = tf.cast(tf.convert_to_tensor(answer_ends), tf.int64)
    row = context.value_rowids()
    position = tf.cast(tf.ragged.range(context.row_lengths()).flat_values, tf.int32)
    overlaps = (starts.flat_values < tf.gather(answer_ends, row)) & (
        ends.flat_values > tf.gather(answer_starts, row)
    )
    overlaps &= tf.gather(answer_starts, row) >= 0
    nrows = tf.cast(context.nrows(), tf.int32)
    big = tf.int32.max
    first = tf.math.unsorted_segment_min(tf.where(overlaps, position, big), row, nrows)
    last = tf.math.unsorted_segment_max(tf.where(overlaps, position, -1), row, nrows)
    found = last >= 0
    offset = head + question_length + middle  # [CLS] question [SEP]
    outputs["start_positions"] = tf.where(found, offset + first, 0)
    outputs["end_positions"] = tf.where(found, offset + last, 0)
    outputs["answer_in_window"] = found | (answer_starts < 0)
    return outputs


@keras_attn_export("keras_attn.data.multiple_choice_inputs")
def multiple_choice_inputs(tokenizer, contexts, choices):
    """A context and its candidate endings -> `(batch, num_choices, sequence_length)`.

    Each choice is packed with its context as `[CLS] context [SEP] choice [SEP]`
    (the BERT paper's SWAG setup); `BertMultipleChoice` scores every pair.

    Args:
        tokenizer: a `WordPieceTokenizer`.
        contexts: `(batch,)` strings.
        choices: `(batch, num_choices)` strings.

    Returns:
        A dict of int32 `(batch, num_choices, sequence_length)`: `token_ids`,
        `segment_ids`, `padding_mask`.

    Example:

    >>> from keras_attn.data import WordPieceTokenizer, multiple_choice_inputs
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    >>> vocab += ["he", "ate", "an", "apple", "a", "car"]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=8)
    >>> inputs = multiple_choice_inputs(tokenizer, ["he ate"], [["an apple", "a car"]])
    >>> inputs["token_ids"].numpy().tolist()
    [[[2, 5, 6, 3, 7, 8, 3, 0], [2, 5, 6, 3, 9, 10, 3, 0]]]
    """
    choices = tf.convert_to_tensor(choices, tf.string)
    if choices.shape.rank != 2:
        raise ValueError(
            f"Expected `choices` of shape (batch, num_choices). Received: shape {choices.shape}"
        )
    batch, num_choices = tf.shape(choices)[0], tf.shape(choices)[1]
    contexts = tf.repeat(tf.convert_to_tensor(contexts, tf.string), num_choices)
    packed = tokenizer(contexts, tf.reshape(choices, [-1]))
    return {
        key: tf.reshape(value, [batch, num_choices, tokenizer.sequence_length])
        for key, value in packed.items()
    }
