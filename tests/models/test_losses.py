"""LabelSmoothedCrossEntropy against Keras's CategoricalCrossentropy(label_smoothing)."""

import keras
import numpy as np
import pytest

from keras_attn.training import LabelSmoothedCrossEntropy


@pytest.mark.parametrize("smoothing", [0.0, 0.1, 0.3])
def test_equals_keras_smoothed_categorical_cross_entropy_on_real_tokens(smoothing):
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(3, 5, 11)).astype("float32") * 3
    labels = rng.integers(1, 11, (3, 5))
    labels[0, 3:] = 0  # padding
    labels[2, 1:] = 0
    real = labels != 0
    reference = keras.losses.CategoricalCrossentropy(
        from_logits=True, label_smoothing=smoothing, reduction=None
    )(keras.ops.one_hot(labels, 11), logits)
    expected = float(np.asarray(reference)[real].mean())
    ours = LabelSmoothedCrossEntropy(smoothing, ignore_class=0)
    assert float(ours(labels, logits)) == pytest.approx(expected, rel=1e-5)
    # With the data's padding weights too (as the pipelines give them): the same mean.
    assert float(ours(labels, logits, sample_weight=real.astype("float32"))) == pytest.approx(
        expected, rel=1e-5
    )
    # Without ignore_class every position counts.
    everything = float(np.asarray(reference).mean())
    assert float(LabelSmoothedCrossEntropy(smoothing)(labels, logits)) == pytest.approx(
        everything, rel=1e-5
    )


def test_config_and_bad_smoothing():
    loss = LabelSmoothedCrossEntropy(0.2, ignore_class=0)
    assert (
        LabelSmoothedCrossEntropy.from_config(loss.get_config()).get_config() == loss.get_config()
    )
    restored = keras.losses.deserialize(keras.losses.serialize(loss))
    assert isinstance(restored, LabelSmoothedCrossEntropy) and restored.label_smoothing == 0.2
    with pytest.raises(ValueError, match="label_smoothing"):
        LabelSmoothedCrossEntropy(1.0)
