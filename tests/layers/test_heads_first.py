"""`layer_utils.heads_first` inside `served_graph` (a TF Serving graph's transposes, on
the float bits read as integers on TensorFlow) equals the plain transpose, every dtype
and backend, in a traced graph and eagerly, and is its own inverse."""

import keras
import numpy as np
import pytest
from keras import ops

from keras_attn.layers import layer_utils
from tests.helpers import ALL_BACKENDS, to_numpy

pytestmark = pytest.mark.backends(*ALL_BACKENDS)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16", "float64", "int32"])
def test_served_heads_first_equals_the_transpose(dtype):
    x = ops.cast(np.random.default_rng(0).normal(size=(2, 5, 3, 4)) * 9, dtype)
    expected = to_numpy(ops.transpose(x, (0, 2, 1, 3)), "float64")
    with layer_utils.served_graph():
        served = layer_utils.heads_first(x)
        back = layer_utils.heads_first(served)
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            graph = tf.function(layer_utils.heads_first).get_concrete_function(x).graph
            ops_run = [node.type for node in graph.get_operations()]
            assert ("Bitcast" in ops_run) == (dtype in ("float32", "bfloat16", "float16"))
    assert served.dtype == x.dtype  # (JAX without x64 holds float64 as float32)
    assert tuple(served.shape) == (2, 3, 5, 4)
    np.testing.assert_array_equal(to_numpy(served, "float64"), expected)
    np.testing.assert_array_equal(to_numpy(back, "float64"), to_numpy(x, "float64"))
    assert not layer_utils._SERVED_GRAPH  # the context leaves no trace
