"""Sentence and sentence-pair classification from BERT's pooled `[CLS]` output."""

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_rate
from keras_attn.layers import Dropout, MeanPooling
from keras_attn.models.bert.bert_backbone import bert_kernel_initializer
from keras_attn.models.bert.bert_task import BertTask, without_poolers

POOLINGS = ("cls", "mean")


@keras_attn_export("keras_attn.models.BertClassifier")
class BertClassifier(BertTask):
    """A `BertBackbone` with a classification layer on the pooled `[CLS]` output.

    "For classification tasks ... the only new parameters introduced during
    fine-tuning are classification layer weights W in R^{K x H}" (Devlin et al.,
    2018), after dropout on the pooled output. Pairs (entailment, paraphrase) are
    the same model: the tokenizer packs `[CLS] A [SEP] B [SEP]` with segment ids.
    `pooling="mean"` classifies the mean of the token outputs instead (Sentence-BERT's
    pooling, the natural choice for sentence-transformers checkpoints such as
    all-MiniLM-L6-v2, whose pooler was never trained).
    `compile()` without a loss uses sparse cross-entropy on the logits and accuracy.

    Args:
        backbone: a `BertBackbone` (all of its weights are fine-tuned).
        num_classes: number of labels (>= 2).
        dropout: dropout on the pooled output (BERT: 0.1).
        pooling: `"cls"` (default: the backbone's tanh pooler on `[CLS]`) or
            `"mean"` (`keras_attn.layers.MeanPooling` over the real tokens).
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids`, `padding_mask` `(batch, length)`.

    Returns:
        Logits `(batch, num_classes)`, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import BertBackbone, BertClassifier
    >>> backbone = BertBackbone.from_size("tiny", vocabulary_size=500)
    >>> classifier = BertClassifier(backbone, num_classes=3)
    >>> x = {"token_ids": np.array([[2, 7, 9, 3]]), "segment_ids": np.zeros((1, 4), "int32"),
    ...      "padding_mask": np.ones((1, 4), "int32")}
    >>> tuple(classifier(x).shape)
    (1, 3)

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805)
    """

    preprocessor_cls = "TextClassifierPreprocessor"

    def __init__(self, backbone, num_classes, dropout=0.1, pooling="cls", **kwargs):
        self.check_backbone(backbone)
        self.check_at_least_two("num_classes", num_classes)
        check_rate("dropout", dropout)
        if pooling not in POOLINGS:
            raise ValueError(f"Expected `pooling` in {POOLINGS}. Received: pooling={pooling!r}")

        # === Layers ===
        self.backbone = backbone
        self.mean_pooling = MeanPooling(name="mean_pooling") if pooling == "mean" else None
        self.output_dropout = Dropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            num_classes,
            kernel_initializer=bert_kernel_initializer(backbone.initializer_range),
            dtype="float32",
            name="logits",
        )

        # === Functional model ===
        inputs = dict(backbone.input)
        super().__init__(inputs=inputs, outputs=self.head(backbone(inputs), inputs), **kwargs)

        # === Config ===
        self.num_classes = num_classes
        self.dropout = dropout
        self.pooling = pooling

    def head(self, features, inputs, training=None):
        """The layers after the backbone: its outputs (`features`) -> logits."""
        if self.mean_pooling is None:
            pooled = features["pooled_output"]
        else:
            pooled = self.mean_pooling(
                features["sequence_output"], padding_mask=inputs["padding_mask"]
            )
        return self.output_dense(self.output_dropout(pooled, training=training))

    @property
    def trainable_weights(self):
        weights = super().trainable_weights
        # Mean pooling never reads the tanh pooler: left out of training (no "gradients
        # do not exist" warning, no optimizer slots; it keeps its loaded values).
        return weights if self.mean_pooling is None else without_poolers(weights, self.backbone)

    @property
    def trainable_variables(self):  # what the trainers and the optimizer's build read
        return self.trainable_weights

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Defaults: sparse cross-entropy on logits, accuracy."""
        self.compile_classification(optimizer, loss, metrics, **kwargs)

    def save_pretrained(self, path, tokenizer=None, labels=None):
        """Writes the Hugging Face layout of `BertForSequenceClassification`.

        `config.json` (with `id2label`) and `model.safetensors` (and, with a
        tokenizer, its vocabulary), so a classifier fine-tuned here is loaded by
        `transformers.AutoModelForSequenceClassification` and by the runtimes built
        on it (Optimum's ONNX Runtime and OpenVINO exports).

        Args:
            path: the folder to write (created if needed).
            tokenizer: a `keras_attn.data.WordPieceTokenizer` whose vocabulary to write.
            labels: the class names (default `"0"`, `"1"`, ...).

        Returns:
            The folder.

        Raises:
            ValueError: for `pooling="mean"` (`transformers`' classifier reads the tanh
                pooler on `[CLS]`), a backbone BERT cannot hold, or labels that are not
                one per class.

        Example:

        >>> import tempfile, json
        >>> from keras_attn.models import BertBackbone, BertClassifier
        >>> classifier = BertClassifier(BertBackbone.from_size("tiny", vocabulary_size=100), 2)
        >>> folder = classifier.save_pretrained(tempfile.mkdtemp(), labels=["bad", "good"])
        >>> json.loads((folder / "config.json").read_text())["id2label"]
        {'0': 'bad', '1': 'good'}
        """
        from keras_attn.models.bert import bert_checkpoint

        return bert_checkpoint.save_classifier(self, path, tokenizer, labels)

    def get_config(self):
        config = super().get_config()
        config.update(
            {"num_classes": self.num_classes, "dropout": self.dropout, "pooling": self.pooling}
        )
        return config
