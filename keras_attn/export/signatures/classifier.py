"""`BertClassifier`, `XLNetClassifier`, `GPTFineTuner`: labels for texts and text pairs,
and TF Serving's Classify API."""

import tensorflow as tf

from keras_attn.export.signatures import common
from keras_attn.export.signatures.signature_kinds import serves


@serves("classifier", labels=None, text_pair=False, exact_length=True)
def classifier_signatures(model, tokenizer, labels, text_pair, exact_length):
    """`serving_default` (`text`[, `text_pair`] -> probabilities, label ids and names),
    `serve_token_ids`, `classify` (TF Serving's Classify API) and `attention` (BERT)."""
    names = common.label_names(labels, model.num_classes)

    def classify(inputs):
        outputs = model(common.model_inputs(model, inputs), training=False)
        # GPT-1's head: its logits beside the language model's.
        logits = common.float32(outputs["logits"] if isinstance(outputs, dict) else outputs)
        probabilities = tf.nn.softmax(logits, axis=-1)
        label_ids = tf.argmax(probabilities, axis=-1)
        return logits, probabilities, label_ids, tf.gather(names, label_ids)

    # One function for `serving_default` and `classify`: the tokenizer and the model are
    # traced once for both (a byte-pair tokenizer takes seconds a trace), and the
    # SavedModel holds their graph once.
    @tf.function(autograph=False)
    def from_text(text, pair=None):
        x = tokenizer(common.clean_text(text), None if pair is None else common.clean_text(pair))
        _, probabilities, label_ids, labels = classify(common.to_longest(x, exact_length))
        return {
            "probabilities": probabilities,
            "label_ids": label_ids,
            "labels": labels,
        }

    def from_examples(inputs):
        features = {"text": tf.io.FixedLenFeature([], tf.string)}
        if text_pair:
            features["text_pair"] = tf.io.FixedLenFeature([], tf.string)
        parsed = tf.io.parse_example(inputs, features)
        probabilities = from_text(parsed["text"], parsed.get("text_pair"))["probabilities"]
        classes = tf.tile(names[None], [tf.shape(probabilities)[0], 1])
        return {"classes": classes, "scores": probabilities}

    def serve_token_ids(token_ids, segment_ids, padding_mask):
        logits, probabilities, _, _ = classify(
            common.token_inputs(token_ids, segment_ids, padding_mask)
        )
        return {"logits": logits, "probabilities": probabilities}

    texts = common.warmup_texts(tokenizer)
    pairs = list(reversed(texts)) if text_pair else None
    signatures = common.Signatures()
    if text_pair:
        signatures.add(
            "serving_default",
            lambda text, text_pair: from_text(text, text_pair),
            [common.strings("text"), common.strings("text_pair")],
            {"text": texts, "text_pair": pairs},
        )
    else:
        signatures.add(
            "serving_default",
            lambda text: from_text(text),
            [common.strings("text")],
            {"text": texts},
        )
    signatures.add(
        "serve_token_ids",
        serve_token_ids,
        common.token_id_specs(),
        common.token_warmup(tokenizer, texts, pairs),
    )
    examples = [
        {"text": t, **({"text_pair": p} if text_pair else {})}
        for t, p in zip(texts, pairs or texts, strict=True)
    ]
    signatures.add("classify", from_examples, [common.strings("inputs")], {"inputs": examples})
    signatures.classify.add("classify")
    return common.add_attention_signature(signatures, model.backbone, tokenizer, pair=text_pair)
