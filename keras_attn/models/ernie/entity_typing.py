"""Entity typing from a marker token's output (ERNIE's fine-tuning for typing)."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_rate
from keras_attn.layers import Dropout
from keras_attn.models.bert import BertBackbone, bert_kernel_initializer
from keras_attn.models.ernie.ernie_backbone import ErnieBackbone, unread_by_token_heads
from keras_attn.models.task import Task, without_weights_of


@keras_attn_export("keras_attn.models.EntityTyping")
class EntityTyping(Task):
    """Types a mention from the output at its marker: ERNIE's entity typing.

    Zhang et al. (2019) put a special `[ENT]` token before and after the mention and
    classify the first one's final output. The head reads `sequence_output` at
    `marker_positions` (one per row), then dropout and a classification layer. On an
    `ErnieBackbone` the mention's entity reaches that output through the K-Encoder; on
    a `BertBackbone` (the text-only control) the same head reads the text alone.

    Args:
        backbone: an `ErnieBackbone` or a `BertBackbone`.
        num_classes: the types (>= 2).
        dropout: dropout before the classification layer.
        **kwargs: `keras.Model` arguments (`name`, `preprocessor`).

    Call arguments:
        inputs: the backbone's inputs and `marker_positions` `(batch,)` int.

    Returns:
        Logits `(batch, num_classes)`, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import EntityTyping, ErnieBackbone
    >>> backbone = ErnieBackbone.from_size("tiny", vocabulary_size=100, num_entities=20)
    >>> model = EntityTyping(backbone, num_classes=26)
    >>> x = {"token_ids": np.array([[2, 9, 7, 9, 3]]), "segment_ids": np.zeros((1, 5)),
    ...      "padding_mask": np.ones((1, 5)), "entity_ids": np.array([[0, 0, 4, 0, 0]]),
    ...      "marker_positions": np.array([1])}
    >>> tuple(model(x).shape)
    (1, 26)

    References:
        - [Zhang et al., 2019, ERNIE](https://arxiv.org/abs/1905.07129), section 4.3
    """

    backbone_cls = (ErnieBackbone, BertBackbone)

    @classmethod
    def check_backbone(cls, backbone):
        if not isinstance(backbone, cls.backbone_cls):
            raise TypeError(
                "Expected an ErnieBackbone or a BertBackbone. Received: backbone of type "
                f"{type(backbone).__name__}"
            )

    def __init__(self, backbone, num_classes, dropout=0.1, **kwargs):
        self.check_backbone(backbone)
        self.check_at_least_two("num_classes", num_classes)
        check_rate("dropout", dropout)

        # === Layers ===
        self.backbone = backbone
        self.output_dropout = Dropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes,
            kernel_initializer=bert_kernel_initializer(backbone.initializer_range),
            dtype="float32",
            name="logits",
        )

        # === Functional model ===
        inputs = dict(backbone.input)
        inputs["marker_positions"] = keras.Input((), dtype="int32", name="marker_positions")
        sequence = backbone({k: v for k, v in inputs.items() if k != "marker_positions"})
        markers = ops.take_along_axis(
            sequence["sequence_output"], inputs["marker_positions"][:, None, None], axis=1
        )[:, 0]
        logits = self.output_dense(self.output_dropout(markers))
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Defaults: sparse cross-entropy on logits, accuracy."""
        self.compile_classification(optimizer, loss, metrics, **kwargs)

    @property
    def trainable_weights(self):  # the marker's output is typed: the pooler is never read
        return without_weights_of(super().trainable_weights, unread_by_token_heads(self.backbone))

    @property
    def trainable_variables(self):  # what the trainers and the optimizer's build read
        return self.trainable_weights

    def get_config(self):
        config = super().get_config()
        config.update({"num_classes": self.num_classes, "dropout": self.dropout})
        return config
