"""Extractive question answering (SQuAD-style) from BERT's sequence output."""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int
from keras_attn.models.bert.bert_backbone import bert_kernel_initializer
from keras_attn.models.bert.bert_task import BertTask


@keras_attn_export("keras_attn.models.BertSpanQA")
class BertSpanQA(BertTask):
    """A `BertBackbone` that scores every token as an answer's start and end.

    "We only introduce a start vector S and an end vector E during fine-tuning. The
    probability of word i being the start of the answer span is computed as a dot
    product between T_i and S followed by a softmax over all of the words"; the
    training objective is the mean of the start and end log-likelihoods, and "the
    score of a candidate span from position i to position j is S.T_i + E.T_j, and
    the maximum scoring span where j >= i is used as a prediction" (Devlin et al.,
    2018). Padding positions get logits of -1e9. `decode_spans` picks the best
    valid span inside the context; `keras_attn.data.span_qa_inputs` makes the
    inputs, labels and the byte offsets that turn a span back into text.

    Args:
        backbone: a `BertBackbone`.
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: a dict with `token_ids`, `segment_ids`, `padding_mask` `(batch, length)`.

    Returns:
        A dict: `start_logits` and `end_logits`, each `(batch, length)` float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import BertBackbone, BertSpanQA
    >>> qa = BertSpanQA(BertBackbone.from_size("tiny", vocabulary_size=500))
    >>> x = {"token_ids": np.array([[2, 7, 3, 9, 8, 3]]),
    ...      "segment_ids": np.array([[0, 0, 0, 1, 1, 1]]),
    ...      "padding_mask": np.ones((1, 6), "int32")}
    >>> outputs = qa(x)
    >>> tuple(outputs["start_logits"].shape), tuple(outputs["end_logits"].shape)
    ((1, 6), (1, 6))
    >>> start, end, score = BertSpanQA.decode_spans(outputs["start_logits"], outputs["end_logits"],
    ...                                             context_mask=np.array([[0, 0, 0, 1, 1, 0]]))
    >>> 3 <= int(start[0]) <= int(end[0]) <= 4
    True

    References:
        - [Devlin et al., 2018](https://arxiv.org/abs/1810.04805), section 4.2
    """

    preprocessor_cls = "SpanQAPreprocessor"

    def __init__(self, backbone, **kwargs):
        self.check_backbone(backbone)

        # === Layers ===
        self.backbone = backbone
        self.span_dense = keras.layers.Dense(
            2,
            kernel_initializer=bert_kernel_initializer(backbone.initializer_range),
            dtype="float32",
            name="span_logits",
        )
        self.start_logits = SpanEndpointLogits(0, name="start_logits")
        self.end_logits = SpanEndpointLogits(1, name="end_logits")

        # === Functional model ===
        inputs = dict(backbone.input)
        logits = self.span_dense(backbone(inputs)["sequence_output"])
        outputs = {
            "start_logits": self.start_logits(logits, inputs["padding_mask"]),
            "end_logits": self.end_logits(logits, inputs["padding_mask"]),
        }
        super().__init__(inputs=inputs, outputs=outputs, **kwargs)

    def compile(self, optimizer="adam", loss=None, loss_weights=None, metrics=None, **kwargs):
        """Defaults: the mean of the start and end cross-entropies; both accuracies."""
        loss = loss or {
            "start_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
            "end_logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        }
        loss_weights = loss_weights or {"start_logits": 0.5, "end_logits": 0.5}
        if metrics is None:
            metrics = {
                name: [keras.metrics.SparseCategoricalAccuracy(name="accuracy")]
                for name in ("start_logits", "end_logits")
            }
        super().compile(
            optimizer=optimizer, loss=loss, loss_weights=loss_weights, metrics=metrics, **kwargs
        )

    @staticmethod
    def decode_spans(start_logits, end_logits, context_mask, max_answer_length=30):
        """The best valid span per example: `start <= end < start + max_answer_length`,
        both inside the context (`context_mask` 1).

        Args:
            start_logits: `(batch, length)`.
            end_logits: `(batch, length)`.
            context_mask: `(batch, length)`, 1 on the pieces an answer may use.
            max_answer_length: the longest answer, in pieces.

        Returns:
            `(starts, ends, scores)`, each `(batch,)`: the token positions and
            `start_logit + end_logit` of the best span.
        """
        check_positive_int("max_answer_length", max_answer_length)
        start_logits = ops.convert_to_tensor(start_logits, "float32")
        end_logits = ops.convert_to_tensor(end_logits, "float32")
        allowed = ops.cast(ops.convert_to_tensor(context_mask), "bool")
        length = ops.shape(start_logits)[1]
        position = ops.arange(length)
        offset = position[None, :] - position[:, None]  # end - start
        valid = (offset >= 0) & (offset < max_answer_length)
        valid = valid[None] & allowed[:, :, None] & allowed[:, None, :]
        scores = start_logits[:, :, None] + end_logits[:, None, :]
        scores = ops.where(valid, scores, ops.full_like(scores, -float("inf")))
        best = ops.argmax(ops.reshape(scores, (ops.shape(scores)[0], -1)), axis=-1)
        starts, ends = best // length, best % length
        best_scores = ops.max(ops.reshape(scores, (ops.shape(scores)[0], -1)), axis=-1)
        return ops.cast(starts, "int32"), ops.cast(ends, "int32"), best_scores


@keras.saving.register_keras_serializable(package="keras_attn")
class SpanEndpointLogits(keras.layers.Layer):
    """Column `index` of `(batch, length, 2)` span logits, -1e9 on padding (internal)."""

    def __init__(self, index, **kwargs):
        kwargs.setdefault("dtype", "float32")
        super().__init__(**kwargs)
        self.index = index

    def call(self, logits, padding_mask):
        logits = ops.cast(logits[..., self.index], "float32")
        return ops.where(ops.cast(padding_mask, "bool"), logits, ops.full_like(logits, -1e9))

    def compute_output_shape(self, logits_shape, padding_mask_shape):
        return tuple(logits_shape[:-1])

    def get_config(self):
        config = super().get_config()
        config["index"] = self.index
        return config
