"""Sentence and sentence-pair classification on XLNet's content stream."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_rate
from keras_attn.layers import Dropout, MeanPooling
from keras_attn.models.task import Task, without_weights_of
from keras_attn.models.xlnet.xlnet_backbone import XLNetBackbone

POOLINGS = ("first", "last", "mean")


class LastToken(keras.layers.Layer):
    """The vector of each sequence's last real token, right- or left-padded (internal)."""

    def call(self, sequence, padding_mask):
        length = ops.shape(padding_mask)[1]
        from_the_end = ops.argmax(ops.flip(ops.cast(padding_mask, "int32"), axis=1), axis=1)
        last = (length - 1 - ops.cast(from_the_end, "int32"))[:, None, None]  # (batch, 1, 1)
        return ops.take_along_axis(sequence, last, axis=1)[:, 0]

    def compute_output_shape(self, sequence_shape, padding_mask_shape):
        return (sequence_shape[0], sequence_shape[2])


@keras_attn_export("keras_attn.models.XLNetClassifier")
class XLNetClassifier(Task):
    """An `XLNetBackbone` with XLNet's sequence summary and a classification layer.

    One token's content stream (or their mean) → `tanh(W_s x + b_s)` → dropout →
    logits, as `transformers`' `XLNetForSequenceClassification` (summary type
    `"last"`, with a projection and tanh). XLNet's own tokenizer puts `<cls>` last;
    with a WordPiece tokenizer (`[CLS] A [SEP] B [SEP]`) the first token is `[CLS]`.
    `compile()` without a loss uses sparse cross-entropy on the logits and accuracy.

    Args:
        backbone: an `XLNetBackbone` (all of its weights are fine-tuned).
        num_classes: number of labels (>= 2).
        dropout: dropout after the summary (XLNet: 0.1).
        pooling: `"first"` (default: `[CLS]` of a WordPiece tokenizer), `"last"` (the
            last real token: XLNet's `<cls>`) or `"mean"` (of the real tokens).
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids`, `padding_mask` `(batch, length)`.

    Returns:
        Logits `(batch, num_classes)`, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import XLNetBackbone, XLNetClassifier
    >>> backbone = XLNetBackbone(100, num_layers=2, num_heads=2, hidden_dim=32,
    ...                          intermediate_dim=64)
    >>> classifier = XLNetClassifier(backbone, num_classes=3)
    >>> x = {"token_ids": np.array([[2, 7, 9, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32")}
    >>> tuple(classifier(x).shape)
    (1, 3)

    References:
        - [Yang et al., 2019](https://arxiv.org/abs/1906.08237)
    """

    preprocessor_cls = "TextClassifierPreprocessor"

    backbone_cls = XLNetBackbone

    def __init__(self, backbone, num_classes, dropout=0.1, pooling="first", **kwargs):
        self.check_backbone(backbone)
        self.check_at_least_two("num_classes", num_classes)
        check_rate("dropout", dropout)
        if pooling not in POOLINGS:
            raise ValueError(f"Expected `pooling` in {POOLINGS}. Received: pooling={pooling!r}")
        initializer = keras.initializers.RandomNormal(stddev=backbone.initializer_range)

        # === Layers ===
        self.backbone = backbone
        self.pooling_layer = {"last": LastToken, "mean": MeanPooling}.get(pooling)
        if self.pooling_layer is not None:
            self.pooling_layer = self.pooling_layer(name=f"{pooling}_pooling")
        self.summary_dense = keras.layers.Dense(
            backbone.hidden_dim,
            activation="tanh",
            kernel_initializer=initializer,
            dtype=backbone.dtype_policy,
            name="summary_dense",
        )
        self.output_dropout = Dropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes, kernel_initializer=initializer, dtype="float32", name="logits"
        )

        # === Functional model ===
        inputs = dict(backbone.input)
        sequence = backbone(inputs)["sequence_output"]
        if self.pooling_layer is None:
            pooled = sequence[:, 0]
        else:
            pooled = self.pooling_layer(sequence, padding_mask=inputs["padding_mask"])
        logits = self.output_dense(self.output_dropout(self.summary_dense(pooled)))
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout
        self.pooling = pooling

    @property
    def trainable_weights(self):
        # The query stream's start (`mask_embedding`) is pre-training's alone: no
        # gradient reaches it here, so it stays out of the optimizer.
        return without_weights_of(super().trainable_weights, [self.backbone.mask_embedding])

    @property
    def trainable_variables(self):  # what the trainers and the optimizer's build read
        return self.trainable_weights

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Defaults: sparse cross-entropy on logits, accuracy."""
        self.compile_classification(optimizer, loss, metrics, **kwargs)

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        """Loads a Hugging Face `XLNetForSequenceClassification` folder: backbone,
        summary (`sequence_summary.summary`) and `logits_proj`, with `pooling="last"`
        (its summary type; left-padded inputs, as XLNet's tokenizer pads).

        Args:
            path: the checkpoint folder.
            **kwargs: `XLNetClassifier` arguments (`dropout`).

        Returns:
            An `XLNetClassifier` whose logits equal the Hugging Face model's.
        """
        from keras_attn.models.xlnet import xlnet_checkpoint

        return xlnet_checkpoint.load_classifier(cls, path, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_classes": self.num_classes, "dropout": self.dropout, "pooling": self.pooling}
        )
        return config
