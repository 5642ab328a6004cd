"""Fine-tuning heads on DeBERTa-v3: classification of sentences and pairs (its
`ContextPooler`, a classification layer), of tokens (tagging), and span QA."""

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_rate
from keras_attn.layers import Dropout, MeanPooling
from keras_attn.models.bert import BertSpanQA, BertTokenClassifier
from keras_attn.models.deberta.deberta_backbone import DebertaV3Backbone
from keras_attn.models.task import Task

POOLINGS = ("cls", "mean")


@keras_attn_export("keras_attn.models.DebertaV3Classifier")
class DebertaV3Classifier(Task):
    """A `DebertaV3Backbone` with DeBERTa's context pooler and a classification layer.

    As `transformers`' `DebertaV2ForSequenceClassification`: the first token's output
    (`[CLS]`; or the mean of the real tokens' with `pooling="mean"`) through a dense
    layer with GELU (`ContextPooler`), dropout, then the logits. `compile()` without
    a loss uses sparse cross-entropy on the logits and accuracy.

    Args:
        backbone: a `DebertaV3Backbone` (all of its weights are fine-tuned).
        num_classes: number of labels (>= 2).
        dropout: dropout before the logits (DeBERTa: the hidden dropout, 0.1).
        pooling: `"cls"` (default) or `"mean"`.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids`, `padding_mask` `(batch, length)`.

    Returns:
        Logits `(batch, num_classes)`, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import DebertaV3Backbone, DebertaV3Classifier
    >>> backbone = DebertaV3Backbone.from_size("tiny", vocabulary_size=100)
    >>> model = DebertaV3Classifier(backbone, num_classes=3)
    >>> x = {"token_ids": np.array([[1, 7, 8, 2]]), "segment_ids": np.zeros((1, 4)),
    ...      "padding_mask": np.ones((1, 4), "int32")}
    >>> tuple(model(x).shape)
    (1, 3)

    References:
        - [He et al., 2021, DeBERTaV3](https://arxiv.org/abs/2111.09543)
    """

    preprocessor_cls = "TextClassifierPreprocessor"

    backbone_cls = DebertaV3Backbone

    def __init__(self, backbone, num_classes, dropout=0.1, pooling="cls", **kwargs):
        self.check_backbone(backbone)
        self.check_at_least_two("num_classes", num_classes)
        check_rate("dropout", dropout)
        if pooling not in POOLINGS:
            raise ValueError(f"Expected `pooling` in {POOLINGS}. Received: pooling={pooling!r}")
        initializer = keras.initializers.TruncatedNormal(stddev=backbone.initializer_range)

        # === Layers ===
        self.backbone = backbone
        self.mean_pooling = MeanPooling(name="mean_pooling") if pooling == "mean" else None
        self.pooler_dense = keras.layers.Dense(
            backbone.hidden_dim,
            activation="gelu",
            kernel_initializer=initializer,
            dtype=backbone.dtype_policy,
            name="pooler_dense",
        )
        self.output_dropout = Dropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes, kernel_initializer=initializer, dtype="float32", name="logits"
        )

        # === Functional model ===
        inputs = dict(backbone.input)
        sequence = backbone(inputs)["sequence_output"]
        if self.mean_pooling is None:
            pooled = sequence[:, 0]
        else:
            pooled = self.mean_pooling(sequence, padding_mask=inputs["padding_mask"])
        logits = self.output_dense(self.output_dropout(self.pooler_dense(pooled)))
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout
        self.pooling = pooling

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Defaults: sparse cross-entropy on logits, accuracy."""
        self.compile_classification(optimizer, loss, metrics, **kwargs)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_classes": self.num_classes, "dropout": self.dropout, "pooling": self.pooling}
        )
        return config


@keras_attn_export("keras_attn.models.DebertaV3TokenClassifier")
class DebertaV3TokenClassifier(BertTokenClassifier):
    """A `DebertaV3Backbone` with a classification layer on every token (tagging, NER).

    As `transformers`' `DebertaV2ForTokenClassification`: dropout, then logits for
    each position; `keras_attn.data.tagging_inputs` scores each word's first piece.
    `compile()` without a loss uses sparse cross-entropy on the logits and accuracy
    weighted by `sample_weight`.

    Args:
        backbone: a `DebertaV3Backbone` (all of its weights are fine-tuned).
        num_classes: number of tags (>= 2).
        dropout: dropout before the logits (0.1).
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids`, `padding_mask` `(batch, length)`.

    Returns:
        Logits `(batch, length, num_classes)`, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import DebertaV3Backbone, DebertaV3TokenClassifier
    >>> backbone = DebertaV3Backbone.from_size("tiny", vocabulary_size=100)
    >>> model = DebertaV3TokenClassifier(backbone, num_classes=5)
    >>> x = {"token_ids": np.array([[1, 7, 8, 2]]), "segment_ids": np.zeros((1, 4)),
    ...      "padding_mask": np.ones((1, 4), "int32")}
    >>> tuple(model(x).shape)
    (1, 4, 5)

    References:
        - [He et al., 2021, DeBERTaV3](https://arxiv.org/abs/2111.09543)
    """

    backbone_cls = DebertaV3Backbone  # the rest is BERT's tagger, layer for layer


@keras_attn_export("keras_attn.models.DebertaV3SpanQA")
class DebertaV3SpanQA(BertSpanQA):
    """A `DebertaV3Backbone` that scores every token as an answer's start and end.

    As `transformers`' `DebertaV2ForQuestionAnswering`: one dense layer gives each
    position a start and an end logit (padding: -1e9); `decode_spans` picks the best
    valid span inside the context, and `keras_attn.data.span_qa_inputs` with a
    `DebertaV3Tokenizer` makes the inputs, labels and byte offsets.

    Args:
        backbone: a `DebertaV3Backbone`.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids`, `padding_mask` `(batch, length)`.

    Returns:
        A dict: `start_logits` and `end_logits`, each `(batch, length)` float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import DebertaV3Backbone, DebertaV3SpanQA
    >>> qa = DebertaV3SpanQA(DebertaV3Backbone.from_size("tiny", vocabulary_size=100))
    >>> x = {"token_ids": np.array([[1, 7, 2, 9, 8, 2]]), "segment_ids": np.zeros((1, 6)),
    ...      "padding_mask": np.ones((1, 6), "int32")}
    >>> tuple(qa(x)["start_logits"].shape)
    (1, 6)

    References:
        - [He et al., 2021, DeBERTaV3](https://arxiv.org/abs/2111.09543)
    """

    backbone_cls = DebertaV3Backbone  # the rest is BERT's span QA, layer for layer
