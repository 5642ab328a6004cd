"""Hard (stochastic) attention, Xu et al. (2015): each query picks keys instead of
averaging them, and the REINFORCE estimator that trains the choice."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int, check_positive_number
from keras_attn.layers import scoring
from keras_attn.layers.layer_utils import build_sequence_score
from keras_attn.layers.masking import keras_mask, masked_softmax

ESTIMATORS = ("reinforce", "gumbel")
_TINY = 1e-9


@keras_attn_export("keras_attn.layers.HardAttention")
class HardAttention(keras.layers.Layer):
    """Hard attention: each query attends to `samples` keys drawn from its attention
    distribution (Xu et al., 2015, section 4.1, "stochastic hard attention").

    The distribution is `softmax(score(q, k))` over the real keys, as for soft
    attention; the context is the mean of the sampled keys' values. Sampling has no
    gradient, so training needs an estimator:

    - `"reinforce"` (the paper's): the call returns the samples' log-probabilities
      `log p(s | q)`; `ReinforceBaseline` and `reinforce_loss` turn a task loss into
      the surrogate whose gradient is the REINFORCE estimate (with a moving-average
      baseline and an entropy bonus, as Xu et al.).
    - `"gumbel"`: straight-through Gumbel-softmax (Jang et al., 2017): the forward
      pass picks `argmax(log p + Gumbel noise)` (a sample of the same distribution),
      the backward pass differentiates the relaxed `softmax((log p + g) / τ)`.

    At inference (`training=False`) the choice is deterministic: the most probable
    key (`samples` > 1: the `samples` most probable, averaged) — the documented
    choice here, so that a served model answers the same way twice.

    Args:
        score: the scoring function (name or `AttentionScore`; default `"additive"`,
            Xu et al.'s).
        samples: keys drawn per query (with replacement), > 0.
        estimator: `"reinforce"` or `"gumbel"`.
        temperature: `τ` of the Gumbel-softmax relaxation (> 0).
        seed: seed of the sampling.
        **kwargs: base layer arguments (`name`, `dtype`, ...).

    Call arguments:
        query: `(batch, query_len, query_dim)`.
        value: `(batch, key_len, value_dim)`.
        key: `(batch, key_len, key_dim)` (default: `value`).
        value_mask: `(batch, key_len)`, True at real keys (default: the Keras mask).
        training: sample (True) or take the most probable keys.
        return_details: return a dict instead of the context alone.

    Returns:
        The context `(batch, query_len, value_dim)`; with `return_details` a dict:
        `context`, `log_probs` `(batch, query_len)` (the sum over the samples of
        `log p(s | q)`, differentiable in the scores), `entropy` `(batch, query_len)`
        of each distribution, `probabilities` `(batch, query_len, key_len)` and
        `choices` `(batch, query_len, samples)` (the key indices).

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import HardAttention
    >>> layer = HardAttention(score="dot", seed=0)
    >>> query = np.array([[[0.0, 5.0]]], "float32")
    >>> value = np.array([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]], "float32")
    >>> out = layer(query, value, return_details=True)  # inference: the best key
    >>> [ops.convert_to_numpy(out[name]).tolist() for name in ("choices", "context")]
    [[[[1]]], [[[0.0, 1.0]]]]
    >>> sampled = layer(query, value, training=True, return_details=True)
    >>> tuple(sampled["log_probs"].shape)
    (1, 1)

    References:
        - [Xu et al., 2015](https://arxiv.org/abs/1502.03044)
        - [Williams, 1992](https://doi.org/10.1007/BF00992696)
        - [Jang et al., 2017](https://arxiv.org/abs/1611.01144)
    """

    def __init__(
        self,
        score="additive",
        samples=1,
        estimator="reinforce",
        temperature=1.0,
        seed=None,
        **kwargs,
    ):
        check_positive_int("samples", samples)
        if estimator not in ESTIMATORS:
            raise ValueError(
                f"Expected `estimator` in {ESTIMATORS}. Received: estimator={estimator!r}"
            )
        check_positive_number("temperature", temperature)
        super().__init__(**kwargs)
        self.score = scoring.get(score)
        self.samples = samples
        self.estimator = estimator
        self.temperature = temperature
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.supports_masking = True

    def build(self, query_shape, value_shape, key_shape=None):
        build_sequence_score(self.score, query_shape, value_shape, key_shape)
        self.built = True

    def call(self, query, value, key=None, value_mask=None, training=None, return_details=False):
        key = value if key is None else key
        if value_mask is None:
            value_mask = keras_mask(value)
        scores = ops.cast(self.score(query, key), "float32")  # (batch, q, k)
        mask = None if value_mask is None else ops.cast(value_mask, "bool")[:, None, :]
        probabilities, _ = masked_softmax(scores[:, None], mask)
        probabilities = probabilities[:, 0]  # (batch, q, k)
        log_p = ops.log(probabilities + _TINY)
        if mask is not None:  # masked keys can never be drawn
            log_p = ops.where(mask, log_p, -1e9)
        keys = ops.shape(key)[1]
        if training and self.estimator == "gumbel":
            uniform = keras.random.uniform(
                (self.samples, *ops.shape(log_p)),
                minval=_TINY,
                maxval=1.0,
                seed=self.seed_generator,
            )
            perturbed = log_p[None] - ops.log(-ops.log(uniform))  # (samples, b, q, k)
            choices = ops.argmax(perturbed, axis=-1)  # (samples, b, q)
            soft = ops.softmax(perturbed / self.temperature, axis=-1)
            hard = ops.one_hot(choices, keys, dtype="float32")
            weights = ops.mean(hard + soft - ops.stop_gradient(soft), axis=0)  # straight-through
            choices = ops.transpose(choices, (1, 2, 0))
        else:
            if training:  # REINFORCE: sample, no gradient through the choice
                flat = ops.reshape(ops.stop_gradient(log_p), (-1, keys))
                choices = keras.random.categorical(
                    flat, self.samples, seed=self.seed_generator, dtype="int32"
                )
            else:  # inference: the most probable keys
                _, choices = ops.top_k(ops.reshape(probabilities, (-1, keys)), self.samples)
            choices = ops.reshape(choices, (*ops.shape(log_p)[:2], self.samples))
            weights = ops.mean(ops.one_hot(choices, keys, dtype="float32"), axis=2)
        chosen = ops.one_hot(choices, keys, dtype="float32")  # (b, q, samples, k)
        log_probs = ops.sum(ops.sum(chosen * log_p[:, :, None], axis=-1), axis=-1)
        context = ops.matmul(ops.cast(weights, self.compute_dtype), value)
        if not return_details:
            return context
        return {
            "context": context,
            "log_probs": log_probs,
            "entropy": -ops.sum(probabilities * ops.log(probabilities + _TINY), axis=-1),
            "probabilities": probabilities,
            "choices": ops.cast(choices, "int32"),
        }

    def compute_mask(self, query, value, key=None, mask=None, **kwargs):
        return keras_mask(query)

    def compute_output_spec(self, query, value, key=None, return_details=False, **kwargs):
        key = value if key is None else key
        context = keras.KerasTensor((*query.shape[:-1], value.shape[-1]), self.compute_dtype)
        if not return_details:
            return context
        per_query = keras.KerasTensor(tuple(query.shape[:2]), "float32")
        return {
            "context": context,
            "log_probs": per_query,
            "entropy": keras.KerasTensor(tuple(query.shape[:2]), "float32"),
            "probabilities": keras.KerasTensor((*query.shape[:2], key.shape[1]), "float32"),
            "choices": keras.KerasTensor((*query.shape[:2], self.samples), "int32"),
        }

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "score": scoring.serialize(self.score),
                "samples": self.samples,
                "estimator": self.estimator,
                "temperature": self.temperature,
                "seed": self.seed,
            }
        )
        return config


@keras_attn_export("keras_attn.layers.ReinforceBaseline")
class ReinforceBaseline(keras.layers.Layer):
    """The moving-average baseline of Xu et al.'s estimator:
    `b_k = decay · b_{k-1} + (1 - decay) · mean reward of batch k`.

    Call it on the rewards of a batch (e.g. `log p(y | sampled attention)`, the
    negative task loss per example): it returns `reward - b` with no gradient (the
    advantage that weights the samples' log-probabilities) and, when training,
    moves `b` towards the batch's mean reward (the first batch sets it).

    Args:
        decay: the moving average's decay, in [0, 1) (the paper: 0.9).
        **kwargs: base layer arguments.

    Call arguments:
        reward: `(batch, ...)` rewards.
        training: update the baseline.

    Returns:
        The advantage, shaped as `reward`.

    Example:

    >>> import numpy as np
    >>> from keras import ops
    >>> from keras_attn.layers import ReinforceBaseline
    >>> baseline = ReinforceBaseline(decay=0.5)
    >>> advantage = baseline(np.array([1.0, 3.0]), training=True)  # b starts at 2
    >>> ops.convert_to_numpy(advantage).tolist()
    [-1.0, 1.0]
    >>> float(ops.convert_to_numpy(baseline.value))
    2.0
    """

    def __init__(self, decay=0.9, **kwargs):
        if isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 <= decay < 1:
            raise ValueError(f"Expected `decay` in [0, 1). Received: decay={decay!r}")
        super().__init__(**kwargs)
        self.decay = decay

    def build(self, reward_shape=None):
        self.value = self.add_weight(name="value", shape=(), initializer="zeros", trainable=False)
        self.count = self.add_weight(name="count", shape=(), initializer="zeros", trainable=False)
        self.built = True

    def call(self, reward, training=None):
        reward = ops.stop_gradient(ops.cast(reward, "float32"))
        if training:
            mean = ops.mean(reward)
            first = ops.equal(self.count, 0.0)
            moved = self.decay * self.value + (1.0 - self.decay) * mean
            self.value.assign(ops.where(first, mean, moved))
            self.count.assign(self.count + 1.0)
        return reward - self.value

    def get_config(self):
        return {**super().get_config(), "decay": self.decay}


@keras_attn_export("keras_attn.layers.reinforce_loss", serializable=False)
def reinforce_loss(task_loss, log_probs, advantage, entropy=None, entropy_weight=0.0):
    """Xu et al.'s surrogate loss: its gradient is their estimate (eq. 12).

    `L = task_loss - advantage · Σ log p(s) - entropy_weight · H`, averaged over the
    batch: the first term trains the rest of the model on the sampled attention, the
    second moves the attention towards samples that did better than the baseline
    (`advantage = reward - b`, no gradient), the third keeps the distributions from
    collapsing early.

    Args:
        task_loss: `(batch,)` loss of each example given its samples.
        log_probs: `(batch, ...)` log-probabilities of the samples (`HardAttention`'s
            `log_probs`), summed over the trailing axes.
        advantage: `(batch,)` (`ReinforceBaseline`'s output).
        entropy: `(batch, ...)` entropies of the distributions, or None.
        entropy_weight: `λ_e` (>= 0).

    Returns:
        A scalar.

    Example:

    >>> import numpy as np
    >>> from keras_attn.layers import reinforce_loss
    >>> float(reinforce_loss(np.array([1.0]), np.array([[-0.5, -0.5]]), np.array([2.0])))
    3.0
    """
    task_loss = ops.cast(task_loss, "float32")
    log_probs = ops.cast(log_probs, "float32")
    summed = ops.reshape(log_probs, (ops.shape(log_probs)[0], -1))
    surrogate = task_loss - ops.stop_gradient(ops.cast(advantage, "float32")) * ops.sum(
        summed, axis=-1
    )
    if entropy is not None and entropy_weight:
        entropy = ops.reshape(ops.cast(entropy, "float32"), (ops.shape(log_probs)[0], -1))
        surrogate = surrogate - entropy_weight * ops.sum(entropy, axis=-1)
    return ops.mean(surrogate)
