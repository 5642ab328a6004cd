"""`BertSpanQA`: the best answer span of a context, as text and byte offsets."""

import tensorflow as tf

from keras_attn.data.task_inputs import span_qa_inputs
from keras_attn.export.signatures.common import (Signatures, add_attention_signature, clean_text, float32,
                                                 strings, token_id_specs, token_inputs, warmup_texts)
from keras_attn.export.signatures.registry import serves
from keras_attn.models import BertSpanQA

# What is answered when the context has no word piece to point at.
NO_ANSWER_SCORE = -1e9


@serves(BertSpanQA, max_question_length=64, max_answer_length=30)
def span_qa_signatures(model, tokenizer, max_question_length, max_answer_length):
    """`serving_default` (`question`, `context` -> the answer, its byte offsets,
    its score), `serve_token_ids` and `attention`."""
    def answer(question, context):
        context = clean_text(context)
        x = span_qa_inputs(tokenizer, clean_text(question), context, max_question_length=max_question_length)
        outputs = model({k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")}, training=False)
        starts, ends, scores = BertSpanQA.decode_spans(outputs["start_logits"], outputs["end_logits"],
                                                       x["context_mask"], max_answer_length=max_answer_length)
        found = tf.reduce_any(x["context_mask"] > 0, axis=1)
        rows = tf.range(tf.shape(starts)[0])
        start_byte = tf.cast(tf.gather_nd(x["token_starts"], tf.stack([rows, starts], 1)), tf.int64)
        end_byte = tf.cast(tf.gather_nd(x["token_ends"], tf.stack([rows, ends], 1)), tf.int64)
        start_byte, end_byte = tf.where(found, start_byte, -1), tf.where(found, end_byte, -1)
        text = tf.strings.substr(context, tf.maximum(start_byte, 0), tf.maximum(end_byte - start_byte, 0), unit="BYTE")
        return {
            "answer": tf.where(found, text, ""),
            "answer_start": start_byte,
            "answer_end": end_byte,
            "score": tf.where(found, float32(scores), NO_ANSWER_SCORE),
        }

    def serve_token_ids(token_ids, segment_ids, padding_mask):
        outputs = model(token_inputs(token_ids, segment_ids, padding_mask), training=False)
        return {"start_logits": float32(outputs["start_logits"]), "end_logits": float32(outputs["end_logits"])}

    texts = warmup_texts(tokenizer)
    questions = ["which one ?"] * len(texts)
    x = span_qa_inputs(tokenizer, tf.constant(questions), tf.constant(texts), max_question_length=max_question_length)
    signatures = Signatures()
    signatures.add("serving_default", answer, [strings("question"), strings("context")],
                   {"question": questions, "context": texts})
    signatures.add("serve_token_ids", serve_token_ids, token_id_specs(),
                   {k: x[k].numpy() for k in ("token_ids", "segment_ids", "padding_mask")})
    return add_attention_signature(signatures, model.backbone, tokenizer, pair=True)
