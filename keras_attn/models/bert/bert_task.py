"""What every task model on a BertBackbone shares: the backbone check and its config."""

import keras

from keras_attn.argument_checks import check_positive_int
from keras_attn.models.bert.bert_backbone import BertBackbone
from keras_attn.models.functional_model import AssignsLayersBeforeInit, CompiledOnLoad


def without_weights_of(weights, layers):
    """`weights` less those of `layers`: the parts of a model an objective never reads
    (no gradient to warn of, no optimizer slots; they keep their initial or loaded
    values)."""
    left_out = {id(v) for layer in layers for v in layer.weights}
    return [v for v in weights if id(v) not in left_out]


def without_poolers(weights, *backbones):
    """`weights` less the backbones' pooler, for objectives that never read
    `pooled_output`."""
    return without_weights_of(weights, [backbone.pooled_dense for backbone in backbones])


class BertTask(AssignsLayersBeforeInit, CompiledOnLoad, keras.Model):
    """Base of the functional task models (pre-training, classification, ...).

    Their config holds the serialized backbone plus the task's own arguments, and
    `from_config` rebuilds the backbone first, so tied or shared layers are wired
    again on load. Subclasses call `check_backbone` first and add their arguments
    to `get_config`.
    """

    @staticmethod
    def check_backbone(backbone):
        if not isinstance(backbone, BertBackbone):
            raise TypeError(
                f"Expected a BertBackbone. Received: backbone of type {type(backbone).__name__}"
            )

    @staticmethod
    def check_at_least_two(name, value):
        """A ValueError naming `name` unless `value` is an int >= 2 (classes, choices)."""
        check_positive_int(name, value)
        if value < 2:
            raise ValueError(f"Expected `{name}` >= 2. Received: {name}={value}")

    def compile_classification(
        self, optimizer, loss, metrics, weighted_metrics=None, weighted=False, **kwargs
    ):
        """`compile` with the classification defaults: sparse cross-entropy on logits,
        and accuracy among the `metrics` (or, `weighted=True`, the `weighted_metrics`,
        scored by sample weight) unless the caller gives its own."""
        loss = loss or keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        accuracy = [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        if weighted and weighted_metrics is None:
            weighted_metrics = accuracy
        if not weighted and metrics is None:
            metrics = accuracy
        super().compile(
            optimizer=optimizer,
            loss=loss,
            metrics=metrics,
            weighted_metrics=weighted_metrics,
            **kwargs,
        )

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        return cls(**config)
