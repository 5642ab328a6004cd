"""BERT's masked-LM corruption, in-graph: choose 15% of tokens, 80/10/10 replace."""

import numpy as np
import tensorflow as tf

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int


@keras_attn_export("keras_attn.data.MaskedLMMasker", serializable=False)
class MaskedLMMasker:
    """Chooses tokens to predict and corrupts them as BERT does, inside a tf.data map.

    "We mask 15% of all WordPiece tokens in each sequence at random ... If the i-th
    token is chosen, we replace the i-th token with (1) the [MASK] token 80% of the
    time (2) a random token 10% of the time (3) the unchanged i-th token 10% of the
    time" (Devlin et al., 2018). As in Google's reference code, each sequence gets
    `min(max_predictions_per_seq, max(1, round(rate * eligible)))` predictions, so the
    rate is 15% on average; tensorflow-text's `RandomItemSelector` rounds up instead
    (about 16% on sentence-length inputs), which is why the choice is made here with
    random keys and `top_k`. Special tokens are never chosen and never drawn as the
    random replacement. Randomness is stateless: the same `seed` gives the same
    masks; a new seed per epoch (see `seeds_per_epoch`) gives dynamic masking.

    Args:
        vocabulary_size: number of token ids.
        mask_token_id: the id of `[MASK]`.
        special_token_ids: ids never chosen nor drawn (`[PAD]`, `[CLS]`, `[SEP]`,
            `[MASK]`, `[UNK]`, ...); must include the padding id.
        selection_rate: fraction of eligible tokens to predict (BERT: 0.15).
        mask_token_rate: fraction of chosen tokens replaced by `[MASK]` (0.8).
        random_token_rate: fraction replaced by a random non-special token (0.1).
        max_predictions_per_seq: the cap on predictions per sequence (BERT: 20 at
            length 128, 80 at 512).

    Call arguments:
        token_ids: int `(batch, length)` or `(length,)`, padded with special ids.
        seed: int tensor of shape `(2,)` for the stateless random ops.

    Returns:
        A dict: `token_ids` (corrupted, same shape), `masked_positions` and
        `masked_ids` `(..., max_predictions_per_seq)` int32 (padded with 0), and
        `masked_weights` float32 (1.0 for real predictions).

    Example:

    >>> import numpy as np
    >>> from keras_attn.data import MaskedLMMasker
    >>> masker = MaskedLMMasker(vocabulary_size=100, mask_token_id=3,
    ...                         special_token_ids=[0, 1, 2, 3], max_predictions_per_seq=4)
    >>> out = masker(np.array([[1, 10, 11, 12, 13, 14, 15, 2, 0, 0]]), seed=[7, 7])
    >>> int(out["masked_weights"].numpy().sum())  # round(0.15 * 6 eligible) = 1
    1

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805)
    """

    def __init__(
        self,
        vocabulary_size,
        mask_token_id,
        special_token_ids,
        selection_rate=0.15,
        mask_token_rate=0.8,
        random_token_rate=0.1,
        max_predictions_per_seq=20,
    ):
        special = sorted({int(i) for i in special_token_ids})
        if not isinstance(vocabulary_size, int) or vocabulary_size <= len(special):
            raise ValueError(
                "Expected `vocabulary_size` to be an int larger than the number of special "
                f"ids. Received: vocabulary_size={vocabulary_size!r}, special_token_ids={special}"
            )
        if not 0 <= mask_token_id < vocabulary_size or mask_token_id not in special:
            raise ValueError(
                "Expected `mask_token_id` in [0, vocabulary_size) and among `special_token_ids`. "
                f"Received: mask_token_id={mask_token_id!r}"
            )
        if not 0.0 < selection_rate <= 1.0:
            raise ValueError(
                f"Expected `selection_rate` in (0, 1]. Received: selection_rate={selection_rate!r}"
            )
        if mask_token_rate < 0 or random_token_rate < 0 or mask_token_rate + random_token_rate > 1:
            raise ValueError(
                "Expected non-negative `mask_token_rate` and `random_token_rate` summing to at "
                f"most 1. Received: mask_token_rate={mask_token_rate!r}, "
                f"random_token_rate={random_token_rate!r}"
            )
        check_positive_int("max_predictions_per_seq", max_predictions_per_seq)
        self.vocabulary_size = vocabulary_size
        self.mask_token_id = mask_token_id
        self.special_token_ids = special
        self.selection_rate = selection_rate
        self.mask_token_rate = mask_token_rate
        self.random_token_rate = random_token_rate
        self.max_predictions_per_seq = max_predictions_per_seq
        allowed = np.setdiff1d(np.arange(vocabulary_size), special)
        self._replacement_ids = tf.constant(allowed, tf.int32)
        self._special_ids = tf.constant(special, tf.int32)

    def __call__(self, token_ids, seed):
        token_ids = tf.convert_to_tensor(token_ids, tf.int32)
        if token_ids.shape.rank == 1:
            return {k: v[0] for k, v in self(token_ids[None], seed).items()}
        seeds = tf.random.experimental.stateless_split(tf.cast(seed, tf.int64), 3)
        batch, length = tf.shape(token_ids)[0], tf.shape(token_ids)[1]
        budget = self.max_predictions_per_seq

        # (batch, length): True where a token may be chosen.
        eligible = tf.reduce_all(token_ids[:, :, None] != self._special_ids, axis=-1)
        count = tf.reduce_sum(tf.cast(eligible, tf.float32), axis=1)
        # round half away from zero, like Python's round() in Google's reference code
        chosen = tf.minimum(
            tf.maximum(tf.floor(count * self.selection_rate + 0.5), 1.0), float(budget)
        )
        chosen = tf.cast(tf.minimum(chosen, count), tf.int32)  # (batch,)

        # A random key per eligible position; the top keys are the chosen ones.
        keys = tf.random.stateless_uniform(tf.shape(token_ids), seeds[0])
        keys = tf.where(eligible, keys, -1.0)
        pad = tf.maximum(budget - length, 0)  # sequences shorter than the budget
        keys = tf.pad(keys, [[0, 0], [0, pad]], constant_values=-2.0)
        _, positions = tf.math.top_k(keys, k=budget)  # (batch, budget)
        valid = tf.range(budget)[None, :] < chosen[:, None]
        positions = tf.where(valid, positions, 0)
        originals = tf.where(valid, tf.gather(token_ids, positions, batch_dims=1), 0)

        # 80% [MASK], 10% a random non-special token, 10% unchanged.
        action = tf.random.stateless_uniform([batch, budget], seeds[1])
        random_ids = tf.gather(
            self._replacement_ids,
            tf.random.stateless_uniform(
                [batch, budget], seeds[2], maxval=tf.shape(self._replacement_ids)[0], dtype=tf.int32
            ),
        )
        replacement = tf.where(
            action < self.mask_token_rate,
            self.mask_token_id,
            tf.where(action < self.mask_token_rate + self.random_token_rate, random_ids, originals),
        )
        rows = tf.broadcast_to(tf.range(batch)[:, None], [batch, budget])
        indices = tf.boolean_mask(tf.stack([rows, positions], axis=-1), valid)
        corrupted = tf.tensor_scatter_nd_update(
            token_ids, indices, tf.boolean_mask(replacement, valid)
        )
        return {
            "token_ids": corrupted,
            "masked_positions": positions,
            "masked_ids": originals,
            "masked_weights": tf.cast(valid, tf.float32),
        }
