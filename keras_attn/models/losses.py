"""Label-smoothed cross-entropy over a vocabulary, skipping padding."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export


@keras_attn_export("keras_attn.training.LabelSmoothedCrossEntropy")
class LabelSmoothedCrossEntropy(keras.losses.Loss):
    """Cross-entropy from logits against integer labels smoothed by `label_smoothing`.

    "During training, we employed label smoothing of value eps_ls = 0.1. This hurts
    perplexity, as the model learns to be more unsure, but improves accuracy and
    BLEU score" (Vaswani et al., 2017). The target distribution is
    `(1 - eps) one_hot(y) + eps / V`, so per token
    `loss = (1 - eps) (-log p_y) + eps mean_v(-log p_v)` (as
    `keras.losses.CategoricalCrossentropy(label_smoothing=eps)` on one-hot labels,
    without materialising them). Tokens equal to `ignore_class` add nothing and do
    not count in the mean.

    Args:
        label_smoothing: `eps`, in [0, 1).
        ignore_class: label id to skip (padding), or None.
        reduction: Keras loss reduction.
        name: loss name.

    Call arguments:
        y_true: integer labels `(batch, length)`.
        y_pred: logits `(batch, length, vocabulary)`.
        sample_weight: optional weights `(batch, length)`.

    Example:

    >>> import numpy as np
    >>> from keras_attn.training import LabelSmoothedCrossEntropy
    >>> loss = LabelSmoothedCrossEntropy(0.1, ignore_class=0)
    >>> logits = np.zeros((1, 3, 5), "float32")  # uniform: loss log(5) per real token
    >>> round(float(loss(np.array([[2, 3, 0]]), logits)), 4)
    1.6094
    """

    def __init__(
        self,
        label_smoothing=0.1,
        ignore_class=None,
        reduction="sum_over_batch_size",
        name="label_smoothed_cross_entropy",
    ):
        super().__init__(reduction=reduction, name=name)
        if (
            isinstance(label_smoothing, bool)
            or not isinstance(label_smoothing, (int, float))
            or not (0 <= label_smoothing < 1)
        ):
            raise ValueError(
                "Expected `label_smoothing` in [0, 1). Received: "
                f"label_smoothing={label_smoothing!r}"
            )
        self.label_smoothing = float(label_smoothing)
        self.ignore_class = ignore_class

    def call(self, y_true, y_pred):
        log_probs = ops.log_softmax(ops.cast(y_pred, "float32"), axis=-1)  # (..., vocabulary)
        labels = ops.cast(y_true, "int32")
        valid = None
        if self.ignore_class is not None:
            valid = labels != self.ignore_class
            labels = ops.where(valid, labels, 0)
        nll = -ops.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
        loss = (1.0 - self.label_smoothing) * nll
        if self.label_smoothing:
            loss = loss - self.label_smoothing * ops.mean(log_probs, axis=-1)
        if valid is not None:
            loss = ops.where(valid, loss, 0.0)
            if self.reduction in ("sum_over_batch_size", "mean"):
                # Keras divides the sum by the number of positions; scaled by
                # positions / real tokens, the result is the mean over real tokens
                # (what Keras does for a masked loss), with or without sample weights.
                count = ops.cast(ops.size(valid), "float32")
                loss = loss * (count / ops.maximum(ops.sum(ops.cast(valid, "float32")), 1.0))
        return loss

    def get_config(self):
        config = super().get_config()
        config.update({"label_smoothing": self.label_smoothing, "ignore_class": self.ignore_class})
        return config
