"""Knowledge distillation of BERT task models: a student imitates a frozen teacher.

The student learns from the labels and from the teacher: its softened output
distribution (Hinton et al., 2015; DistilBERT), its hidden states (through a learned
projection where the widths differ) and its attention distributions on mapped layers
(TinyBERT, MiniLM). `student_from_teacher` (student.py) makes a shallower copy of the
teacher from every k-th layer (DistilBERT's initialisation).
"""

import keras
from keras import ops

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_number
from keras_attn.models.bert import BertClassifier
from keras_attn.models.distillation.student import TASK_MODELS, check_layer_map
from keras_attn.models.functional_model import CompiledOnLoad
from keras_attn.models.layout_maps import LayoutMapMixin

BACKBONE_INPUTS = ("token_ids", "segment_ids", "padding_mask")
_EPSILON = 1e-8


@keras_attn_export("keras_attn.models.Distiller")
class Distiller(LayoutMapMixin, CompiledOnLoad, keras.Model):
    """Trains `student` to imitate a frozen `teacher` as well as to fit the labels.

    The loss is `task_weight * L_task + output_weight * T^2 * KL(p_T || p_S)` (the
    teacher's and student's outputs softened by `temperature`; Hinton et al., 2015)
    `+ hidden_weight * L_hidden + attention_weight * L_attention`, where `L_hidden`
    is the mean squared error between the teacher's embeddings and mapped hidden
    states and the student's (projected by learned matrices `W_e`, `W_h` where the
    widths differ; TinyBERT), and `L_attention` the KL divergence between their
    attention distributions on the mapped layers (MiniLM; TinyBERT compares the
    unnormalised scores), averaged over heads, real queries and layers (with
    different head counts, over the heads' mean distributions). Padding counts
    nowhere. The teacher runs in inference mode and is not trained
    (`teacher.trainable` is set to False). Both are `BertClassifier`s (labels:
    class ids) or `BertPretrainer`s (masked-LM pre-training distillation: labels
    and sample weights as `BertPretrainer` takes them; the masked-LM output is
    distilled, a sentence head is trained on its labels). After `fit`, `student` is
    the model to keep.

    `compile()` takes the optimizer (Adam by default); the loss and the metrics
    (`accuracy` of the student, `task_loss`, `output_loss`, `hidden_loss`,
    `attention_loss`) are the model's own.

    Args:
        teacher: the trained task model (frozen).
        student: the same kind of task model on the same vocabulary; any depth and
            width (`student_from_teacher` makes a good start).
        temperature: the softmax temperature of the output distributions (> 0).
        task_weight: weight of the student's loss on the labels.
        output_weight: weight of the output distillation.
        hidden_weight: weight of the hidden-state distillation (0: off).
        attention_weight: weight of the attention distillation (0: off).
        layer_map: the teacher layer (1-based) each student layer imitates (default:
            evenly spaced, last on last).
        **kwargs: `keras.Model` arguments (`name`).

    Call arguments:
        inputs: the task model's inputs.
        training: dropout in the student (the teacher never has any).

    Returns:
        The student's outputs (logits, or the pretrainer's dict of logits).

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import (BertBackbone, BertClassifier, Distiller,
    ...     student_from_teacher)
    >>> teacher = BertClassifier(BertBackbone(vocabulary_size=50, num_layers=4,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8), 2)
    >>> distiller = Distiller(teacher, student_from_teacher(teacher, 2), hidden_weight=1.0,
    ...     attention_weight=1.0)
    >>> distiller.compile()
    >>> x = {"token_ids": np.array([[2, 7, 9, 3]] * 4), "segment_ids": np.zeros((4, 4), "int32"),
    ...      "padding_mask": np.ones((4, 4), "int32")}
    >>> history = distiller.fit(x, np.array([0, 1, 0, 1]), epochs=1, verbose=0)
    >>> sorted(history.history)  # doctest: +NORMALIZE_WHITESPACE
    ['accuracy', 'attention_loss', 'hidden_loss', 'loss', 'output_loss', 'task_loss']
    >>> tuple(distiller.student(x).shape)
    (4, 2)

    References:
        - [Hinton et al., 2015](https://arxiv.org/abs/1503.02531)
        - [Sanh et al., 2019, DistilBERT](https://arxiv.org/abs/1910.01108)
        - [Jiao et al., 2019, TinyBERT](https://arxiv.org/abs/1909.10351)
        - [Wang et al., 2020, MiniLM](https://arxiv.org/abs/2002.10957)
    """

    @staticmethod
    def check_classifier_teacher(teacher):
        """A TypeError unless `teacher` is a `BertClassifier`, the teacher that
        distillation into a smaller classifier (`keras-attn distill`) starts from."""
        if not isinstance(teacher, BertClassifier):
            raise TypeError(
                "Expected a BertClassifier teacher. Received: teacher of type "
                f"{type(teacher).__name__}"
            )

    def __init__(
        self,
        teacher,
        student,
        temperature=2.0,
        task_weight=1.0,
        output_weight=1.0,
        hidden_weight=0.0,
        attention_weight=0.0,
        layer_map=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        for name, model in (("teacher", teacher), ("student", student)):
            if not isinstance(model, TASK_MODELS):
                raise TypeError(
                    f"Expected `{name}` to be a BertClassifier or BertPretrainer. "
                    f"Received: {name} of type {type(model).__name__}"
                )
        if type(teacher) is not type(student):
            raise TypeError(
                "Expected a teacher and student of one kind. Received: "
                f"teacher {type(teacher).__name__}, student {type(student).__name__}"
            )
        t, s = teacher.backbone, student.backbone
        if t.vocabulary_size != s.vocabulary_size:
            raise ValueError(
                "Expected a teacher and student with one vocabulary. Received: vocabulary_size "
                f"{t.vocabulary_size} (teacher) and {s.vocabulary_size} (student)"
            )
        if isinstance(teacher, BertClassifier) and teacher.num_classes != student.num_classes:
            raise ValueError(
                f"Expected the same classes. Received: num_classes {teacher.num_classes} "
                f"(teacher) and {student.num_classes} (student)"
            )
        check_positive_number("temperature", temperature)
        weights = {
            "task_weight": task_weight,
            "output_weight": output_weight,
            "hidden_weight": hidden_weight,
            "attention_weight": attention_weight,
        }
        for name, value in weights.items():
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"Expected `{name}` >= 0. Received: {name}={value!r}")
        if not any(weights.values()):
            raise ValueError(f"Expected at least one positive weight. Received: {weights}")

        # === Layers ===
        self.teacher = teacher
        self.student = student
        teacher.trainable = False
        self.layer_map = check_layer_map(layer_map, t.num_layers, s.num_layers)
        self.embedding_projection = self.hidden_projection = None
        if hidden_weight and t.hidden_dim != s.hidden_dim:
            self.embedding_projection = keras.layers.Dense(
                t.hidden_dim, use_bias=False, name="embedding_projection"
            )
            self.hidden_projection = keras.layers.Dense(
                t.hidden_dim, use_bias=False, name="hidden_projection"
            )
            for projection in (self.embedding_projection, self.hidden_projection):
                projection.build((None, None, s.hidden_dim))
        self.trackers = {
            name: keras.metrics.Mean(name=name)
            for name in ("accuracy", "task_loss", "output_loss", "hidden_loss", "attention_loss")
        }
        self.built = True

        # === Config ===
        self.temperature = temperature
        self.task_weight = task_weight
        self.output_weight = output_weight
        self.hidden_weight = hidden_weight
        self.attention_weight = attention_weight

    # --- the forward passes ---

    @staticmethod
    def _run(model, inputs, training):
        features = model.backbone.intermediate_outputs(
            {name: inputs[name] for name in BACKBONE_INPUTS}, training=training
        )
        return model.head(features, inputs, training=training), features

    def call(self, inputs, training=None):
        student_outputs, student_features = self._run(self.student, inputs, training)
        teacher_outputs, teacher_features = self._run(self.teacher, inputs, False)
        teacher_outputs = keras.tree.map_structure(ops.stop_gradient, teacher_outputs)
        # What `compute_loss` needs besides `y_pred` (the trainers call it right after
        # this call, in the same trace); `y_pred` stays the student's outputs, so
        # `predict` and `evaluate` see the student alone.
        self._last = (student_features, teacher_outputs, teacher_features)
        return student_outputs

    # --- the losses ---

    def _logits_and_targets(self, y, y_pred, sample_weight):
        """`[(output name, student logits, labels, sample weights or None)]`."""
        if isinstance(self.student, BertClassifier):
            return [("logits", y_pred, y, sample_weight)]
        sample_weight = sample_weight or {}
        return [
            (name, y_pred[name], y[name], sample_weight.get(name)) for name in y_pred if name in y
        ]

    def _objectives(self, x, y, y_pred, sample_weight):
        student_features, teacher_outputs, teacher_features = self._last
        if isinstance(self.student, BertClassifier):
            teacher_outputs = {"logits": teacher_outputs}
        task, output, hits = [], [], []
        for name, logits, labels, weights in self._logits_and_targets(y, y_pred, sample_weight):
            weights = (
                ops.ones(ops.shape(labels), "float32")
                if weights is None
                else ops.cast(weights, "float32")
            )
            total = ops.maximum(ops.sum(weights), 1.0)
            entropy = keras.losses.sparse_categorical_crossentropy(labels, logits, from_logits=True)
            task.append(ops.sum(entropy * weights) / total)
            predicted = ops.argmax(logits, axis=-1)
            correct = ops.cast(ops.equal(predicted, ops.cast(labels, predicted.dtype)), "float32")
            hits.append((correct, weights))
            if name in ("logits", "mlm_logits"):
                output.append(
                    ops.sum(self._soft_kl(teacher_outputs[name], logits) * weights) / total
                )
        real = ops.cast(x["padding_mask"], "float32")
        losses = {
            "task_loss": sum(task),
            "output_loss": sum(output) * self.temperature**2,
            "hidden_loss": self._hidden_loss(student_features, teacher_features, real),
            "attention_loss": self._attention_loss(student_features, teacher_features, real),
        }
        return losses, hits[0]

    def _soft_kl(self, teacher_logits, student_logits):
        """KL(softmax(t / T) || softmax(s / T)) over the last axis."""
        t = ops.log_softmax(ops.cast(teacher_logits, "float32") / self.temperature, axis=-1)
        s = ops.log_softmax(ops.cast(student_logits, "float32") / self.temperature, axis=-1)
        return ops.sum(ops.exp(t) * (t - s), axis=-1)

    def _hidden_loss(self, student, teacher, real):
        if not self.hidden_weight:
            return ops.zeros(())
        pairs = [(student["embeddings"], teacher["embeddings"], self.embedding_projection)]
        pairs += [
            (student["hidden_states"][i], teacher["hidden_states"][j - 1], self.hidden_projection)
            for i, j in enumerate(self.layer_map)
        ]
        width = teacher["embeddings"].shape[-1]
        total = ops.maximum(ops.sum(real), 1.0) * width
        loss = 0.0
        for mine, theirs, projection in pairs:
            mine = ops.cast(mine, "float32")
            if projection is not None:
                mine = projection(mine)
            squared = ops.square(mine - ops.stop_gradient(ops.cast(theirs, "float32")))
            loss = loss + ops.sum(ops.sum(squared, axis=-1) * real) / total
        return loss / len(pairs)

    def _attention_loss(self, student, teacher, real):
        if not self.attention_weight:
            return ops.zeros(())
        loss = 0.0
        for i, j in enumerate(self.layer_map):
            mine = ops.cast(student["attention"][i], "float32")
            theirs = ops.stop_gradient(ops.cast(teacher["attention"][j - 1], "float32"))
            if mine.shape[1] != theirs.shape[1]:  # different head counts: the mean maps
                mine = ops.mean(mine, axis=1, keepdims=True)
                theirs = ops.mean(theirs, axis=1, keepdims=True)
            kl = ops.sum(
                theirs * (ops.log(theirs + _EPSILON) - ops.log(mine + _EPSILON)), axis=-1
            )  # (batch, heads, queries)
            rows = ops.mean(kl, axis=1) * real
            loss = loss + ops.sum(rows) / ops.maximum(ops.sum(real), 1.0)
        return loss / len(self.layer_map)

    def compute_loss(self, x=None, y=None, y_pred=None, sample_weight=None, training=True):
        objectives = self._objectives(x, y, y_pred, sample_weight)
        # Kept for `compute_metrics`, which the trainers call next on the same `y_pred`.
        self._step_objectives = (y_pred, objectives)
        losses, _ = objectives
        loss = (
            self.task_weight * losses["task_loss"]
            + self.output_weight * losses["output_loss"]
            + self.hidden_weight * losses["hidden_loss"]
            + self.attention_weight * losses["attention_loss"]
        )
        if training and self.losses:
            loss = loss + ops.sum(ops.stack(self.losses))
        return loss

    def compute_metrics(self, x, y, y_pred, sample_weight=None):
        step_pred, objectives = getattr(self, "_step_objectives", (None, None))
        if step_pred is not y_pred:  # not this step's loss (e.g. JAX's separate traces)
            objectives = self._objectives(x, y, y_pred, sample_weight)
        losses, (correct, weights) = objectives
        for name, value in losses.items():
            self.trackers[name].update_state(value)
        self.trackers["accuracy"].update_state(correct, sample_weight=weights)
        return super().compute_metrics(x, y, y_pred, sample_weight)

    def compile(self, optimizer="adam", **kwargs):
        """The optimizer (Adam by default) and Keras's other arguments; the loss and
        metrics are the model's own."""
        super().compile(optimizer=optimizer, **kwargs)

    def get_config(self):
        return {
            "name": self.name,
            "trainable": self.trainable,
            "teacher": keras.saving.serialize_keras_object(self.teacher),
            "student": keras.saving.serialize_keras_object(self.student),
            "temperature": self.temperature,
            "task_weight": self.task_weight,
            "output_weight": self.output_weight,
            "hidden_weight": self.hidden_weight,
            "attention_weight": self.attention_weight,
            "layer_map": list(self.layer_map),
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        for name in ("teacher", "student"):
            config[name] = keras.saving.deserialize_keras_object(config[name])
        return cls(**config)
