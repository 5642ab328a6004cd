"""ERNIE's pre-training examples in the graph: BERT's masked sentence pairs with each
piece's entity, corrupted for the denoising entity auto-encoder (dEA)."""

import tensorflow as tf

from keras_attn.api_export import keras_attn_export
from keras_attn.data.pretraining_examples import _masked


@keras_attn_export("keras_attn.data.dea_corruption")
def dea_corruption(entity_ids, num_entities, seed, replace_rate=0.05, remove_rate=0.15):
    """dEA's corruption and targets in the graph (`keras_attn.models.dea_inputs`' rule):
    of the pieces with an entity, `replace_rate` get a random one (1..`num_entities`),
    `remove_rate` lose theirs; each of them is a target, its entity's first position
    among the row's entities (`entity_candidates`: the row's entity ids at their first
    occurrence, 0 elsewhere, one slot per position).

    Args:
        entity_ids: int tensor `(batch, length)`, 0 where a piece has no entity.
        num_entities: the entities a replacement is drawn from.
        seed: int tensor `(2,)`, for the stateless draws.
        replace_rate, remove_rate: the corruption's shares (the paper's 5% and 15%).

    Returns:
        A dict of `(batch, length)` tensors: `entity_ids` (corrupted), `entity_candidates`,
        `dea_labels` int32 and `dea_weights` float32.

    Example:

    >>> from keras_attn.data import dea_corruption
    >>> out = dea_corruption([[0, 7, 0, 3, 7]], 9, seed=[1, 2], replace_rate=0.0,
    ...                      remove_rate=0.0)
    >>> out["entity_candidates"].numpy().tolist(), out["dea_labels"].numpy().tolist()
    ([[0, 7, 0, 3, 0]], [[0, 1, 0, 3, 1]])
    """
    entity_ids = tf.cast(tf.convert_to_tensor(entity_ids), tf.int32)
    length = tf.shape(entity_ids)[1]
    linked = entity_ids > 0
    same = tf.equal(entity_ids[:, :, None], entity_ids[:, None, :]) & linked[:, None, :]
    before = tf.range(length)[None, :, None] > tf.range(length)[None, None, :]  # k < j
    first = linked & ~tf.reduce_any(same & before, axis=-1)
    candidates = tf.where(first, entity_ids, 0)
    labels = tf.argmax(tf.cast(same & first[:, None, :], tf.int32), axis=-1, output_type=tf.int32)
    seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 2)
    draw = tf.random.stateless_uniform(tf.shape(entity_ids), seeds[0])
    random_ids = tf.random.stateless_uniform(
        tf.shape(entity_ids), seeds[1], minval=1, maxval=num_entities + 1, dtype=tf.int32
    )
    corrupted = tf.where(linked & (draw < remove_rate), 0, entity_ids)
    replaced = linked & (draw >= remove_rate) & (draw < remove_rate + replace_rate)
    return {
        "entity_ids": tf.where(replaced, random_ids, corrupted),
        "entity_candidates": candidates,
        "dea_labels": tf.where(linked, labels, 0),
        "dea_weights": tf.cast(linked, tf.float32),
    }


@keras_attn_export("keras_attn.data.ernie_pretraining_example")
def ernie_pretraining_example(sampler, masker):
    """`(anchor, seed) -> (x, y, sample_weight)`: a masked sentence pair (or a batch of
    them, vectorised) with its pieces' entities corrupted for dEA, for `ErniePretrainer`;
    `sampler` is a `SentencePairSampler` with a `linker`.

    Example:

    >>> from keras_attn.data import (GraphLinker, MaskedLMMasker, SentencePairSampler,
    ...     WordPieceTokenizer, ernie_pretraining_example)
    >>> from keras_attn.knowledge import EntityLinker, WordNet
    >>> ids = {"01855672-n": 1, "07614500-n": 2}  # goose, ice cream
    >>> linker = GraphLinker(EntityLinker(WordNet.load(), synsets=ids), ids)
    >>> vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "gee", "##se", "ice", "cream"]
    >>> tokenizer = WordPieceTokenizer(vocab, sequence_length=12)
    >>> sampler = SentencePairSampler(tokenizer, [["geese", "ice cream"], ["ice", "geese"]],
    ...                               linker=linker)
    >>> masker = MaskedLMMasker(len(vocab), 4, [0, 1, 2, 3, 4], max_predictions_per_seq=2)
    >>> x, y, w = ernie_pretraining_example(sampler, masker)([0, 1], [3, 4])
    >>> sorted(x), sorted(y)  # doctest: +NORMALIZE_WHITESPACE
    (['entity_candidates', 'entity_ids', 'masked_positions', 'padding_mask', 'segment_ids',
      'token_ids'], ['dea_logits', 'mlm_logits', 'nsp_logits'])
    """
    if getattr(sampler, "linker", None) is None:
        raise ValueError("Expected a SentencePairSampler with a `linker` (ERNIE's entities)")
    head = f"{sampler.objective}_logits"
    num_entities = sampler.linker.num_entities

    def example(anchor, seed):
        pair_seed, masking_seed, dea_seed = tf.unstack(
            tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 3)
        )
        pair = sampler(tf.cast(anchor, tf.int32), pair_seed)
        x, y, weights = _masked(pair, masker(pair["token_ids"], masking_seed), head)
        single = pair["entity_ids"].shape.rank == 1
        entities = pair["entity_ids"][None] if single else pair["entity_ids"]
        dea = dea_corruption(entities, num_entities, dea_seed)
        if single:
            dea = {k: v[0] for k, v in dea.items()}
        x["entity_ids"], x["entity_candidates"] = dea["entity_ids"], dea["entity_candidates"]
        y["dea_logits"], weights["dea_logits"] = dea["dea_labels"], dea["dea_weights"]
        return x, y, weights

    return example
