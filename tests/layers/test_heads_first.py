"""`layer_utils.heads_first` inside `served_graph` (a TF Serving graph's transposes, on
the float bits read as integers on TensorFlow) equals the plain transpose, every dtype
and backend, in a traced graph and eagerly, and is its own inverse; an export's context
in one thread leaves another thread's layers alone."""

import threading

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
    assert layer_utils._TRACE.served_graph == 0  # the context leaves no trace


def test_an_export_in_another_thread_leaves_this_threads_layers_alone():
    """Tracing runs in the thread that calls the function: while another thread is inside
    an export's `served_graph` and `replaced_products`, this thread's layers transpose
    and multiply as ever (a model trained here would otherwise get the served graph's
    bitcasts, which have no gradient, or an export's int8 products)."""
    dense = keras.layers.Dense(3)
    dense.build((None, 4))
    rows = ops.convert_to_tensor(np.random.default_rng(0).normal(size=(2, 4)), "float32")
    replacement = {id(dense): (dense, 1, lambda rows: ops.zeros((rows.shape[0], 3)))}
    entered, leave = threading.Event(), threading.Event()

    def export():
        with layer_utils.served_graph(), layer_utils.replaced_products(replacement):
            entered.set()
            leave.wait(60)

    thread = threading.Thread(target=export)
    thread.start()
    try:
        assert entered.wait(60)
        product = layer_utils._rows_product(dense, rows)
        np.testing.assert_allclose(to_numpy(product), to_numpy(dense(rows)), atol=1e-6)
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            x = np.zeros((2, 5, 3, 4), "float32")
            graph = tf.function(layer_utils.heads_first).get_concrete_function(x).graph
            assert "Bitcast" not in [node.type for node in graph.get_operations()]
    finally:
        leave.set()
        thread.join()
    with layer_utils.replaced_products(replacement):  # in this thread, it is taken
        assert not np.any(to_numpy(layer_utils._rows_product(dense, rows)))
