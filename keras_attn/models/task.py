"""What every task model shares: the backbone it stands on and its config.

As keras-hub's `Task`: a task class names its `backbone_cls`, checks the backbone it
is given against it, and serializes that backbone inside its own config, so that
`from_config` rebuilds the backbone first (tied or shared layers are wired again on
load). The model-family registry (`keras_attn.models.registry`) finds a family's
task classes from a backbone.
"""

import keras

from keras_attn.argument_checks import check_positive_int
from keras_attn.models.functional_model import AssignsLayersBeforeInit, CompiledOnLoad
from keras_attn.models.layout import LayoutMapMixin
from keras_attn.models.lora import LoraMixin


def without_weights_of(weights, layers):
    """`weights` less those of `layers`: the parts of a model an objective never reads
    (no gradient to warn of, no optimizer slots; they keep their initial or loaded
    values)."""
    left_out = {id(v) for layer in layers for v in layer.weights}
    return [v for v in weights if id(v) not in left_out]


class Task(LayoutMapMixin, LoraMixin, AssignsLayersBeforeInit, CompiledOnLoad, keras.Model):
    """Base of the task models on a backbone (pre-training, classification, ...).

    Subclasses set `backbone_cls`, call `check_backbone` first and add their own
    arguments to `get_config`.
    """

    backbone_cls = None  # the backbone class this task stands on

    @classmethod
    def check_backbone(cls, backbone):
        """A TypeError unless `backbone` is a `cls.backbone_cls`."""
        if not isinstance(backbone, cls.backbone_cls):
            raise TypeError(
                f"Expected a {cls.backbone_cls.__name__}. Received: backbone of type "
                f"{type(backbone).__name__}"
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
