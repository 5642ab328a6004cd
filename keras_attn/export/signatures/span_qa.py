"""Span QA (`BertSpanQA`): the best answer span of a context, as text and byte offsets."""

import tensorflow as tf

from keras_attn.data.task_inputs import span_qa_inputs
from keras_attn.export.signatures import common
from keras_attn.export.signatures.signature_kinds import serves

# What is answered when the context has no word piece to point at.
NO_ANSWER_SCORE = -1e9


@serves("span_qa", max_question_length=64, max_answer_length=30, exact_length=True)
def span_qa_signatures(model, tokenizer, max_question_length, max_answer_length, exact_length):
    """`serving_default` (`question`, `context` -> the answer, its byte offsets,
    its score), `serve_token_ids` and `attention`."""

    def answer(question, context):
        context = common.clean_text(context)
        x = span_qa_inputs(
            tokenizer, common.clean_text(question), context, max_question_length=max_question_length
        )
        x = common.to_longest(x, exact_length)
        outputs = model(
            {k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")}, training=False
        )
        starts, ends, scores = model.decode_spans(
            outputs["start_logits"],
            outputs["end_logits"],
            x["context_mask"],
            max_answer_length=max_answer_length,
        )
        found = tf.reduce_any(x["context_mask"] > 0, axis=1)
        rows = tf.range(tf.shape(starts)[0])
        start_byte = tf.cast(tf.gather_nd(x["token_starts"], tf.stack([rows, starts], 1)), tf.int64)
        end_byte = tf.cast(tf.gather_nd(x["token_ends"], tf.stack([rows, ends], 1)), tf.int64)
        start_byte, end_byte = tf.where(found, start_byte, -1), tf.where(found, end_byte, -1)
        text = tf.strings.substr(
            context, tf.maximum(start_byte, 0), tf.maximum(end_byte - start_byte, 0), unit="BYTE"
        )
        return {
            "answer": tf.where(found, text, ""),
            "answer_start": start_byte,
            "answer_end": end_byte,
            "score": tf.where(found, common.float32(scores), NO_ANSWER_SCORE),
        }

    def serve_token_ids(token_ids, segment_ids, padding_mask):
        outputs = model(common.token_inputs(token_ids, segment_ids, padding_mask), training=False)
        return {
            "start_logits": common.float32(outputs["start_logits"]),
            "end_logits": common.float32(outputs["end_logits"]),
        }

    texts = common.warmup_texts(tokenizer)
    questions = ["which one ?"] * len(texts)
    x = span_qa_inputs(
        tokenizer,
        tf.constant(questions),
        tf.constant(texts),
        max_question_length=max_question_length,
    )
    signatures = common.Signatures()
    signatures.add(
        "serving_default",
        answer,
        [common.strings("question"), common.strings("context")],
        {"question": questions, "context": texts},
    )
    signatures.add(
        "serve_token_ids",
        serve_token_ids,
        common.token_id_specs(),
        {k: x[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask")},
    )
    return common.add_attention_signature(signatures, model.backbone, tokenizer, pair=True)
