"""`BertBackbone`: sentence embeddings (mean-pooled, normalised) and the pooled output."""

import tensorflow as tf

from keras_attn.export.signatures import common
from keras_attn.export.signatures.signature_kinds import serves


@serves("encoder", exact_length=True)
def backbone_signatures(model, tokenizer, exact_length):
    """`serving_default` (`text` -> sentence embeddings, pooled output),
    `serve_token_ids` and `attention`."""

    def embed(inputs):
        outputs = model(inputs, training=False)
        sequence = common.float32(outputs["sequence_output"])
        mask = common.float32(inputs["padding_mask"])[..., None]
        mean = tf.reduce_sum(sequence * mask, axis=1) / tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
        return (
            sequence,
            common.float32(outputs["pooled_output"]),
            tf.math.l2_normalize(mean, axis=-1),
        )

    def serve_text(text):
        _, pooled, embeddings = embed(
            common.to_longest(tokenizer(common.clean_text(text)), exact_length)
        )
        return {"embeddings": embeddings, "pooled_output": pooled}

    def serve_token_ids(token_ids, segment_ids, padding_mask):
        sequence, pooled, _ = embed(common.token_inputs(token_ids, segment_ids, padding_mask))
        return {"sequence_output": sequence, "pooled_output": pooled}

    return common.single_text_signatures(serve_text, serve_token_ids, tokenizer, model)
