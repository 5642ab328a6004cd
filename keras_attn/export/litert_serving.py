"""The serving functions of LiteRT exports, written in operators LiteRT has: TensorFlow
Text's TFLite custom operators for the tokenizer (`FastBertNormalize`,
`FastWordpieceTokenizeWithOffsets`, `RaggedTensorToTensor`, `ByteSplitByOffsets`) and
builtins for the rest; each is the SavedModel's `serving_default` for its kind of model
(TensorFlow, tensorflow-text; imported when first used)."""

import tensorflow as tf


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


def classifier_module(model, tokenizer, labels):
    """A `tf.Module` whose `serve(text)` is a classifier's `serving_default` for single
    texts: the tokenizer's own `FastBertTokenizer` (pieces cut to `sequence_length -
    2`), `[CLS] pieces [SEP]` and the padding as dense arithmetic, the batch cut to its
    longest text."""
    length = tokenizer.sequence_length
    names = tf.constant(labels)
    pad, cls, sep = tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id

    class Serving(_Serving):
        @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="text")])
        def serve(self, text):
            (text,), asked = _one_row_if_empty(text)
            pieces = self.tokenizer.tokenize(text)  # (batch, pieces), ragged
            body = pieces.to_tensor(default_value=pad, shape=[None, length - 2])
            kept = tf.cast(tf.minimum(pieces.row_lengths(), length - 2), tf.int32)
            rows = tf.shape(text)[:1]
            edge = tf.fill(tf.concat([rows, [1]], 0), cls)
            ids = tf.concat([edge, body, tf.fill(tf.concat([rows, [1]], 0), pad)], axis=1)
            positions = tf.range(length)[None, :]
            ids = tf.where(positions == kept[:, None] + 1, sep, ids)
            mask = tf.cast(positions < kept[:, None] + 2, tf.int32)
            longest = tf.reduce_max(kept) + 2
            inputs = {
                "token_ids": ids[:, :longest],
                "segment_ids": tf.zeros_like(ids[:, :longest]),
                "padding_mask": mask[:, :longest],
            }
            logits = tf.cast(self.model(inputs, training=False), tf.float32)
            probabilities = tf.nn.softmax(logits)
            label_ids = tf.argmax(probabilities, axis=-1)
            label_ids = label_ids[: asked[0]]
            return {
                "probabilities": probabilities[: asked[0]],
                "label_ids": label_ids,
                "labels": tf.gather(names, label_ids),
            }

    return Serving(model, tokenizer)


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
    pad, cls, sep = tokenizer.pad_id, tokenizer.cls_id, tokenizer.sep_id
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

            count = tf.cast(pieces.row_lengths(), tf.int32)
            return pieces.to_tensor(shape=[None, length]), count, original(starts), original(ends)

        @tf.function(
            input_signature=[
                tf.TensorSpec([None], tf.string, name="question"),
                tf.TensorSpec([None], tf.string, name="context"),
            ]
        )
        def serve(self, question, context):
            (question, context), asked = _one_row_if_empty(question, context)
            asked_pieces = self.tokenizer.tokenize(question)
            question_ids = asked_pieces.to_tensor(shape=[None, length])
            question_count = tf.cast(asked_pieces.row_lengths(), tf.int32)
            context_ids, context_count, starts, ends = self.context_pieces(context)
            # As `span_qa_inputs` and the pair packing: the question cut to its limit
            # (and to the whole budget), the context to what is left.
            kept_q = tf.minimum(question_count, min(max_question_length, budget))[:, None]
            kept_c = tf.minimum(context_count[:, None], budget - kept_q)
            p = tf.range(length)[None, :] + tf.zeros_like(kept_q)  # (batch, length)
            in_question = (p >= 1) & (p <= kept_q)
            in_context = (p >= kept_q + 2) & (p < kept_q + 2 + kept_c)
            c_index = tf.clip_by_value(p - kept_q - 2, 0, length - 1)
            q_ids = tf.gather(question_ids, tf.clip_by_value(p - 1, 0, length - 1), batch_dims=1)
            ids = tf.where(in_question, q_ids, pad)
            ids = tf.where(in_context, tf.gather(context_ids, c_index, batch_dims=1), ids)
            ids = tf.where((p == 0), cls, ids)
            ids = tf.where((p == kept_q + 1) | (p == kept_q + 2 + kept_c), sep, ids)
            used = kept_q + kept_c + 3
            longest = tf.reduce_max(used)
            inputs = {
                "token_ids": ids[:, :longest],
                "segment_ids": tf.cast(p >= kept_q + 2, tf.int32)[:, :longest]
                * tf.cast(p < used, tf.int32)[:, :longest],
                "padding_mask": tf.cast(p < used, tf.int32)[:, :longest],
            }
            outputs = self.model(inputs, training=False)
            best_start, best_end, scores = best_spans(
                outputs["start_logits"],
                outputs["end_logits"],
                in_context[:, :longest],
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
