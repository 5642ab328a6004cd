"""The BERT pre-training input pipeline: sentence pairs, then dynamic masking."""

import tensorflow as tf

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.data.bert_pretraining_dataset")
def bert_pretraining_dataset(sampler, masker, batch_size, seed=0, shuffle=True):
    """`(x, y, sample_weight)` batches for `BertPretrainer.fit`, masked anew each epoch.

    Pairs come from `sampler` (`SentencePairSampler`), masks from `masker`
    (`MaskedLMMasker`), both with stateless randomness driven by `seed`, so a run is
    reproducible and each epoch sees new pairs and new masks ("dynamic masking").

    Args:
        sampler: a `SentencePairSampler`.
        masker: a `MaskedLMMasker`.
        batch_size: examples per batch (the last partial batch is dropped, so every
            batch has a static shape).
        seed: int seed of the pipeline.
        shuffle: shuffle the anchors each epoch.

    Returns:
        A `tf.data.Dataset` of `(x, y, sample_weight)`: `x` has `token_ids`,
        `segment_ids`, `padding_mask`, `masked_positions`; `y` has `mlm_logits`
        (original ids) and `nsp_logits`/`sop_logits` (labels); `sample_weight` has
        the masked-LM weights and ones for the sentence head.

    Example:

    >>> from keras_attn.data import (MaskedLMMasker, SentencePairSampler,
    ...     WordPieceTokenizer, bert_pretraining_dataset)
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "a", "b", "c", "."]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=12)
    >>> sampler = SentencePairSampler(tokenizer, [["a b .", "c a ."], ["b b .", "c c ."]])
    >>> masker = MaskedLMMasker(len(vocab), tokenizer.mask_id, tokenizer.special_token_ids,
    ...                         max_predictions_per_seq=2)
    >>> x, y, w = next(iter(bert_pretraining_dataset(sampler, masker, batch_size=1)))
    >>> sorted(x), sorted(y)
    (['masked_positions', 'padding_mask', 'segment_ids', 'token_ids'], ['mlm_logits', 'nsp_logits'])
    """
    head = f"{sampler.objective}_logits"
    masking_seeds = tf.data.Dataset.random(seed=seed + 1, rerandomize_each_iteration=True).batch(2)

    def to_training_example(pair, masking_seed):
        masked = masker(pair["token_ids"], masking_seed)
        x = {
            "token_ids": masked["token_ids"],
            "segment_ids": pair["segment_ids"],
            "padding_mask": pair["padding_mask"],
            "masked_positions": masked["masked_positions"],
        }
        y = {"mlm_logits": masked["masked_ids"], head: pair["label"]}
        return x, y, {"mlm_logits": masked["masked_weights"], head: tf.ones([])}

    pairs = sampler.dataset(seed=seed, shuffle=shuffle)
    return (
        tf.data.Dataset.zip(pairs, masking_seeds)
        .map(to_training_example, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .batch(batch_size, drop_remainder=True)
        .prefetch(tf.data.AUTOTUNE)
    )
