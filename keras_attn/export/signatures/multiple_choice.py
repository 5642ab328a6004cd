"""`BertMultipleChoice`: the most likely of a context's choices."""

import tensorflow as tf

from keras_attn.data.task_inputs import multiple_choice_inputs
from keras_attn.export.signatures import common
from keras_attn.export.signatures.signature_kinds import serves


@serves("multiple_choice", exact_length=True)
def multiple_choice_signatures(model, tokenizer, exact_length):
    """`serving_default` (`context`, `choices` -> probabilities, the chosen answer),
    `serve_token_ids` and `attention`."""

    def choose(context, choices):
        tf.debugging.assert_equal(
            tf.shape(choices)[1],
            model.num_choices,
            message=(
                f"Expected `choices` of shape (batch, {model.num_choices}): the model scores "
                f"{model.num_choices} choices per context."
            ),
        )
        x = multiple_choice_inputs(
            tokenizer, common.clean_text(context), common.clean_text(choices)
        )
        x = common.to_longest(x, exact_length)
        probabilities = tf.nn.softmax(common.float32(model(x, training=False)), axis=-1)
        choice_ids = tf.argmax(probabilities, axis=-1)
        return {
            "probabilities": probabilities,
            "choice_ids": choice_ids,
            "answer": tf.gather(choices, choice_ids, batch_dims=1),
        }

    def serve_token_ids(token_ids, segment_ids, padding_mask):
        logits = common.float32(
            model(common.token_inputs(token_ids, segment_ids, padding_mask), training=False)
        )
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

    texts = common.warmup_texts(tokenizer)
    choices = [
        [texts[(i + j) % len(texts)] for j in range(model.num_choices)] for i in range(len(texts))
    ]
    x = multiple_choice_inputs(tokenizer, tf.constant(texts), tf.constant(choices))
    signatures = common.Signatures()
    signatures.add(
        "serving_default",
        choose,
        [common.strings("context"), tf.TensorSpec([None, None], tf.string, "choices")],
        {"context": texts, "choices": choices},
    )
    signatures.add(
        "serve_token_ids",
        serve_token_ids,
        [common.ids(n, rank=3) for n in ("token_ids", "segment_ids", "padding_mask")],
        {k: v.numpy() for k, v in x.items()},
    )
    return common.add_attention_signature(signatures, model.backbone, tokenizer, pair=True)
