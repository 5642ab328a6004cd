"""What ELECTRA's discriminator has learned, as Keras metrics over real tokens.

Accuracy says little in replaced-token detection: about 88% of tokens are original,
and a discriminator that calls every token original scores 88%. These metrics say
whether it ranks and finds the replacements, and whether it does so from context or
from word rarity alone (a generator's samples follow the corpus's frequencies, so
among frequent pieces only the context gives a replacement away):

- `rtd_auc`: area under the ROC curve of the "replaced" logit, over every real token.
- `rtd_recall`: share of the replaced tokens called replaced (logit > 0).
- `frequent_rtd_auc`, `frequent_rtd_recall`: the same among tokens that are one of
  the corpus's most frequent pieces (replacements and originals alike), when the
  pretrainer is given `frequent_ids`.
"""

import keras
import numpy as np
from keras import ops

# Thresholds of the AUC's confusion matrices, spread over sigmoid(logit) in [0, 1].
AUC_THRESHOLDS = 1000


def diagnostic_metrics(frequent):
    """`{name: metric}` of the module's metrics (`frequent`: with the frequent ones)."""
    groups = ("", "frequent_") if frequent else ("",)
    metrics = {}
    for group in groups:
        metrics[f"{group}rtd_auc"] = keras.metrics.AUC(
            num_thresholds=AUC_THRESHOLDS, from_logits=True, name=f"{group}rtd_auc"
        )
        metrics[f"{group}rtd_recall"] = keras.metrics.Mean(name=f"{group}rtd_recall")
    return metrics


def frequent_piece_mask(frequent_ids, vocabulary_size):
    """`(vocabulary_size,)` float32: 1 at `frequent_ids`, else 0."""
    mask = np.zeros((vocabulary_size,), "float32")
    mask[np.asarray(frequent_ids, "int64")] = 1.0
    return mask


def update_diagnostics(metrics, logits, labels, real, token_ids=None, frequent_mask=None):
    """Updates `diagnostic_metrics`' metrics from a batch.

    Args:
        logits: `(batch, length)` "replaced" logits.
        labels: `(batch, length)`, 1 where the token was replaced.
        real: `(batch, length)`, 1 for a real token (0: padding).
        token_ids: the discriminator's input ids (for the frequent metrics).
        frequent_mask: `frequent_piece_mask(...)`, or None.
    """
    labels, real = ops.cast(labels, "float32"), ops.cast(real, "float32")
    groups = [("", real)]
    if frequent_mask is not None and "frequent_rtd_auc" in metrics:
        frequent = ops.take(ops.convert_to_tensor(frequent_mask), ops.cast(token_ids, "int32"))
        groups.append(("frequent_", real * frequent))
    called = ops.cast(logits > 0, "float32")
    for group, weights in groups:
        metrics[f"{group}rtd_auc"].update_state(
            ops.reshape(labels, (-1,)), ops.reshape(logits, (-1,)), ops.reshape(weights, (-1,))
        )
        replaced = labels * weights
        metrics[f"{group}rtd_recall"].update_state(called, sample_weight=replaced)
