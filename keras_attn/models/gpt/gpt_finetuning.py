"""GPT-1's fine-tuning (Radford et al., 2018, §3.2-3.3): input transformations, a linear
head on the extract token, and the auxiliary language-model loss."""

import keras
import numpy as np
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_non_negative_int, check_positive_int, check_rate
from keras_attn.layers import Dropout
from keras_attn.models.gpt.gpt_language_model import GPTLanguageModel
from keras_attn.models.task import Task

GPT1_TASKS = ("classification", "entailment", "similarity", "multiple_choice")


def _pack(segments, start_id, delimiter_id, extract_id, sequence_length):
    """`[start] a [$] b ... [extract]`, the longest segment cut from its end to fit."""
    segments = [list(map(int, s)) for s in segments]
    room = sequence_length - 1 - len(segments)  # start, delimiters and extract
    if room < len(segments):
        raise ValueError(
            f"Expected a sequence_length above {2 * len(segments)}. Received: {sequence_length}"
        )
    while sum(map(len, segments)) > room:  # round-robin: of equals, the later loses first
        longest = max(range(len(segments)), key=lambda i: (len(segments[i]), i))
        segments[longest].pop()
    ids = [start_id]
    for i, segment in enumerate(segments):
        ids += segment + ([delimiter_id] if i < len(segments) - 1 else [])
    return ids + [extract_id]


@keras_attn_export("keras_attn.models.gpt1_inputs", serializable=False)
def gpt1_inputs(task, examples, start_id, delimiter_id, extract_id, sequence_length, pad_id=0):
    """GPT-1's task-specific input transformations, on token ids.

    "All transformations include adding randomly initialized start and end tokens"
    (Radford et al., 2018, figure 1): `classification` packs `[start] text [extract]`;
    `entailment` `[start] premise [$] hypothesis [extract]`; `similarity` both orders
    of the pair (no inherent ordering), `(2, length)` per example; `multiple_choice`
    `[start] context [$] answer_k [extract]` for each answer, `(num_answers, length)`.
    A sequence too long loses tokens from the end of its longest segment.

    Args:
        task: one of `"classification"`, `"entailment"`, `"similarity"`,
            `"multiple_choice"`.
        examples: per example, a list of ids (classification), a pair of lists
            (entailment, similarity), or `(context, [answer, ...])` (multiple choice).
        start_id: the start token's id.
        delimiter_id: the delimiter's (`$`) id.
        extract_id: the extract token's id, whose state the head reads.
        sequence_length: ids per sequence, padded with `pad_id` on the right.
        pad_id: the padding id.

    Returns:
        An int32 array `(batch, length)`, or `(batch, 2 | num_answers, length)`.

    Example:

    >>> from keras_attn.models import gpt1_inputs
    >>> gpt1_inputs("entailment", [([5, 6], [7])], 1, 2, 3, sequence_length=8).tolist()
    [[1, 5, 6, 2, 7, 3, 0, 0]]
    """
    if task not in GPT1_TASKS:
        raise ValueError(f"Expected `task` in {GPT1_TASKS}. Received: {task!r}")
    check_positive_int("sequence_length", sequence_length)
    special = (start_id, delimiter_id, extract_id)

    def row(segments):
        ids = _pack(segments, *special, sequence_length)
        return ids + [pad_id] * (sequence_length - len(ids))

    rows = []
    for example in examples:
        if task == "classification":
            rows.append(row([example]))
        elif task == "entailment":
            rows.append(row(list(example)))
        elif task == "similarity":
            first, second = example
            rows.append([row([first, second]), row([second, first])])
        else:
            context, answers = example
            rows.append([row([context, answer]) for answer in answers])
    return np.asarray(rows, "int32")


class _Fold(keras.layers.Layer):
    """`(batch, k, ...)` -> `(batch * k, ...)`, or back with `unfold` (internal)."""

    def __init__(self, k, unfold=False, **kwargs):
        super().__init__(**kwargs)
        self.k, self.unfold = k, unfold

    def call(self, x):
        shape = ops.shape(x)
        if self.unfold:
            return ops.reshape(x, (-1, self.k, *shape[1:]))
        return ops.reshape(x, (-1, *shape[2:]))

    def compute_output_shape(self, shape):
        if self.unfold:
            return (None, self.k, *shape[1:])
        return (None, *shape[2:])


@keras_attn_export("keras_attn.models.GPTFineTuner")
class GPTFineTuner(Task):
    """A `GPTLanguageModel` fine-tuned as GPT-1 was, for one of its four kinds of task.

    The input goes through the transformer, and "the final transformer block's
    activation h_l^m" at the extract token feeds "an added linear output layer"
    (Radford et al., 2018, §3.2). `classification` and `entailment` read one
    sequence; `similarity` reads both orders of the pair and adds the two
    representations "element-wise before being fed into the linear output layer";
    `multiple_choice` scores each answer's sequence and normalises over them "via a
    softmax layer" (§3.3). The language model's logits over the same sequences are a
    second output: "including language modeling as an auxiliary objective ...
    L_3(C) = L_2(C) + λ * L_1(C)" with λ = 0.5. `gpt1_inputs` packs the inputs;
    `language_model_targets` gives the auxiliary targets. `compile()` sets both losses
    (the auxiliary one weighted `lm_weight`, left out at 0) and the task's accuracy.

    Args:
        backbone: the pre-trained `GPTLanguageModel` (its vocabulary holds the
            start, delimiter and extract tokens).
        task: one of `"classification"`, `"entailment"`, `"similarity"`,
            `"multiple_choice"`.
        num_classes: classes (>= 2); ignored for multiple choice.
        extract_token_id: the extract token's id.
        num_choices: answers per example (multiple choice; 2 for similarity).
        lm_weight: λ, the auxiliary loss's weight (GPT-1: 0.5; 0: the task loss alone).
        dropout: on the extract token's state (GPT-1: 0.1).
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        token_ids: `(batch, length)` ids, or `(batch, 2 | num_choices, length)` for
            similarity and multiple choice.

    Returns:
        A dict: `logits` `(batch, num_classes)` (multiple choice: `(batch,
        num_choices)`) and `lm_logits`, next-token logits of the input's shape plus the
        vocabulary axis, float32.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import GPTFineTuner, GPTLanguageModel, gpt1_inputs
    >>> lm = GPTLanguageModel(50, 1, 2, 16, 32, max_sequence_length=16, norm_first=False)
    >>> tuner = GPTFineTuner(lm, "similarity", num_classes=2, extract_token_id=3)
    >>> x = gpt1_inputs("similarity", [([5, 6], [7, 8])], 1, 2, 3, sequence_length=8)
    >>> sorted((k, tuple(v.shape)) for k, v in tuner(x).items())
    [('lm_logits', (1, 2, 8, 50)), ('logits', (1, 2))]
    """

    preprocessor_cls = "TextClassifierPreprocessor"

    backbone_cls = GPTLanguageModel

    def __init__(
        self,
        backbone,
        task="classification",
        num_classes=2,
        extract_token_id=None,
        num_choices=4,
        lm_weight=0.5,
        dropout=0.1,
        **kwargs,
    ):
        self.check_backbone(backbone)
        if task not in GPT1_TASKS:
            raise ValueError(f"Expected `task` in {GPT1_TASKS}. Received: {task!r}")
        if task != "multiple_choice":
            self.check_at_least_two("num_classes", num_classes)
        check_non_negative_int("extract_token_id", extract_token_id)
        if extract_token_id >= backbone.vocabulary_size:
            raise ValueError(
                f"Expected `extract_token_id` < the vocabulary's {backbone.vocabulary_size}."
                f" Received: {extract_token_id}"
            )
        self.check_at_least_two("num_choices", num_choices)
        if not (isinstance(lm_weight, (int, float)) and lm_weight >= 0):
            raise ValueError(f"Expected `lm_weight` >= 0. Received: lm_weight={lm_weight!r}")
        check_rate("dropout", dropout)
        k = {"similarity": 2, "multiple_choice": num_choices}.get(task)

        # === Layers ===
        self.backbone = backbone
        self.output_dropout = Dropout(dropout, name="output_dropout")
        units = 1 if task == "multiple_choice" else num_classes
        self.output_dense = keras.layers.Dense(units, dtype="float32", name="logits")

        # === Functional model ===
        token_ids = keras.Input(
            (None,) if k is None else (k, None), dtype="int32", name="token_ids"
        )
        flat = token_ids if k is None else _Fold(k, name="fold")(token_ids)
        hidden = backbone.hidden_states_model()(flat)[-1]  # after a final LayerNorm
        lm_logits = backbone.token_embedding(hidden, reverse=True)
        extract = ops.argmax(ops.cast(ops.equal(flat, extract_token_id), "int32"), axis=1)
        state = ops.take_along_axis(hidden, extract[:, None, None], axis=1)[:, 0]
        state = self.output_dropout(state)
        if task == "similarity":  # the two orders' representations, added
            state = ops.sum(_Fold(2, unfold=True, name="unfold_pair")(state), axis=1)
        logits = self.output_dense(state)
        if task == "multiple_choice":
            logits = _Fold(k, unfold=True, dtype="float32", name="unfold_choices")(logits)[..., 0]
        if k is not None:
            lm_logits = _Fold(k, unfold=True, dtype="float32", name="unfold_lm")(lm_logits)
        outputs = {"logits": logits, "lm_logits": lm_logits}
        super().__init__(inputs=token_ids, outputs=outputs, **kwargs)

        # === Config ===
        self.task = task
        self.num_classes = num_classes
        self.extract_token_id = extract_token_id
        self.num_choices = num_choices
        self.lm_weight = float(lm_weight)
        self.dropout = dropout

    def language_model_targets(self, token_ids):
        """The auxiliary objective's targets: each position's next id (`pad_token_id` at
        the end), for inputs of any of the tasks' shapes."""
        token_ids = np.asarray(token_ids)
        pad = np.full((*token_ids.shape[:-1], 1), self.backbone.pad_token_id, token_ids.dtype)
        return np.concatenate([token_ids[..., 1:], pad], axis=-1)

    def compile(self, optimizer="adam", loss=None, metrics=None, **kwargs):
        """Defaults: cross-entropy of the task plus `lm_weight` times the language
        model's (padding never a target), the task's accuracy."""
        if loss is None:
            loss = {"logits": keras.losses.SparseCategoricalCrossentropy(from_logits=True)}
            kwargs.setdefault("loss_weights", {"logits": 1.0})
            if self.lm_weight:
                loss["lm_logits"] = keras.losses.SparseCategoricalCrossentropy(
                    from_logits=True, ignore_class=self.backbone.pad_token_id
                )
                kwargs["loss_weights"]["lm_logits"] = self.lm_weight
        metrics = metrics or {"logits": [keras.metrics.SparseCategoricalAccuracy("accuracy")]}
        super().compile(optimizer=optimizer, loss=loss, metrics=metrics, **kwargs)

    def get_config(self):
        return {
            **super().get_config(),
            "task": self.task,
            "num_classes": self.num_classes,
            "extract_token_id": self.extract_token_id,
            "num_choices": self.num_choices,
            "lm_weight": self.lm_weight,
            "dropout": self.dropout,
        }
