"""XLNet pre-training: permutation language modelling with partial prediction."""

import math

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int, check_positive_number
from keras_attn.models.functional_model import CompiledOnLoad
from keras_attn.models.layout_maps import LayoutMapMixin
from keras_attn.models.lora import LoraMixin
from keras_attn.models.xlnet.xlnet_backbone import INPUTS, XLNetBackbone


@keras_attn_export("keras_attn.models.XLNetPretrainer")
class XLNetPretrainer(LayoutMapMixin, LoraMixin, CompiledOnLoad, keras.Model):
    """Permutation language modelling (Yang et al., 2019, sections 2.2-2.3).

    For every sequence a factorisation order `z` of its real tokens is drawn at
    random, and only the last `1/K` of it is predicted ("partial prediction",
    `K = partial_prediction`, 6 or 7 in the paper): the other tokens form the
    context, which every position sees and which sees no target. Target `z_t` is
    predicted from the query stream, which knows its position but not its token
    and sees the context and the targets before it in `z`; the content stream
    of a target also sees the target itself. The logits are the query stream
    times the transposed token embedding plus a bias (XLNet's `lm_loss`); the
    loss is their cross-entropy, averaged over the targets. `fit` reports `loss`
    and `accuracy` (of the targets).

    Args:
        backbone: an `XLNetBackbone`.
        partial_prediction: K: a sequence of `n` real tokens (special tokens left
            out) has `round(n / K)` targets (at least 1, at most `max_predictions`).
        max_predictions: targets per sequence at most (`None`: `ceil(length / K)`,
            the length known when traced).
        special_token_ids: ids never predicted (`[CLS]`, `[SEP]`: XLNet's "functional
            tokens"); they stay in the context, which every position sees.
        seed: seed of the orders (`None`: random).
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: the backbone's dict (`token_ids`, `segment_ids`, `padding_mask`).
        training: whether dropout is active.

    Returns:
        A dict: `logits` `(batch, predictions, vocabulary_size)` float32, and the
        sampled `target_ids`, `target_weights` (0 for unused rows) `(batch,
        predictions)`, `target_mapping` `(batch, predictions, length)` and
        `permutation_mask` `(batch, length, length)` (True where `i` may see `j`).

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import XLNetBackbone, XLNetPretrainer
    >>> backbone = XLNetBackbone(100, num_layers=2, num_heads=2, hidden_dim=32,
    ...                          intermediate_dim=64)
    >>> pretrainer = XLNetPretrainer(backbone, partial_prediction=4, seed=0)
    >>> inputs = {"token_ids": np.arange(1, 9)[None], "segment_ids": np.zeros((1, 8)),
    ...           "padding_mask": np.ones((1, 8))}
    >>> tuple(pretrainer(inputs)["logits"].shape)  # 8 tokens / K = 2 targets
    (1, 2, 100)

    References:
        - [Yang et al., 2019](https://arxiv.org/abs/1906.08237)
    """

    def __init__(
        self,
        backbone,
        partial_prediction=6,
        max_predictions=None,
        special_token_ids=(),
        seed=None,
        **kwargs,
    ):
        if not isinstance(backbone, XLNetBackbone):
            raise TypeError(
                f"Expected `backbone` to be an XLNetBackbone. Received: {type(backbone).__name__}"
            )
        check_positive_number("partial_prediction", partial_prediction)
        check_positive_int("max_predictions", max_predictions, allow_none=True)
        special_token_ids = [int(i) for i in special_token_ids]
        if any(not 0 <= i < backbone.vocabulary_size for i in special_token_ids):
            raise ValueError(
                f"Expected `special_token_ids` in [0, {backbone.vocabulary_size}). "
                f"Received: special_token_ids={special_token_ids}"
            )
        super().__init__(**kwargs)
        self.backbone = backbone
        self.lm_bias = self.add_weight(
            name="lm_bias", shape=(backbone.vocabulary_size,), initializer="zeros"
        )
        self.seed_generator = keras.random.SeedGenerator(seed)
        self.trackers = {name: keras.metrics.Mean(name=name) for name in ("lm_loss", "accuracy")}
        self.built = True
        self.partial_prediction = partial_prediction
        self.max_predictions = max_predictions
        self.special_token_ids = special_token_ids
        self.seed = seed

    def sample_order(self, inputs, training=True):
        """A random factorisation order per sequence -> `permutation_mask`,
        `target_mapping`, `target_ids`, `target_weights` (see the class). Outside
        training the orders are fixed (drawn from `seed`, default 0, without advancing
        the generator): validation scores the same orders at every evaluation."""
        token_ids = ops.convert_to_tensor(inputs["token_ids"])
        length = token_ids.shape[1]
        predictions = self.max_predictions
        if predictions is None:
            if length is None:
                raise ValueError(
                    "Set `max_predictions` for inputs whose length is unknown when traced. "
                    f"Received: token_ids.shape={tuple(token_ids.shape)}"
                )
            predictions = math.ceil(length / self.partial_prediction)
        candidates = ops.cast(inputs["padding_mask"], "bool")  # the tokens that may be targets
        for special in self.special_token_ids:
            candidates = ops.logical_and(candidates, ops.not_equal(token_ids, special))
        seed = self.seed_generator if training else (self.seed or 0)
        draws = keras.random.uniform(ops.shape(token_ids), seed=seed)
        order = ops.argsort(-ops.where(candidates, draws, -1.0), axis=-1)  # candidates first
        place = ops.argsort(order, axis=-1)  # each position's index in the order
        count = ops.sum(ops.cast(candidates, "float32"), axis=-1)
        targets = ops.clip(ops.round(count / self.partial_prediction), 1, predictions)
        targets = ops.where(count > 0, targets, 0.0)[:, None]  # (batch, 1)
        is_target = ops.cast(place, "float32") < targets  # the last 1/K of the order
        rank = ops.where(is_target, place, -1)  # context tokens share rank -1
        # (batch, length, length): i sees j when j is context or j's rank is lower.
        permutation_mask = ops.logical_or(
            ops.logical_not(is_target)[:, None, :], rank[:, None, :] < rank[:, :, None]
        )
        chosen = order[:, :predictions]  # (batch, predictions): the targets, in order
        weights = ops.cast(ops.arange(predictions, dtype="float32")[None] < targets, "float32")
        target_mapping = ops.one_hot(chosen, ops.shape(token_ids)[1]) * weights[..., None]
        return {
            "permutation_mask": permutation_mask,
            "target_mapping": target_mapping,
            "target_ids": ops.take_along_axis(ops.cast(token_ids, "int32"), chosen, axis=1),
            "target_weights": weights,
        }

    def target_logits(self, inputs, permutation_mask, target_mapping, training=False):
        """`(batch, predictions, vocabulary_size)` float32 logits of the query stream
        at `target_mapping`'s positions, under `permutation_mask`."""
        outputs = self.backbone.encode(
            {name: inputs[name] for name in INPUTS},
            permutation_mask=permutation_mask,
            target_mapping=target_mapping,
            training=training,
        )
        query = outputs["query_output"]
        embeddings = ops.cast(self.backbone.token_embedding.embeddings, query.dtype)
        logits = ops.matmul(query, ops.transpose(embeddings)) + ops.cast(self.lm_bias, query.dtype)
        return ops.cast(logits, "float32")

    def call(self, inputs, training=None):
        order = self.sample_order(inputs, training=bool(training))
        logits = self.target_logits(
            inputs, order["permutation_mask"], order["target_mapping"], training=training
        )
        return {"logits": logits, **order}

    def compile(self, optimizer="adam", **kwargs):
        """The loss and metrics are the model's own; `compile` takes the optimizer."""
        super().compile(optimizer=optimizer, **kwargs)

    @staticmethod
    def _lm_loss(y_pred):
        weights = y_pred["target_weights"]
        losses = keras.losses.sparse_categorical_crossentropy(
            y_pred["target_ids"], y_pred["logits"], from_logits=True
        )
        return ops.sum(losses * weights) / ops.maximum(ops.sum(weights), 1.0)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        """The targets' cross-entropy (`y` is unused: the targets are the tokens)."""
        loss = self._lm_loss(y_pred)
        if training and self.losses:
            loss = loss + ops.sum(ops.stack(self.losses))
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        hits = ops.cast(
            ops.equal(ops.argmax(y_pred["logits"], axis=-1), y_pred["target_ids"]), "float32"
        )
        self.trackers["lm_loss"].update_state(self._lm_loss(y_pred))
        self.trackers["accuracy"].update_state(hits, sample_weight=y_pred["target_weights"])
        return super().compute_metrics(x, y, y_pred, sample_weight)

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """Loads a Hugging Face `XLNetLMHeadModel` folder: the backbone and the LM
        head's bias (its weight is the word embedding).

        Args:
            path: the checkpoint folder.
            **kwargs: `XLNetPretrainer` arguments (`partial_prediction`, `seed`).

        Returns:
            An `XLNetPretrainer` whose `target_logits` equal the Hugging Face
            model's logits (its `perm_mask` negated).
        """
        from keras_attn.models.xlnet import xlnet_checkpoint

        backbone, tensors, _ = xlnet_checkpoint.backbone_and_tensors(XLNetBackbone, path)
        if xlnet_checkpoint.LM_BIAS not in tensors:
            raise xlnet_checkpoint.CheckpointError(
                f"{path}: expected an XLNetLMHeadModel checkpoint with "
                f"{xlnet_checkpoint.LM_BIAS!r}; found only the backbone's weights"
            )
        pretrainer = cls(backbone, **kwargs)
        pretrainer.lm_bias.assign(tensors[xlnet_checkpoint.LM_BIAS])
        return pretrainer

    def save_pretrained(self, path):
        """Writes the Hugging Face `XLNetLMHeadModel` layout (backbone and LM bias).

        Args:
            path: the folder to write (created if needed).

        Returns:
            The folder.
        """
        from keras_attn.models.xlnet import xlnet_checkpoint

        return xlnet_checkpoint.save_backbone(
            self.backbone, path, keras.ops.convert_to_numpy(self.lm_bias)
        )

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            "partial_prediction": self.partial_prediction,
            "max_predictions": self.max_predictions,
            "special_token_ids": self.special_token_ids,
            "seed": self.seed,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        return cls(**config)
