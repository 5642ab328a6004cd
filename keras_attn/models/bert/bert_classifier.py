"""Sentence and sentence-pair classification from BERT's pooled `[CLS]` output."""

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.layer_utils import check_positive_int, check_rate
from keras_attn.models.bert.bert_backbone import bert_kernel_initializer
from keras_attn.models.bert.bert_task import BertTask


@keras_attn_export("keras_attn.models.BertClassifier")
class BertClassifier(BertTask):
    """A `BertBackbone` with a classification layer on the pooled `[CLS]` output.

    "For classification tasks ... the only new parameters introduced during
    fine-tuning are classification layer weights W in R^{K x H}" (Devlin et al.,
    2018), after dropout on the pooled output. Pairs (entailment, paraphrase) are
    the same model: the tokenizer packs `[CLS] A [SEP] B [SEP]` with segment ids.
    `compile()` without a loss uses sparse cross-entropy on the logits and accuracy.

    Args:
        backbone: a `BertBackbone` (all of its weights are fine-tuned).
        num_classes: number of labels (>= 2).
        dropout: dropout on the pooled output (BERT: 0.1).
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids`, `padding_mask` `(batch, length)`.

    Returns:
        Logits `(batch, num_classes)`, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> classifier = BertClassifier(BertBackbone.from_preset("tiny", vocabulary_size=500), num_classes=3)
    >>> x = {"token_ids": np.array([[2, 7, 9, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32")}
    >>> tuple(classifier(x).shape)
    (1, 3)

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805)
    """

    def __init__(self, backbone, num_classes, dropout=0.1, **kwargs):
        self.check_backbone(backbone)
        check_positive_int("num_classes", num_classes)
        if num_classes < 2:
            raise ValueError(f"Expected `num_classes` >= 2. Received: num_classes={num_classes}")
        check_rate("dropout", dropout)

        # === Layers ===
        self.backbone = backbone
        self.output_dropout = keras.layers.Dropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes, kernel_initializer=bert_kernel_initializer(backbone.initializer_range),
            dtype="float32", name="logits",
        )

        # === Functional model ===
        inputs = dict(backbone.input)
        pooled = backbone(inputs)["pooled_output"]
        logits = self.output_dense(self.output_dropout(pooled))
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Defaults: sparse cross-entropy on logits, accuracy."""
        loss = loss or keras.losses.SparseCategoricalCrossentropy(from_logits=True)
        metrics = metrics if metrics is not None else [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update({"num_classes": self.num_classes, "dropout": self.dropout})
        return config
