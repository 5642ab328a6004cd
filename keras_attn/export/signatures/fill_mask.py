"""Masked language models (`BertPretrainer`, `DebertaV3MaskedLM`): raw text with the
tokenizer's mask token in it -> the likeliest pieces for each mask, as `transformers`'
fill-mask pipeline answers."""

import tensorflow as tf

from keras_attn.export.signatures import common
from keras_attn.export.signatures.signature_kinds import serves


def mask_token(tokenizer):
    """The mask token as text writes it (`[MASK]`, `<mask>`)."""
    return tokenizer.vocabulary[tokenizer.mask_id]


def pieces_with_masks(tokenizer, text):
    """Strings `(batch,)` -> pieces `(batch, (pieces))`, the mask token written in the
    text read as the mask id (never as its characters' pieces). The text between masks
    is tokenized part by part, whitespace before a mask dropped (`transformers`' mask
    token strips on its left, so `"is <mask>"` is `is` then the mask)."""
    parts = tf.strings.split(text, sep=mask_token(tokenizer))  # (batch, (parts)), >= 1 each
    flat = parts.flat_values
    last = tf.scatter_nd(
        tf.expand_dims(parts.row_limits() - 1, 1),
        tf.ones_like(parts.row_limits(), tf.bool),
        tf.shape(flat, out_type=tf.int64),
    )
    flat = tf.where(last, flat, tf.strings.regex_replace(flat, r"\s+$", ""))
    pieces = tokenizer.tokenize(flat)
    count = tf.reduce_sum(tf.cast(~last, tf.int64))
    tails = tf.RaggedTensor.from_row_lengths(
        tf.fill([count], tf.constant(tokenizer.mask_id, pieces.dtype)),
        tf.where(last, tf.zeros_like(flat, tf.int64), 1),
    )
    return parts.with_flat_values(tf.concat([pieces, tails], axis=1)).merge_dims(1, 2)


@serves("masked_lm", top_k=5, exact_length=True)
def fill_mask_signatures(model, tokenizer, top_k, exact_length):
    """`serving_default`: `text` with mask tokens -> for each mask (in order; `-1` and
    `""` where a text has fewer) its `top_k` pieces (`token_ids`, `tokens` as text,
    `scores`: softmax probabilities over the vocabulary), its `mask_positions` in the
    packed pieces, `num_masks`, and `sequences`: the text with every mask filled by its
    likeliest piece; a mask the sequence length cuts off is not answered (`num_masks`
    counts the answered ones). `serve_token_ids`: the model's own inputs ->
    `mlm_logits`."""
    vocabulary_size = int(model.backbone.vocabulary_size)
    if not isinstance(top_k, int) or isinstance(top_k, bool) or not 1 <= top_k <= vocabulary_size:
        raise ValueError(
            f"Expected `top_k` an int in [1, {vocabulary_size}] (the vocabulary). "
            f"Received: top_k={top_k!r}"
        )
    names = ("token_ids", "segment_ids", "padding_mask")

    def serve_text(text):
        x = tokenizer.pack([pieces_with_masks(tokenizer, common.clean_text(text))])
        x = common.to_longest({k: x[k] for k in names}, exact_length)
        found = tf.where(tf.equal(x["token_ids"], tokenizer.mask_id))  # (masks, 2)
        batch = tf.shape(text, out_type=tf.int64)[0]
        rows = tf.RaggedTensor.from_value_rowids(found[:, 1], found[:, 0], nrows=batch)
        width = tf.maximum(tf.reduce_max(tf.concat([rows.row_lengths(), [0]], 0)), 1)
        positions = rows.to_tensor(default_value=-1, shape=tf.stack([batch, width]))
        real = positions >= 0
        logits = model(
            {**x, "masked_positions": tf.cast(tf.maximum(positions, 0), tf.int32)},
            training=False,
        )["mlm_logits"]
        scores, ids = tf.math.top_k(tf.nn.softmax(common.float32(logits), axis=-1), k=top_k)
        # A byte-level piece alone may be part of a character: its bad bytes -> U+FFFD.
        pieces = tokenizer.detokenize_to_tensor(tf.reshape(ids, [-1, 1]))
        tokens = tf.reshape(common.clean_text(pieces), tf.shape(ids))
        filled = tf.tensor_scatter_nd_update(
            x["token_ids"], found, tf.gather_nd(ids[..., 0], tf.where(real))
        )
        return {
            "token_ids": tf.where(real[..., None], ids, -1),
            "tokens": tf.where(real[..., None], tokens, ""),
            "scores": tf.where(real[..., None], scores, 0.0),
            "mask_positions": tf.cast(positions, tf.int32),
            "num_masks": tf.cast(rows.row_lengths(), tf.int32),
            "sequences": tokenizer.detokenize_to_tensor(filled),
        }

    def serve_token_ids(token_ids, segment_ids, padding_mask, masked_positions):
        inputs = common.token_inputs(token_ids, segment_ids, padding_mask)
        logits = model({**inputs, "masked_positions": masked_positions}, training=False)
        return {"mlm_logits": common.float32(logits["mlm_logits"])}

    mask = mask_token(tokenizer)
    words = common.warmup_texts(tokenizer)
    texts = [f"{words[0]} {mask}", f"{mask} {words[1]} {mask}"]
    warm = common.token_warmup(tokenizer, texts)
    warm["masked_positions"] = [[1, 2]] * len(texts)
    signatures = common.Signatures()
    signatures.add("serving_default", serve_text, [common.strings("text")], {"text": texts})
    signatures.add(
        "serve_token_ids",
        serve_token_ids,
        [*common.token_id_specs(), common.ids("masked_positions")],
        warm,
    )
    return signatures
