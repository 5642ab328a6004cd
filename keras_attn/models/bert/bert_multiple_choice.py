"""Multiple choice (SWAG-style) from BERT's pooled output of each context/choice pair."""

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_rate
from keras_attn.layers import Dropout
from keras_attn.models.bert.bert_backbone import bert_kernel_initializer
from keras_attn.models.bert.bert_task import BertTask
from keras_attn.models.choice_folding import FoldChoices


@keras_attn_export("keras_attn.models.BertMultipleChoice")
class BertMultipleChoice(BertTask):
    """A `BertBackbone` that scores each of `num_choices` endings of a context.

    The BERT paper's SWAG setup: "we construct four input sequences, each containing
    the concatenation of the given sentence (sentence A) and a possible
    continuation (sentence B). The only task-specific parameters introduced is a
    vector whose dot product with the [CLS] token representation C denotes a score
    for each choice which is normalized with a softmax layer." The choices are
    folded into the batch, encoded, scored, and unfolded into `(batch,
    num_choices)` logits. `keras_attn.data.multiple_choice_inputs` packs the pairs.
    `compile()` without a loss uses sparse cross-entropy over the choices and accuracy.

    Args:
        backbone: a `BertBackbone`.
        num_choices: candidate answers per example (>= 2).
        dropout: dropout on the pooled output (BERT: 0.1).
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids`, `padding_mask`, each
            `(batch, num_choices, length)`.

    Returns:
        Logits `(batch, num_choices)`, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import BertBackbone, BertMultipleChoice
    >>> backbone = BertBackbone.from_size("tiny", vocabulary_size=500)
    >>> model = BertMultipleChoice(backbone, num_choices=4)
    >>> x = {"token_ids": np.full((2, 4, 6), 7), "segment_ids": np.zeros((2, 4, 6), "int32"),
    ...      "padding_mask": np.ones((2, 4, 6), "int32")}
    >>> tuple(model(x).shape)
    (2, 4)

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805), section 4.4
    """

    preprocessor_cls = "MultipleChoicePreprocessor"

    def __init__(self, backbone, num_choices, dropout=0.1, **kwargs):
        self.check_backbone(backbone)
        self.check_at_least_two("num_choices", num_choices)
        check_rate("dropout", dropout)

        # === Layers ===
        self.backbone = backbone
        self.fold_choices = FoldChoices(num_choices, fold=True, name="fold_choices")
        self.unfold_choices = FoldChoices(
            num_choices, fold=False, dtype="float32", name="unfold_choices"
        )
        self.output_dropout = Dropout(dropout, name="output_dropout")
        self.output_dense = keras.layers.Dense(
            1,
            kernel_initializer=bert_kernel_initializer(backbone.initializer_range),
            dtype="float32",
            name="choice_score",
        )

        # === Functional model ===
        inputs = {
            name: keras.Input((num_choices, None), dtype="int32", name=name)
            for name in ("token_ids", "segment_ids", "padding_mask")
        }
        pooled = backbone({name: self.fold_choices(x) for name, x in inputs.items()})[
            "pooled_output"
        ]
        logits = self.unfold_choices(self.output_dense(self.output_dropout(pooled)))
        super().__init__(inputs=inputs, outputs=logits, **kwargs)

        # === Config ===
        self.num_choices = num_choices
        self.dropout = dropout

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Defaults: sparse cross-entropy over the choices, accuracy."""
        self.compile_classification(optimizer, loss, metrics, **kwargs)

    def label_classes(self):
        """Labels are the right choice's index: `num_choices` classes."""
        return self.num_choices

    def get_config(self):
        config = super().get_config()
        config.update({"num_choices": self.num_choices, "dropout": self.dropout})
        return config
