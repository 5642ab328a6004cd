"""What every task model shares: the backbone it stands on and its config.

As keras-hub's `Task`: a task class names its `backbone_cls`, checks the backbone it
is given against it, and serializes that backbone inside its own config, so that
`from_config` rebuilds the backbone first (tied or shared layers are wired again on
load). The model-family registry (`keras_attn.models.registry`) finds a family's
task classes from a backbone.
"""

import keras

from keras_attn.argument_checks import check_positive_int
from keras_attn.models.functional_model import (
    AssignsLayersBeforeInit,
    CompiledOnLoad,
    quantize_as_saved,
    quantized_layers,
)
from keras_attn.models.layout_maps import LayoutMapMixin
from keras_attn.models.lora import LoraMixin
from keras_attn.models.pipeline import PipelineMixin

# keras-hub's tasks' default optimizer: Adam at this rate.
FINE_TUNING_LEARNING_RATE = 5e-5


def without_weights_of(weights, layers):
    """`weights` less those of `layers`: the parts of a model an objective never reads
    (no gradient to warn of, no optimizer slots; they keep their initial or loaded
    values)."""
    left_out = {id(v) for layer in layers for v in layer.weights}
    return [v for v in weights if id(v) not in left_out]


class Task(
    PipelineMixin,
    LayoutMapMixin,
    LoraMixin,
    AssignsLayersBeforeInit,
    CompiledOnLoad,
    keras.Model,
):
    """Base of the task models on a backbone (pre-training, classification, ...).

    Subclasses set `backbone_cls` (and `preprocessor_cls`, the name of the preprocessor
    their inputs come from, in `keras_attn.models.preprocessors`), call `check_backbone`
    first and add their own arguments to `get_config`. Every task takes
    `preprocessor=` (a `keras_attn.models.Preprocessor`, or `None`: token ids only);
    with one, `fit`, `evaluate` and `predict` take strings (`PipelineMixin`).
    """

    backbone_cls = None  # the backbone class this task stands on
    preprocessor_cls = None  # its preprocessor's class name (keras_attn.models.preprocessors)

    def __init__(self, *args, preprocessor=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.preprocessor = preprocessor

    @classmethod
    def from_preset(cls, preset, load_weights=True, sequence_length=None, lowercase=None, **kwargs):
        """The task on a preset's backbone, its preprocessor attached and compiled for
        fine-tuning (`compile_for_fine_tuning`), as keras-hub's `Task.from_preset`:
        `fit`, `evaluate` and `predict` then take strings.

        Args:
            preset: a registered preset (`keras_attn.models.presets`) or a folder: a
                Hugging Face or TF1 BERT checkpoint, a `backbone.keras` with its
                tokenizer's files, or a keras-hub preset (a classifier preset's head
                comes too when `num_classes` is its own or not given).
            load_weights: `False`: the preset's configuration randomly initialised.
            sequence_length: the preprocessor's packed length (`None`: a keras-hub
                preset's preprocessor's, else 128).
            lowercase: lower-case a WordPiece vocabulary (`None`: as the preset says,
                else yes).
            **kwargs: the task's own arguments (`num_classes`, `dropout`, ...).
        """
        from keras_attn.models.presets import load_with_tokenizer

        backbone, tokenizer, source = load_with_tokenizer(
            preset, sequence_length, lowercase, load_weights
        )
        cls.check_backbone(backbone)
        if source is not None and "num_classes" not in kwargs and hasattr(source, "num_classes"):
            kwargs["num_classes"] = source.num_classes
        return cls(backbone, **kwargs).took_preset(tokenizer, source)

    def took_preset(self, tokenizer, source=None):
        """What every `from_preset` does once the task is built on the preset's backbone:
        its preprocessor around `tokenizer`, a keras-hub task preset's head (`source`)
        adopted, compiled for fine-tuning. Returns the task."""
        from keras_attn.models.keras_hub_presets import adopt_head

        self.preprocessor = self.preprocessor_for(tokenizer)
        adopt_head(source, self)
        self.compile_for_fine_tuning()
        return self

    def compile_for_fine_tuning(self):
        """`compile()` with the task's own loss and metrics and keras-hub's fine-tuning
        optimizer (Adam, 5e-5), as `from_preset` leaves a task (keras-hub's tasks are
        compiled when made): `fit` runs at once; `compile()` again to choose."""
        self.compile(optimizer=keras.optimizers.Adam(FINE_TUNING_LEARNING_RATE))

    def save_to_preset(self, folder):
        """Writes this task, its preprocessor and tokenizer, as a keras-hub preset folder
        (keras-hub's `TextClassifier.from_preset(folder)` loads it):
        `keras_attn.models.save_to_preset`."""
        from keras_attn.models.keras_hub_presets import save_to_preset

        return save_to_preset(self, folder)

    def label_classes(self):
        """The classes integer labels range over: `num_classes` (a classifier's, a
        tagger's), checked by `fit` and `evaluate` before the graph."""
        return getattr(self, "num_classes", None)

    @classmethod
    def preprocessor_for(cls, tokenizer):
        """This task's preprocessor (`preprocessor_cls`) around `tokenizer`."""
        if cls.preprocessor_cls is None:
            raise ValueError(f"{cls.__name__} has no preprocessor: it takes token ids only")
        from keras_attn.models import preprocessors

        return getattr(preprocessors, cls.preprocessor_cls)(tokenizer)

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
        config = {
            "name": self.name,
            "trainable": self.trainable,
            "backbone": keras.saving.serialize_keras_object(self.backbone),
            **quantized_layers(self),
        }
        return {**config, **self.preprocessor_config()}

    @classmethod
    def from_config(cls, config):
        config = cls.with_preprocessor(config)
        quantized = config.pop("quantized_layers", None)
        config["backbone"] = keras.saving.deserialize_keras_object(config["backbone"])
        return quantize_as_saved(cls(**config), quantized)
