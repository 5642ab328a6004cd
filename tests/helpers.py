"""The one shared check for layers, and small utilities the tests share."""

import keras
import numpy as np


def run_layer_test(
    layer_cls,
    init_kwargs,
    input_data,
    call_kwargs=None,
    expected_output_shape=None,
    expected_num_trainable_weights=None,
    tmp_path=None,
    unchanged_weights=(),
):
    """Builds, calls (eager and symbolic), fits one step, saves and reloads a layer.

    Args:
        layer_cls: the layer class.
        init_kwargs: constructor arguments.
        input_data: dict of call-argument name -> numpy array (tensor arguments).
        call_kwargs: other call arguments (Python values).
        expected_output_shape: shape of the (first) output in eager mode.
        expected_num_trainable_weights: checked after building.
        tmp_path: folder for the `.keras` round trip (pytest's `tmp_path`).
        unchanged_weights: path suffixes of weights whose gradient is zero by the
            mathematics (e.g. the key bias under dot scoring, which adds the same
            `q . b_k` to every key's score and so cancels in the softmax).

    Returns:
        The eager output (first output if several).
    """
    call_kwargs = call_kwargs or {}

    # Config round trip.
    layer = layer_cls(**init_kwargs)
    config = layer.get_config()
    assert layer_cls.from_config(config).get_config() == config
    assert (
        keras.saving.deserialize_keras_object(
            keras.saving.serialize_keras_object(layer)
        ).get_config()
        == config
    )

    # Eager call.
    output = _first(layer(**input_data, **call_kwargs))
    if expected_output_shape is not None:
        assert tuple(output.shape) == tuple(expected_output_shape)
    if expected_num_trainable_weights is not None:
        assert len(layer.trainable_weights) == expected_num_trainable_weights

    # Symbolic call: same shapes (batch left unknown), then a functional model.
    inputs = {
        name: keras.Input(shape=value.shape[1:], dtype=str(value.dtype), name=name)
        for name, value in input_data.items()
    }
    symbolic_layer = layer_cls(**init_kwargs)
    symbolic = symbolic_layer(**inputs, **call_kwargs)
    eager_outputs = keras.tree.flatten(symbolic_layer(**input_data, **call_kwargs))
    for sym, eager in zip(keras.tree.flatten(symbolic), eager_outputs, strict=True):
        assert tuple(sym.shape)[1:] == tuple(eager.shape)[1:], (sym.shape, eager.shape)
    model = keras.Model(inputs, _first(symbolic))

    # One training step moves every trainable weight.
    before = [np.array(w) for w in model.trainable_weights]
    model.compile(optimizer=keras.optimizers.SGD(0.1), loss="mse")
    target = np.random.default_rng(0).normal(size=output.shape).astype("float32")
    model.fit(input_data, target, batch_size=len(target), epochs=1, verbose=0)
    for w, old in zip(model.trainable_weights, before, strict=True):
        if w.path.endswith(tuple(unchanged_weights)):
            continue
        assert not np.allclose(np.array(w), old), f"{w.path} did not change in fit"

    # .keras save and reload: identical outputs.
    if tmp_path is not None:
        path = str(tmp_path / "layer_test.keras")
        model.save(path)
        reloaded = keras.saving.load_model(path)
        np.testing.assert_allclose(
            np.array(reloaded(input_data)), np.array(model(input_data)), atol=1e-6, rtol=0
        )
    return output


def _first(outputs):
    return outputs[0] if isinstance(outputs, (tuple, list)) else outputs


def max_abs_diff(a, b):
    return float(np.max(np.abs(np.asarray(a, "float64") - np.asarray(b, "float64"))))
