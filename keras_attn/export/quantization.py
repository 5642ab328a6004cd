"""int8 weights or bfloat16 for serving: a copy of a model, the original left as it is."""

import re
import warnings

import keras

from keras_attn.api_export import keras_attn_export

# Keras's modes that TensorFlow's SavedModel and TF Serving's CPU kernels run.
QUANTIZATION_MODES = ("int8",)
# A SavedModel's: "int8" multiplies on oneDNN's int8 products where this TensorFlow
# runs them (`keras_attn.export.onednn_int8`), else as Keras's int8 layers do;
# "int8-portable" always as Keras's layers do (any TensorFlow serves it); "int8-weights"
# int8 weights multiplied with float inputs (`quantized_copy(weights_only=True)`: what
# decoding, bound by reading the weights, wants).
SAVED_MODEL_QUANTIZATION = ("int8", "int8-portable", "int8-weights")
# The floating-point precisions a SavedModel can be served in (`precision_copy`).
PRECISIONS = ("float32", "bfloat16")
# Keras's dtype policies that `precision_copy` replaces: every float one.
_FLOAT_POLICIES = ("float16", "float32", "float64", "bfloat16", "mixed_float16", "mixed_bfloat16")


def embeddings_only(layer):
    """`quantized_copy`'s filter for the embedding tables alone."""
    return isinstance(layer, keras.layers.Embedding)


def int8_products_for(quantize):
    """Whether a SavedModel exported with `quantize` multiplies on oneDNN's int8 products
    (the one place that decides it); a mode not in `SAVED_MODEL_QUANTIZATION` is refused."""
    if quantize is None:
        return False
    if quantize not in SAVED_MODEL_QUANTIZATION:
        raise ValueError(
            f"Expected `quantize` to be None or one of {list(SAVED_MODEL_QUANTIZATION)}. "
            f"Received: quantize={quantize!r}"
        )
    from keras_attn.export.onednn_int8 import onednn_int8_available

    return quantize == "int8" and onednn_int8_available()


@keras_attn_export("keras_attn.export.quantized_copy")
def quantized_copy(model, mode="int8", filters=None, weights_only=False):
    """A copy of `model` whose projections hold int8 weights (Keras's `quantize`).

    Every `Dense` and `EinsumDense` layer (the attention's query, key, value and
    output projections, the feed-forward layers, the heads) and every `Embedding`
    keeps its kernel as int8 with one float32 scale per output unit
    (per-channel absmax); at call time the layer's inputs are quantized per row the
    same way, multiplied in int8 with int32 sums and scaled back, so outputs stay
    float32. Layer norms, position embeddings and the attention scores stay
    float. The weights take about a quarter of their float32 size. `model` itself is
    not changed (Keras's `model.quantize` works in place), so one trained model can be
    exported both ways. With `weights_only` the inputs are not quantized: each product
    multiplies the float inputs by the int8 kernel brought back to float (Keras's
    `Int8QuantizationConfig` without an activation quantizer), which is what decoding,
    bound by reading the weights, wants. Layers never called (a weightless layer of a
    model built from a file) are left as they are.

    Args:
        model: a built Keras model (any of `keras_attn.models`'s).
        mode: `"int8"`.
        filters: which layers to quantize, as Keras's `Model.quantize` takes them (a
            regular expression of layer names, a list of them, or a callable on the
            layer); `None`: every layer that can be.
        weights_only: int8 weights, float inputs (default `False`: both int8).

    Returns:
        The quantized copy, a new model of the same class.

    Example:

    >>> import numpy as np
    >>> from keras_attn.export import quantized_copy
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=50), num_classes=2)
    >>> small = quantized_copy(model)
    >>> small.backbone.get_layer("pooled_dense").kernel.dtype, model.dtype_policy.name
    ('int8', 'float32')
    >>> x = {"token_ids": np.array([[2, 7, 9, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32")}
    >>> bool(np.abs(np.asarray(small(x)) - np.asarray(model(x))).max() < 0.05)
    True
    """
    if mode not in QUANTIZATION_MODES:
        raise ValueError(
            f"Expected `quantize` (the mode) to be one of {list(QUANTIZATION_MODES)}. "
            f"Received: quantize={mode!r}"
        )
    if not model.built:
        raise ValueError(f"Expected a built model to quantize; {model.name} is not built.")
    copy = rebuilt_copy(model)
    weights = None
    if weights_only:
        from keras.quantizers import Int8QuantizationConfig

        weights = Int8QuantizationConfig(activation_quantizer=None)
    with warnings.catch_warnings():
        # Keras warns once per layer type it leaves float (norms, dropout, ...): expected.
        warnings.filterwarnings("ignore", message=r".*does not have a `quantize` method")
        copy.quantize(None if weights_only else mode, config=weights, filters=_built(filters))
    return copy


def _built(filters):
    """`filters` (as `Model.quantize` takes them) that also leave out layers never built:
    Keras refuses to quantize those, and a layer without weights needs nothing."""
    if filters is not None and not isinstance(filters, (str, list, tuple)):
        if not callable(filters):
            raise ValueError(
                "Expected `filters` to be a regular expression, a list of them or a "
                f"callable. Received: {type(filters).__name__}"
            )

    def chosen(layer):
        if not layer.built:
            return False
        if filters is None:
            return True
        if callable(filters):
            return bool(filters(layer))
        patterns = [filters] if isinstance(filters, str) else filters
        return any(re.search(pattern, layer.name) for pattern in patterns)

    return chosen


@keras_attn_export("keras_attn.export.precision_copy")
def precision_copy(model, precision):
    """A copy of `model` whose float layers hold their weights and compute in `precision`.

    `"bfloat16"` halves the weights' size and, on CPUs with AVX-512 BF16 or AMX (where
    TensorFlow's oneDNN multiplies bfloat16 natively), the products' time at large
    batches (docs/speed.md measured MiniLM's classifier served at batch 32 in 0.67× its
    float32 time, labels equal on 2,560 of 2,562 Rotten Tomatoes snippets); elsewhere
    TensorFlow computes it more slowly than float32, with the same answers. Layers built
    to compute in float32 whatever the model's policy (the classifier heads' logits, as
    Keras's mixed precision guide advises) stay so; Keras's layer norms compute their
    statistics in float32. `"float32"` turns a model trained in mixed precision into a
    float32 one. The export's outputs are float32 either way. `model` is not changed.

    Args:
        model: a built Keras model (any of `keras_attn.models`'s), without int8 layers.
        precision: one of `"float32"`, `"bfloat16"`.

    Returns:
        The copy, a new model of the same class.

    Example:

    >>> import numpy as np
    >>> from keras_attn.export import precision_copy
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> model = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=50), num_classes=2)
    >>> x = {"token_ids": np.array([[2, 7, 9, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32")}
    >>> _ = model(x)
    >>> half = precision_copy(model, "bfloat16")
    >>> half.backbone.get_layer("pooled_dense").kernel.dtype, model.dtype_policy.name
    ('bfloat16', 'float32')
    >>> bool(np.abs(np.asarray(half(x), "float32") - np.asarray(model(x))).max() < 0.05)
    True
    """
    if precision not in PRECISIONS:
        raise ValueError(
            f"Expected `precision` to be one of {list(PRECISIONS)}. Received: "
            f"precision={precision!r}"
        )
    if not model.built:
        raise ValueError(f"Expected a built model; {model.name} is not built.")
    quantized = [
        layer.name
        for layer in model._flatten_layers(include_self=False)
        if getattr(layer, "quantization_mode", None)
    ]
    if quantized:
        raise ValueError(
            f"Expected a float model for `precision={precision!r}`; {model.name} has int8 "
            f"layers ({', '.join(quantized[:3])}{', ...' if len(quantized) > 3 else ''})."
        )
    return rebuilt_copy(model, precision)


def rebuilt_copy(model, precision=None):
    """A new model of `model`'s class from its config, its weights copied (LoRA adapters
    merged first; no optimizer or loss: serving needs none); with `precision`, every
    float dtype policy set to it."""
    from keras_attn.models.lora import merged_for_export
    from keras_attn.models.model_copies import rebuilt_from_config

    model = merged_for_export(model)
    config = keras.saving.serialize_keras_object(model)
    config.pop("compile_config", None)
    previous = keras.config.dtype_policy()
    if precision is not None:
        config = _with_policy(config, precision)
        keras.config.set_dtype_policy(precision)  # sub-layers built without a dtype of their own
    try:
        copy = rebuilt_from_config(model, config)
    finally:
        keras.config.set_dtype_policy(previous)
    copy.set_weights(model.get_weights())
    return copy


def _with_policy(config, precision):
    """`config` (a serialized model) with every float dtype policy set to `precision`."""
    if isinstance(config, list):
        return [_with_policy(item, precision) for item in config]
    if not isinstance(config, dict):
        return config
    if config.get("class_name") == "DTypePolicy":
        if config.get("config", {}).get("name") in _FLOAT_POLICIES:
            return {**config, "config": {**config["config"], "name": precision}}
        return config
    return {key: _with_policy(value, precision) for key, value in config.items()}
