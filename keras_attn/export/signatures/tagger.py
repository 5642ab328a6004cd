"""`BertTokenClassifier`: a tag per word of raw text, with the words' byte offsets."""

import tensorflow as tf
import tensorflow_text as tf_text

from keras_attn.data.task_inputs import tagging_inputs
from keras_attn.export.signatures import common
from keras_attn.export.signatures.signature_kinds import serves

# Words of raw text: runs of non-space characters, with each punctuation or symbol
# character a word of its own (BERT's basic tokenizer).
WORD_DELIMITERS = r"\s+|[\p{P}\p{S}]"
KEPT_DELIMITERS = r"[\p{P}\p{S}]"


def split_words(text):
    """Raw strings -> words `(batch, (words))` and their UTF-8 byte starts and ends."""
    return tf_text.regex_split_with_offsets(text, WORD_DELIMITERS, KEPT_DELIMITERS)


@serves("tagger", labels=None, exact_length=True)
def tagger_signatures(model, tokenizer, labels, exact_length):
    """`serving_default` (`text` -> words with their tags, byte offsets, scores),
    `serve_token_ids` and `attention`."""
    names = common.label_names(labels, model.num_classes, what="labels (tag names)")
    num_classes = model.num_classes

    def serve_text(text):
        text = common.clean_text(text)
        words, starts, ends = split_words(text)
        x = common.to_longest(tagging_inputs(tokenizer, words), exact_length)
        probabilities = tf.nn.softmax(
            common.float32(
                model(
                    {k: x[k] for k in ("token_ids", "segment_ids", "padding_mask")}, training=False
                )
            ),
            axis=-1,
        )
        # The first piece of every word carries the word's tag (as in training).
        word_ids = tf.cast(x["word_ids"], tf.int64)
        previous = tf.pad(word_ids[:, :-1], [[0, 0], [1, 0]], constant_values=-1)
        first = tf.where((word_ids >= 0) & (word_ids != previous))  # (pieces, 2): row, position
        batch = tf.shape(text, out_type=tf.int64)[0]
        max_words = tf.reduce_max(tf.concat([words.row_lengths(), tf.zeros([1], tf.int64)], axis=0))
        target = tf.stack([first[:, 0], tf.gather_nd(word_ids, first)], axis=1)
        word_probabilities = tf.scatter_nd(
            target, tf.gather_nd(probabilities, first), tf.stack([batch, max_words, num_classes])
        )
        scored = (
            tf.scatter_nd(
                target, tf.ones(tf.shape(first)[:1], tf.int32), tf.stack([batch, max_words])
            )
            > 0
        )
        tag_ids = tf.where(scored, tf.argmax(word_probabilities, axis=-1), -1)
        shape = tf.stack([batch, max_words])
        return {
            "words": words.to_tensor(default_value="", shape=shape),
            "word_starts": starts.to_tensor(default_value=-1, shape=shape),
            "word_ends": ends.to_tensor(default_value=-1, shape=shape),
            "tag_ids": tag_ids,
            "tags": tf.where(scored, tf.gather(names, tf.maximum(tag_ids, 0)), ""),
            "scores": tf.reduce_max(word_probabilities, axis=-1),
            "probabilities": word_probabilities,
        }

    def serve_token_ids(token_ids, segment_ids, padding_mask):
        logits = common.float32(
            model(common.token_inputs(token_ids, segment_ids, padding_mask), training=False)
        )
        return {"logits": logits, "probabilities": tf.nn.softmax(logits, axis=-1)}

    return common.single_text_signatures(serve_text, serve_token_ids, tokenizer, model.backbone)
