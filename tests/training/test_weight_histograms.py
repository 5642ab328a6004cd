"""`WeightHistograms`: each weight's buckets as `tensorboard`'s own `histogram_pb` counts
them, written at the optimizer's step every N epochs, read back by TensorBoard's reader."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.histogram import summary_v2

from keras_attn.training import WeightHistograms


def _model():
    model = keras.Sequential([keras.Input((3,)), keras.layers.Dense(4), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    return model


@pytest.mark.parametrize(
    "values",
    [
        np.random.default_rng(0).normal(size=(64, 48)),
        np.array([1.5, -2.0, 0.25, 7.0]),
        np.zeros(5),  # one value: the count in the last bucket
        np.zeros(0),
    ],
    ids=["normal", "few", "constant", "empty"],
)
def test_buckets_equal_tensorboards_histogram_pb(values):
    ours = WeightHistograms("unused")._histogram(values.ravel())
    theirs = tf.make_ndarray(summary_v2.histogram_pb("t", values).value[0].tensor)
    np.testing.assert_allclose(ours[:, :2], theirs[:, :2], rtol=1e-12, atol=1e-12)
    assert ours[:, 2].tolist() == theirs[:, 2].tolist()


def test_a_diverged_weight_counts_its_finite_values_only():
    values = np.array([1.5, np.nan, -2.0, np.inf, 0.25, -np.inf, 7.0])
    rows = WeightHistograms("unused")._histogram(values)
    expected = WeightHistograms("unused")._histogram(np.array([1.5, -2.0, 0.25, 7.0]))
    np.testing.assert_array_equal(rows, expected)
    assert rows[:, 2].sum() == 4
    assert not WeightHistograms("unused")._histogram(np.full(3, np.nan)).any()


def test_every_weight_is_written_at_the_optimizers_step(tmp_path):
    model = _model()
    x, y = np.random.default_rng(1).normal(size=(8, 3)), np.ones(8)
    histograms = WeightHistograms(tmp_path, every=2)
    model.fit(x, y, batch_size=4, epochs=4, verbose=0, callbacks=[histograms])  # 2 steps each
    reader = event_accumulator.EventAccumulator(
        str(tmp_path / "train"), size_guidance={event_accumulator.TENSORS: 0}
    )
    reader.Reload()
    tags = sorted(reader.Tags()["tensors"])
    assert tags == sorted(f"{w.path}/histogram" for w in model.weights)
    kernel = f"{model.layers[0].kernel.path}/histogram"
    events = reader.Tensors(kernel)
    assert [e.step for e in events] == [4, 8]  # epochs 2 and 4
    final = tf.make_ndarray(events[-1].tensor_proto)
    np.testing.assert_array_equal(final, histograms.buckets_of(model)[kernel])
    assert final[:, 2].sum() == 3 * 4


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="`every` an int >= 1.*every=0"):
        WeightHistograms("logs", every=0)
    with pytest.raises(ValueError, match="`buckets` an int >= 1.*buckets=2.5"):
        WeightHistograms("logs", buckets=2.5)
