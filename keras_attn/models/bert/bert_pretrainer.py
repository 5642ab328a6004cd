"""BERT pre-training: masked-LM and next-sentence (or sentence-order) prediction."""

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.models.bert.bert_backbone import bert_kernel_initializer
from keras_attn.models.bert.bert_task import BertTask, without_poolers
from keras_attn.models.masked_lm_head import MaskedLMHead

SENTENCE_OBJECTIVES = ("nsp", "sop", "none")
_STRINGS_TRAIN_MASKED_LM_ALONE = (
    "A MaskedLMPreprocessor feeds the masked-LM head alone: give "
    "sentence_objective='none' (BertPretrainer.from_preset's default). Received: "
    "sentence_objective={!r}"
)


def check_sentence_objective(sentence_objective):
    """A ValueError unless `sentence_objective` is one of `SENTENCE_OBJECTIVES`."""
    if sentence_objective not in SENTENCE_OBJECTIVES:
        raise ValueError(
            f"Expected `sentence_objective` in {SENTENCE_OBJECTIVES}. "
            f"Received: sentence_objective={sentence_objective!r}"
        )


@keras_attn_export("keras_attn.models.BertPretrainer")
class BertPretrainer(BertTask):
    """A `BertBackbone` with BERT's two pre-training heads, losses summed.

    Masked LM: logits at the `masked_positions` only (dense, GELU, LayerNorm, then the
    transposed token embedding plus a bias). Next-sentence prediction ("nsp", BERT) or
    sentence-order prediction ("sop", ALBERT): a 2-way classifier on the pooled
    `[CLS]` output; `"none"` leaves it out (masked LM alone, as RoBERTa).
    `compile()` without arguments sets the summed sparse cross-entropy losses (the
    masked-LM loss weighted by `masked_weights`) and the `mlm_accuracy` /
    `nsp_accuracy` (or `sop_accuracy`) metrics.

    Args:
        backbone: a `BertBackbone`.
        sentence_objective: `"nsp"` (default), `"sop"` or `"none"` (no sentence head);
            names the head and metric.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids`, `padding_mask`
            `(batch, length)` and `masked_positions` `(batch, predictions)`.

    Returns:
        A dict: `mlm_logits` `(batch, predictions, vocabulary_size)` and
        `nsp_logits` (or `sop_logits`) `(batch, 2)`, float32 (`mlm_logits` alone for
        `"none"`).

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import BertBackbone, BertPretrainer
    >>> pretrainer = BertPretrainer(BertBackbone.from_size("tiny", vocabulary_size=500))
    >>> x = {"token_ids": np.array([[1, 7, 103, 2, 9, 2]]),
    ...      "segment_ids": np.array([[0, 0, 0, 0, 1, 1]]),
    ...      "padding_mask": np.ones((1, 6), "int32"), "masked_positions": np.array([[2, 0]])}
    >>> {k: tuple(v.shape) for k, v in pretrainer(x).items()}
    {'mlm_logits': (1, 2, 500), 'nsp_logits': (1, 2)}

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805)
        - [Lan et al., 2019, ALBERT](https://arxiv.org/abs/1909.11942)
    """

    preprocessor_cls = "MaskedLMPreprocessor"

    def __init__(self, backbone, sentence_objective="nsp", **kwargs):
        self.check_backbone(backbone)
        check_sentence_objective(sentence_objective)
        if kwargs.get("preprocessor") is not None and sentence_objective != "none":
            raise ValueError(_STRINGS_TRAIN_MASKED_LM_ALONE.format(sentence_objective))
        head = f"{sentence_objective}_logits"

        # === Layers ===
        self.backbone = backbone
        self.masked_lm_head = MaskedLMHead(
            backbone.token_embedding,
            activation=backbone.activation,
            layer_norm_epsilon=backbone.layer_norm_epsilon,
            kernel_initializer=bert_kernel_initializer(backbone.initializer_range),
            dtype=backbone.dtype_policy,
            name="mlm_logits",
        )
        self.sentence_head = None
        if sentence_objective != "none":
            self.sentence_head = keras.layers.Dense(
                2,
                kernel_initializer=bert_kernel_initializer(backbone.initializer_range),
                dtype="float32",
                name=head,
            )

        # === Functional model ===
        inputs = dict(backbone.input)
        inputs["masked_positions"] = keras.Input((None,), dtype="int32", name="masked_positions")
        features = backbone({k: inputs[k] for k in ("token_ids", "segment_ids", "padding_mask")})
        self.head_name = head
        super().__init__(inputs=inputs, outputs=self.head(features, inputs), **kwargs)

        # === Config ===
        self.sentence_objective = sentence_objective

    @classmethod
    def from_preset(cls, preset, load_weights=True, sequence_length=None, lowercase=None, **kwargs):
        """The masked-LM pre-training model on a preset's backbone with its
        `MaskedLMPreprocessor`, as keras-hub's `BertMaskedLM.from_preset`: `fit` on
        strings pre-trains it (`sentence_objective` is `"none"` unless given; a
        sentence head takes pairs the preprocessor does not make). See
        `Task.from_preset` for the arguments."""
        kwargs.setdefault("sentence_objective", "none")
        return super().from_preset(preset, load_weights, sequence_length, lowercase, **kwargs)

    def took_preset(self, tokenizer, source=None):
        if self.sentence_head is not None:
            raise ValueError(_STRINGS_TRAIN_MASKED_LM_ALONE.format(self.sentence_objective))
        return super().took_preset(tokenizer, source)

    def head(self, features, inputs, training=None):
        """The layers after the backbone: its outputs (`features`) and
        `inputs["masked_positions"]` -> the dict of logits."""
        outputs = {
            "mlm_logits": self.masked_lm_head(
                features["sequence_output"], inputs["masked_positions"]
            ),
        }
        if self.sentence_head is not None:
            outputs[self.head_name] = self.sentence_head(features["pooled_output"])
        return outputs

    def compile(self, optimizer="adam", loss=None, metrics=None, weighted_metrics=None, **kwargs):
        """Defaults: summed sparse cross-entropies and the two accuracies."""
        head = f"{self.sentence_objective}_logits"
        sentence = self.sentence_head is not None
        loss = loss or {
            "mlm_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            **(
                {head: keras.losses.SparseCategoricalCrossentropy(from_logits=True)}
                if sentence
                else {}
            ),
        }
        if weighted_metrics is None:
            # One output: Keras would drop the "mlm_logits_" prefix; the name keeps it.
            name = "accuracy" if sentence else "mlm_logits_accuracy"
            weighted_metrics = {"mlm_logits": [keras.metrics.SparseCategoricalAccuracy(name=name)]}
        if metrics is None and sentence:
            metrics = {head: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]}
        super().compile(
            optimizer=optimizer,
            loss=loss,
            metrics=metrics,
            weighted_metrics=weighted_metrics,
            **kwargs,
        )

    @property
    def trainable_weights(self):
        weights = super().trainable_weights
        # Masked LM alone never reads the pooler: it is left out of training.
        return weights if self.sentence_head else without_poolers(weights, self.backbone)

    @property
    def trainable_variables(self):  # what the trainers and the optimizer's build read
        return self.trainable_weights

    def training_flops(self, sequence_length, predictions):
        """FLOPs of one training example (`pretraining_flops`): the backbone and the
        masked-LM head at `predictions` positions, forward and backward."""
        from keras_attn.models.bert import pretraining_flops as flops

        forward = flops.encoder_flops(self.backbone, sequence_length)
        forward += flops.masked_lm_head_flops(
            self.backbone, predictions, self.backbone.vocabulary_size
        )
        return flops.training_step_flops(forward)

    def get_config(self):
        config = super().get_config()
        config.update({"sentence_objective": self.sentence_objective})
        return config
