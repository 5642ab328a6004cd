"""The serving functions of LiteRT exports, written in operators LiteRT has: TensorFlow
Text's TFLite custom operators for the tokenizer (`FastBertNormalize`,
`FastWordpieceTokenizeWithOffsets`, `RaggedTensorToTensor`, `ByteSplit`, `ByteSplitByOffsets`) and
builtins for the rest; each is the SavedModel's `serving_default` for its kind of model
(TensorFlow, tensorflow-text; imported when first used)."""

import tensorflow as tf


def _strings(*names):
    """A serving function's inputs: a `(batch,)` string tensor per name."""
    return [tf.TensorSpec([None], tf.string, name=name) for name in names]


def _one_row_if_empty(*texts):
    """`texts` as they are, or one empty text each when the request has no rows (the
    delegate cannot shape a batch of none); and the `(1,)` number of rows asked for."""
    asked = tf.shape(texts[0])[:1]
    return [tf.cond(asked[0] > 0, lambda t=t: t, lambda: tf.constant([""])) for t in texts], asked


class _Serving(tf.Module):
    """A module holding `model` and `tokenizer`'s TensorFlow Text tokenizer; the
    converter freezes the variables a module tracks and Keras 3 tracks its own, so the
    model's TensorFlow variables are listed here."""

    def __init__(self, model, tokenizer):
        super().__init__()
        self.model, self.tokenizer = model, tokenizer._tokenizer
        self.weights = [weight.value for weight in model.weights]


def _dense_pieces(tokenizer, text, length):
    """`tokenizer`'s (TensorFlow Text's) pieces of `text`, `(batch, length)` (cut), and
    how many each text has `(batch, 1)` (uncut)."""
    pieces = tokenizer.tokenize(text)
    return pieces.to_tensor(shape=[None, length]), tf.cast(pieces.row_lengths(), tf.int32)[:, None]


def _pack_pair(first, kept_a, second, kept_b, tokenizer):
    """`[CLS] first[:kept_a] [SEP] second[:kept_b] [SEP]` by gathering (`first`,
    `second`: `(batch, length)` pieces; `kept_*`: `(batch, 1)`), as `WordPieceTokenizer`
    packs a trimmed pair; the batch cut to its longest row. Returns the model's inputs
    and where the second segment's pieces are `(batch, longest)`."""
    length = tokenizer.sequence_length
    p = tf.range(length)[None, :] + tf.zeros_like(kept_a)  # (batch, length)
    in_first = (p >= 1) & (p <= kept_a)
    in_second = (p >= kept_a + 2) & (p < kept_a + 2 + kept_b)
    ids = tf.where(in_first, tf.gather(first, tf.maximum(p - 1, 0), batch_dims=1), tokenizer.pad_id)
    second_index = tf.clip_by_value(p - kept_a - 2, 0, length - 1)
    ids = tf.where(in_second, tf.gather(second, second_index, batch_dims=1), ids)
    ids = tf.where(p == 0, tokenizer.cls_id, ids)
    ids = tf.where((p == kept_a + 1) | (p == kept_a + 2 + kept_b), tokenizer.sep_id, ids)
    used = p < kept_a + kept_b + 3
    longest = tf.reduce_max(kept_a + kept_b) + 3
    inputs = {
        "token_ids": ids[:, :longest],
        "segment_ids": tf.cast((p >= kept_a + 2) & used, tf.int32)[:, :longest],
        "padding_mask": tf.cast(used, tf.int32)[:, :longest],
    }
    return inputs, in_second[:, :longest]


def _pack_single(pieces_of, text, tokenizer):
    """`[CLS] pieces [SEP]` of each text (`pieces_of`: the TensorFlow Text tokenizer),
    cut to `sequence_length`, as dense arithmetic; the batch cut to its longest row."""
    length = tokenizer.sequence_length
    pad, cls, sep = tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id
    pieces = pieces_of.tokenize(text)  # (batch, pieces), ragged
    body = pieces.to_tensor(default_value=pad, shape=[None, length - 2])
    kept = tf.cast(tf.minimum(pieces.row_lengths(), length - 2), tf.int32)
    rows = tf.shape(text)[:1]
    edge = tf.fill(tf.concat([rows, [1]], 0), cls)
    ids = tf.concat([edge, body, tf.fill(tf.concat([rows, [1]], 0), pad)], axis=1)
    positions = tf.range(length)[None, :]
    ids = tf.where(positions == kept[:, None] + 1, sep, ids)
    mask = tf.cast(positions < kept[:, None] + 2, tf.int32)
    longest = tf.reduce_max(kept) + 2
    return {
        "token_ids": ids[:, :longest],
        "segment_ids": tf.zeros_like(ids[:, :longest]),
        "padding_mask": mask[:, :longest],
    }


def encoder_module(model, tokenizer):
    """A `tf.Module` whose `serve(text)` is a backbone's `serving_default`
    (`signatures.backbone`): `embeddings`, the mean of the sequence over the real
    tokens, L2-normalised, and `pooled_output`."""

    class Serving(_Serving):
        @tf.function(input_signature=_strings("text"))
        def serve(self, text):
            (text,), asked = _one_row_if_empty(text)
            inputs = _pack_single(self.tokenizer, text, tokenizer)
            outputs = self.model(inputs, training=False)
            sequence = tf.cast(outputs["sequence_output"], tf.float32)
            mask = tf.expand_dims(tf.cast(inputs["padding_mask"], tf.float32), 2)
            tokens = tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
            mean = tf.reduce_sum(sequence * mask, axis=1) / tokens
            return {
                "embeddings": tf.math.l2_normalize(mean, axis=-1)[: asked[0]],
                "pooled_output": tf.cast(outputs["pooled_output"], tf.float32)[: asked[0]],
            }

    return Serving(model, tokenizer)


def classifier_module(model, tokenizer, labels, text_pair=False):
    """A `tf.Module` whose `serve(text[, text_pair])` is a classifier's
    `serving_default`: the tokenizer's own `FastBertTokenizer`; a single text's pieces
    cut to `sequence_length - 2`, a pair's trimmed round-robin as `WordPieceTokenizer`
    trims them (the shorter kept whole when it fits in half the budget, the first
    text given the odd piece); `[CLS] ... [SEP]` and the padding as dense arithmetic,
    the batch cut to its longest row."""
    length = tokenizer.sequence_length
    names = tf.constant(labels)

    def answer(model, inputs, asked):
        logits = tf.cast(model(inputs, training=False), tf.float32)
        probabilities = tf.nn.softmax(logits)
        label_ids = tf.argmax(probabilities, axis=-1)[: asked[0]]
        return {
            "probabilities": probabilities[: asked[0]],
            "label_ids": label_ids,
            "labels": tf.gather(names, label_ids),
        }

    class Single(_Serving):
        @tf.function(input_signature=_strings("text"))
        def serve(self, text):
            (text,), asked = _one_row_if_empty(text)
            return answer(self.model, _pack_single(self.tokenizer, text, tokenizer), asked)

    class Pairs(_Serving):
        @tf.function(input_signature=_strings("text", "text_pair"))
        def serve(self, text, text_pair):
            (text, text_pair), asked = _one_row_if_empty(text, text_pair)
            first, first_count = _dense_pieces(self.tokenizer, text, length)
            second, second_count = _dense_pieces(self.tokenizer, text_pair, length)
            # Round-robin allotment (tensorflow-text's RoundRobinTrimmer): each side
            # keeps up to the larger of what the other leaves and its half.
            budget, half = length - 3, (length - 3) // 2
            kept_a = tf.minimum(first_count, tf.maximum(budget - second_count, budget - half))
            kept_b = tf.minimum(second_count, tf.maximum(budget - first_count, half))
            inputs, _ = _pack_pair(first, kept_a, second, kept_b, tokenizer)
            return answer(self.model, inputs, asked)

    return (Pairs if text_pair else Single)(model, tokenizer)


def best_spans(start_logits, end_logits, allowed, max_answer_length):
    """`BertSpanQA.decode_spans` in operators LiteRT has (Keras's `argmax` tests the
    sign bit, and a `None` index is a strided slice LiteRT lacks): `(starts, ends,
    scores)` of the best span `start <= end < start + max_answer_length` within
    `allowed` (bool `(batch, length)`)."""
    length = tf.shape(start_logits)[1]
    position = tf.range(length)
    offset = tf.expand_dims(position, 0) - tf.expand_dims(position, 1)  # end - start
    valid = tf.expand_dims((offset >= 0) & (offset < max_answer_length), 0)
    valid = valid & tf.expand_dims(allowed, 2) & tf.expand_dims(allowed, 1)
    scores = tf.expand_dims(start_logits, 2) + tf.expand_dims(end_logits, 1)
    scores = tf.reshape(tf.where(valid, scores, -float("inf")), [tf.shape(scores)[0], -1])
    best = tf.argmax(scores, axis=-1, output_type=tf.int32)
    starts = best // length
    return starts, best - starts * length, tf.reduce_max(scores, axis=-1)


def span_qa_module(model, tokenizer, max_question_length=64, max_answer_length=30):
    """A `tf.Module` whose `serve(question, context)` is span QA's `serving_default`
    (`keras_attn.export.signatures.span_qa`): the question's pieces cut to
    `max_question_length`, the context's to what is left, `[CLS] question [SEP]
    context [SEP]` packed by gathering, the best span's bytes cut out of the context
    by TensorFlow Text's `ByteSplitByOffsets`. The context pieces' byte offsets are the
    `FastBertTokenizer`'s, mapped through the normaliser's offsets with dense gathers
    (its own mapping is a ragged gather LiteRT lacks)."""
    from keras_attn.export.signatures.span_qa import NO_ANSWER_SCORE

    length = tokenizer.sequence_length
    budget = length - 3

    class Serving(_Serving):
        def __init__(self):
            super().__init__(model, tokenizer)
            import tensorflow_text as tf_text

            self.splitter = tf_text.ByteSplitter()

        def context_pieces(self, context):
            """The context's pieces `(batch, length)`, their counts and byte spans."""
            normalizer = self.tokenizer._fast_bert_normalizer
            wordpiece = self.tokenizer._fast_wordpiece_tokenizer
            normalized, offsets = normalizer.normalize_with_offsets(context)
            pieces, starts, ends = wordpiece.tokenize_with_offsets(normalized)
            first = offsets.row_splits[:-1, None]  # each row's first offset

            def original(post):  # normalised byte offsets -> the context's
                dense = post.to_tensor(shape=[None, length])
                return tf.gather(offsets.flat_values, first + dense)

            count = tf.cast(pieces.row_lengths(), tf.int32)[:, None]
            return pieces.to_tensor(shape=[None, length]), count, original(starts), original(ends)

        @tf.function(input_signature=_strings("question", "context"))
        def serve(self, question, context):
            (question, context), asked = _one_row_if_empty(question, context)
            question_ids, question_count = _dense_pieces(self.tokenizer, question, length)
            context_ids, context_count, starts, ends = self.context_pieces(context)
            # As `span_qa_inputs` and the pair packing: the question cut to its limit
            # (and to the whole budget), the context to what is left.
            kept_q = tf.minimum(question_count, min(max_question_length, budget))
            kept_c = tf.minimum(context_count, budget - kept_q)
            inputs, in_context = _pack_pair(question_ids, kept_q, context_ids, kept_c, tokenizer)
            outputs = self.model(inputs, training=False)
            best_start, best_end, scores = best_spans(
                outputs["start_logits"],
                outputs["end_logits"],
                in_context,
                max_answer_length,
            )
            found = kept_c[:, 0] > 0

            # The spans' pieces are context pieces: index = position - question - 2.
            def byte(offsets, position):
                index = tf.maximum(position - kept_q[:, 0] - 2, 0)[:, None]
                return tf.gather(offsets, index, batch_dims=1)[:, 0]

            start_byte, end_byte = byte(starts, best_start), byte(ends, best_end)
            start_byte = tf.where(found, start_byte, -1)
            end_byte = tf.where(found, end_byte, -1)
            answer = self.splitter.split_by_offsets(
                context,
                tf.cast(tf.maximum(start_byte, 0), tf.int32)[:, None],
                tf.cast(tf.maximum(end_byte, 0), tf.int32)[:, None],
            )
            rows = asked[0]
            return {
                "answer": tf.reshape(answer, [-1])[:rows],
                "answer_start": start_byte[:rows],
                "answer_end": end_byte[:rows],
                "score": tf.where(found, tf.cast(scores, tf.float32), NO_ANSWER_SCORE)[:rows],
            }

    return Serving()


def _punctuation_and_symbols():
    """A `(0x20000,)` uint8 table: 1 at the code points of Unicode's P and S categories
    (what `\\p{P}` and `\\p{S}` match; none lie above U+1FFFF)."""
    import unicodedata

    import numpy as np

    return np.array([unicodedata.category(chr(c))[0] in "PS" for c in range(0x20000)], np.uint8)


def _carried(values, lead, steps=3):
    """Each byte's value of its character's first byte (`lead`): continuation bytes
    take the value from up to `steps` bytes back (a UTF-8 character has at most 3)."""
    carried = tf.where(lead, values, False)
    for _ in range(steps):
        before = tf.pad(carried[:, :-1], [[0, 0], [1, 0]])
        carried = tf.where(lead, values, before)
    return carried


def words_with_offsets(text, table):
    """`tagger.split_words` in operators LiteRT has: the words of `text` (runs of
    characters that are neither RE2's `\\s` nor in `table`; each character in `table` a
    word of its own) as `(starts, ends, count)`: UTF-8 byte offsets `(batch, most
    words + 1)` (0 past a row's words) and the words per row `(batch,)`, from the
    text's bytes (TensorFlow Text's `ByteSplit`) decoded with arithmetic."""
    import tensorflow_text as tf_text

    pieces = tf_text.ByteSplitter().split(text)
    b = pieces.with_flat_values(tf.cast(pieces.flat_values, tf.int32)).to_tensor(-1)
    width = tf.shape(b)[1]
    after = tf.pad(b, [[0, 0], [0, 3]], constant_values=-1)
    b1, b2, b3 = (tf.maximum(after[:, k : k + width] - 128, 0) for k in (1, 2, 3))
    code = tf.where(
        b < 0xE0,
        tf.where(b < 0x80, b, (b - 0xC0) * 64 + b1),
        tf.where(
            b < 0xF0,
            (b - 0xE0) * 4096 + b1 * 64 + b2,
            (b - 0xF0) * 262144 + b1 * 4096 + b2 * 64 + b3,
        ),
    )
    lead = (b >= 0) & ((b < 0x80) | (b >= 0xC0))
    space = lead & ((code == 32) | ((code >= 9) & (code <= 13) & (code != 11)))
    inside = tf.cast(tf.gather(table, tf.clip_by_value(code, 0, 0x1FFFF)), tf.int32) > 0
    isolated = lead & inside & (code < 0x20000)
    breaks = _carried(space | isolated, lead)  # a byte of a space or an isolated char
    before = tf.pad(breaks[:, :-1], [[0, 0], [1, 0]], constant_values=True)
    starts = lead & (isolated | (~space & before))
    in_word = (b >= 0) & ~_carried(space, lead)
    word = tf.cumsum(tf.cast(starts, tf.int32), axis=1) - 1
    following = tf.pad(starts | ~in_word, [[0, 0], [0, 1]], constant_values=True)[:, 1:]
    ends = in_word & following
    count = tf.reduce_sum(tf.cast(starts, tf.int32), axis=1)
    # One column more than the most words: a request with none has a (0) column too
    # (LiteRT's kernels mishandle tensors of no elements).
    shape = tf.stack([tf.shape(b)[0], tf.reduce_max(tf.concat([count, [0]], 0)) + 1])
    position = tf.range(width)[None, :] + tf.zeros_like(b)

    def scattered(where, offset):
        at = tf.cast(tf.where(where), tf.int32)  # (n, 2): row, byte
        target = tf.stack([at[:, 0], tf.gather_nd(word, at)], axis=1)
        return tf.scatter_nd(target, tf.gather_nd(position, at) + offset, shape)

    return scattered(starts, 0), scattered(ends, 1), count


def tagger_module(model, tokenizer, labels):
    """A `tf.Module` whose `serve(text)` is a tagger's `serving_default`
    (`keras_attn.export.signatures.tagger`): the words as `words_with_offsets` finds
    them, cut out by `ByteSplitByOffsets`, each tokenised alone by the model's
    `FastBertTokenizer`, their pieces laid out `[CLS] pieces [SEP]` by gathering (cut
    to `sequence_length - 2`), each word's tag the one of its first piece."""
    length, classes = tokenizer.sequence_length, len(labels)
    names = tf.constant([*labels, ""])  # "" for a word with no tag
    table = tf.constant(_punctuation_and_symbols())

    class Serving(_Serving):
        def __init__(self):
            super().__init__(model, tokenizer)
            import tensorflow_text as tf_text

            self.splitter = tf_text.ByteSplitter()

        @tf.function(input_signature=_strings("text"))
        def serve(self, text):
            (text,), asked = _one_row_if_empty(text)
            # One more (empty) word per row than the most: gathers have a word to point
            # at in a request with none; it is cut off the answers.
            starts, ends, count = words_with_offsets(text, table)
            most = tf.shape(starts)[1] - 1
            batch = tf.shape(starts)[0]
            # Each word cut out of its own copy of its text (LiteRT cannot densify
            # ragged strings): `(batch, words)`.
            of_row = tf.reshape(tf.tile(tf.range(batch)[:, None], [1, most + 1]), [-1])
            words = self.splitter.split_by_offsets(
                tf.gather(text, of_row), tf.reshape(starts, [-1, 1]), tf.reshape(ends, [-1, 1])
            )
            if isinstance(words, tf.RaggedTensor):  # one word per row
                words = words.flat_values
            words = tf.reshape(words, [batch, most + 1])
            pieces = self.tokenizer.tokenize(tf.reshape(words, [-1]))  # (words, (pieces))
            per_word = tf.reshape(tf.cast(pieces.row_lengths(), tf.int32), [batch, most + 1])
            dense = pieces.to_tensor(shape=[None, length])  # (batch * words, length)
            before = tf.cumsum(per_word, axis=1, exclusive=True)  # pieces before each word
            total = tf.minimum(tf.reduce_sum(per_word, axis=1), length - 2)[:, None]
            piece = tf.range(length)[None, :] - 1 + tf.zeros_like(total)  # (batch, length)
            # The word of each piece: how many words end at or before it.
            done = tf.expand_dims(before + per_word, 1) <= tf.expand_dims(piece, 2)
            word = tf.reduce_sum(tf.cast(done, tf.int32), axis=2)
            real = (piece >= 0) & (piece < total)
            word = tf.where(real, word, 0)
            within = tf.clip_by_value(piece - tf.gather(before, word, batch_dims=1), 0, length - 1)
            row = tf.range(batch)[:, None] * (most + 1) + word
            ids = tf.where(real, tf.gather_nd(dense, tf.stack([row, within], 2)), tokenizer.pad_id)
            ids = tf.where(piece == -1, tokenizer.cls_id, ids)
            ids = tf.where(piece == total, tokenizer.sep_id, ids)
            longest = tf.reduce_max(total) + 2
            used = tf.cast(piece <= total, tf.int32)[:, :longest]
            inputs = {
                "token_ids": ids[:, :longest],
                "segment_ids": tf.zeros_like(used),
                "padding_mask": used,
            }
            logits = tf.cast(self.model(inputs, training=False), tf.float32)
            probabilities = tf.nn.softmax(logits, axis=-1)
            # Each word's tag is its first piece's, when that piece was kept.
            scored = (per_word > 0) & (before < total)
            first = tf.clip_by_value(before + 1, 0, longest - 1)
            word_probabilities = tf.gather(probabilities, first, batch_dims=1)
            word_probabilities *= tf.expand_dims(tf.cast(scored, tf.float32), 2)
            best = tf.argmax(word_probabilities, axis=-1, output_type=tf.int32)
            padded = tf.range(most + 1)[None, :] < count[:, None]
            rows = asked[0]
            answers = {
                "words": words,
                "word_starts": tf.cast(tf.where(padded, starts, -1), tf.int64),
                "word_ends": tf.cast(tf.where(padded, ends, -1), tf.int64),
                "tag_ids": tf.cast(tf.where(scored, best, -1), tf.int64),
                "tags": tf.gather(names, tf.where(scored, best, classes)),
                "scores": tf.reduce_max(word_probabilities, axis=-1),
                "probabilities": word_probabilities,
            }
            # Cut in two slices: one slice of both axes gave numeric tensors of a
            # size LiteRT could not hand back when no row was asked for.
            return {name: value[:, :most][:rows] for name, value in answers.items()}

    return Serving()
