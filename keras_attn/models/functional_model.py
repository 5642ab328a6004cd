"""What our functional backbones and generators share: size checks, config plumbing (internal)."""

import keras
import numpy as np

from keras_attn.argument_checks import check_positive_int, check_rate
from keras_attn.models.hidden_states import HiddenStatesMixin
from keras_attn.models.layout_maps import LayoutMapMixin
from keras_attn.models.lora import LoraMixin
from keras_attn.models.losses import LabelSmoothedCrossEntropy


class AssignsLayersBeforeInit:
    """For functional models that keep their layers as attributes, assigned before
    `keras.Model.__init__` builds the graph from them.

    On PyTorch a Keras layer is a `torch.nn.Module`, whose `__setattr__` fails until
    `Module.__init__` has run ("cannot assign module before Module.__init__() call").
    Until then these attributes are stored plainly: the functional graph tracks every
    layer and variable on its own, so nothing is lost. Other backends are unchanged.
    """

    def __setattr__(self, name, value):
        if keras.config.backend() == "torch" and "_modules" not in self.__dict__:
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)


class CompiledOnLoad:
    """For models with their own `compile()` defaults: `keras.models.load_model`
    compiles them again from the saved compile config, so the optimizer (and its
    state, which the file holds) comes back with the weights.

    Keras skips this for any model that overrides `compile()` ("`compile()` was not
    called as part of model loading") and returns it without an optimizer. Ours all
    take Keras's arguments and pass the ones given through, so the saved config, which
    holds what reached `keras.Model.compile`, is a valid call of our `compile()`.
    """

    def compile_from_config(self, config):
        self.compile(**keras.saving.deserialize_keras_object(config))
        if self.built:
            self.optimizer.build(self.trainable_variables)


class FunctionalModel(
    HiddenStatesMixin,
    LayoutMapMixin,
    LoraMixin,
    AssignsLayersBeforeInit,
    CompiledOnLoad,
    keras.Model,
):
    """A functional `keras.Model` rebuilt from its constructor arguments on load."""

    @staticmethod
    def check_sizes(hidden_dim, num_heads, dropout, **sizes):
        """Raises a ValueError naming the first size that is not a positive int, a
        `dropout` outside [0, 1), or a `hidden_dim` that `num_heads` does not divide."""
        for name, value in {"hidden_dim": hidden_dim, "num_heads": num_heads, **sizes}.items():
            check_positive_int(name, value)
        check_rate("dropout", dropout)
        if hidden_dim % num_heads:
            raise ValueError(
                "Expected `hidden_dim` divisible by `num_heads`. Received: "
                f"hidden_dim={hidden_dim}, num_heads={num_heads}"
            )

    def _base_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "dtype": keras.dtype_policies.serialize(self.dtype_policy),
            **quantized_layers(self),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        quantized = config.pop("quantized_layers", None)
        if isinstance(config.get("dtype"), dict):
            config["dtype"] = keras.dtype_policies.deserialize(config["dtype"])
        return quantize_as_saved(cls(**config), quantized)


def quantized_layers(model):
    """`{"quantized_layers": {layer path: mode}}` for the layers `model.quantize(...)`
    quantized (`"int8"`, `"int4"`), or `{}`: kept in the model's config, so that loading a
    `.keras` file quantizes them again before their variables are read
    (`quantize_as_saved`), as keras-hub's backbones keep a `DTypePolicyMap`."""
    found = {
        layer.path: layer.quantization_mode
        for layer in model._flatten_layers(include_self=False)
        if layer.quantization_mode is not None
    }
    return {"quantized_layers": found} if found else {}


def quantize_as_saved(model, quantized):
    """`model` with the layers `quantized` names (`quantized_layers`) quantized again
    (their values are then what the file holds); a `ValueError` names a path the model
    lacks."""
    if not quantized:
        return model
    if not isinstance(quantized, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in quantized.items()
    ):
        raise TypeError(
            "Expected `quantized_layers` as {layer path: quantization mode} (strings). "
            f"Received: {str(quantized)[:200]}"
        )
    layers = {layer.path: layer for layer in model._flatten_layers(include_self=False)}
    missing = sorted(set(quantized) - set(layers))
    if missing:
        raise ValueError(
            f"Expected the quantized layers a saved config names in {type(model).__name__}. "
            f"Missing: {missing[:5]}"
        )
    for path, mode in quantized.items():
        if layers[path].quantization_mode != mode:
            layers[path].quantize(mode)
    return model


class NextTokenCompile(CompiledOnLoad):
    """`compile()` with the language models' defaults (GPT, Transformer-XL): next-token
    cross-entropy from logits that skips `pad_token_id`, and token accuracy weighted by
    the `sample_weight` the data gives."""

    def compile(self, optimizer="adam", loss=None, metrics=None, weighted_metrics=None, **kwargs):
        """Defaults: next-token cross-entropy from logits that skips `pad_token_id`,
        and token accuracy weighted by the `sample_weight` the data gives."""
        super().compile(
            optimizer=optimizer,
            loss=loss or default_loss(0.0, self.pad_token_id),
            metrics=metrics,
            weighted_metrics=weighted_metrics
            or [keras.metrics.SparseCategoricalAccuracy("accuracy")],
            **kwargs,
        )


def default_loss(label_smoothing, pad_token_id):
    """The decoder models' `compile()` default loss (public as
    `keras_attn.training.LabelSmoothedCrossEntropy`)."""
    return LabelSmoothedCrossEntropy(label_smoothing, ignore_class=pad_token_id)


def with_vocabulary_size(model, vocabulary_size):
    """A copy of `model` (a backbone or language model whose config has
    `vocabulary_size`) with a larger vocabulary: every weight copied, the new tokens'
    embedding rows freshly initialised, as GPT-1's added tokens are ("randomly
    initialized start and end tokens") and ERNIE's `[ENT]` marker."""
    if vocabulary_size < model.vocabulary_size:
        raise ValueError(
            f"Expected `vocabulary_size` >= the model's {model.vocabulary_size}. "
            f"Received: {vocabulary_size}"
        )
    grown = type(model).from_config({**model.get_config(), "vocabulary_size": vocabulary_size})
    for new, old in zip(grown.weights, model.weights, strict=True):
        value = np.array(keras.ops.convert_to_numpy(new))
        value[tuple(slice(0, size) for size in old.shape)] = keras.ops.convert_to_numpy(old)
        new.assign(value)
    return grown
