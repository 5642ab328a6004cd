"""Token tagging (NER-style) from BERT's sequence output."""

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_rate
from keras_attn.layers import Dropout
from keras_attn.models.bert.bert_backbone import bert_kernel_initializer
from keras_attn.models.bert.bert_task import BertTask


@keras_attn_export("keras_attn.models.BertTokenClassifier")
class BertTokenClassifier(BertTask):
    """A `BertBackbone` with a classification layer on every token's output.

    For named-entity recognition the BERT paper feeds "the representation of the
    first sub-token as the input to the token-level classifier over the NER label
    set". The model gives logits at every position; `keras_attn.data.tagging_inputs`
    makes the labels and a `sample_weight` that scores first sub-tokens only, and
    maps predictions back to words (`word_ids`). `compile()` without a loss uses
    sparse cross-entropy on the logits and a weighted accuracy (first sub-tokens).

    Args:
        backbone: a `BertBackbone`.
        num_classes: number of tags (>= 2).
        dropout: dropout on the sequence output (BERT: 0.1).
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids`, `padding_mask` `(batch, length)`.

    Returns:
        Logits `(batch, length, num_classes)`, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import BertBackbone, BertTokenClassifier
    >>> backbone = BertBackbone.from_size("tiny", vocabulary_size=500)
    >>> tagger = BertTokenClassifier(backbone, num_classes=9)
    >>> x = {"token_ids": np.array([[2, 7, 9, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32")}
    >>> tuple(tagger(x).shape)
    (1, 4, 9)

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805), section 5.3
    """

    preprocessor_cls = "TokenClassifierPreprocessor"

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
        sequence = backbone(inputs)["sequence_output"]
        logits = self.output_dense(self.output_dropout(sequence))
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout

    def compile(self, optimizer="adam", loss=None, metrics=None, weighted_metrics=None, **kwargs):
        """Defaults: sparse cross-entropy on logits, accuracy weighted by `sample_weight`."""
        self.compile_classification(
            optimizer, loss, metrics, weighted_metrics, weighted=True, **kwargs
        )

    def get_config(self):
        config = super().get_config()
        config.update({"num_classes": self.num_classes, "dropout": self.dropout})
        return config
