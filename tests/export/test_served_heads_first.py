"""`ServingPlan.heads_first` (a TF Serving graph's transposes, on the float bits read as
integers) equals the plain transpose, every dtype, in a traced graph and eagerly, and is
its own inverse; a serving copy leaves its model alone. TensorFlow only, as SavedModels
are: the layers' plain transposes run on every backend in tests/layers."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.export.serving_plan import ServingPlan, serving_copy
from keras_attn.layers import TransformerEncoderBlock, compute_plan, layer_utils
from tests.helpers import to_numpy


def bitcasts(function, *args):
    """How many `Bitcast` ops TensorFlow's trace of `function(*args)` holds."""
    import tensorflow as tf

    graph = tf.function(function).get_concrete_function(*args).graph
    return [node.type for node in graph.get_operations()].count("Bitcast")


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64", "int32"])
def test_served_heads_first_equals_the_transpose(dtype):
    x = ops.cast(np.random.default_rng(0).normal(size=(2, 5, 3, 4)) * 9, dtype)
    expected = to_numpy(ops.transpose(x, (0, 2, 1, 3)), "float64")
    plan = ServingPlan()
    served = plan.heads_first(x)
    back = plan.heads_first(served)
    float_bits = dtype in ("float32", "bfloat16", "float16")
    assert bitcasts(plan.heads_first, x) == (2 if float_bits else 0)
    assert bitcasts(layer_utils.heads_first, x) == 0
    assert served.dtype == x.dtype
    assert tuple(served.shape) == (2, 3, 5, 4)
    np.testing.assert_array_equal(to_numpy(served, "float64"), expected)
    np.testing.assert_array_equal(to_numpy(back, "float64"), to_numpy(x, "float64"))


def test_a_serving_copy_leaves_its_model_alone():
    """The plan is given to a copy: the model itself keeps Keras's own ops (a model
    trained while another thread exports it would otherwise get the served graph's
    bitcasts, which have no gradient), and the copy answers as it does."""
    keras.utils.set_random_seed(0)
    inputs = keras.Input((None, 8))
    model = keras.Model(inputs, TransformerEncoderBlock(num_heads=2, intermediate_dim=16)(inputs))
    copy = serving_copy(model)
    plans = {
        name: [
            layer.compute_plan for layer in m._flatten_layers() if hasattr(layer, "compute_plan")
        ]
        for name, m in (("model", model), ("copy", copy))
    }
    assert len(plans["model"]) == 2  # the block and its attention
    assert all(plan is compute_plan.PLAIN for plan in plans["model"])
    assert len(plans["copy"]) == 2 and all(isinstance(p, ServingPlan) for p in plans["copy"])
    x = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")
    np.testing.assert_allclose(to_numpy(copy(x)), to_numpy(model(x)), atol=2e-6)
    assert bitcasts(model, x) == 0
    assert bitcasts(copy, x) > 0
