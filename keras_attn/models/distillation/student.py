"""A student for distillation: a shallower copy of a BERT teacher from every k-th layer
(DistilBERT's initialisation), and which teacher layer each student layer imitates."""

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.argument_checks import check_positive_int
from keras_attn.models.bert import BertBackbone, BertClassifier, BertPretrainer

TASK_MODELS = (BertClassifier, BertPretrainer)
# The backbone's layers outside its blocks, which a student takes over unchanged.
_SHARED_LAYERS = (
    "token_embedding",
    "segment_embedding",
    "position_embedding",
    "embeddings_layer_norm",
    "embedding_projection",
    "final_layer_norm",
    "pooled_dense",
)


def uniform_layer_map(teacher_layers, student_layers):
    """The teacher layer (1-based) each student layer imitates: evenly spaced, the last
    on the last (`6 -> 3`: `[2, 4, 6]`; TinyBERT's uniform strategy)."""
    return [round((i + 1) * teacher_layers / student_layers) for i in range(student_layers)]


def check_layer_map(layer_map, teacher_layers, student_layers):
    """`layer_map` checked (default: `uniform_layer_map`), as a list."""
    if layer_map is None:
        return uniform_layer_map(teacher_layers, student_layers)
    layer_map = list(layer_map)
    if len(layer_map) != student_layers or not all(
        isinstance(i, int) and 1 <= i <= teacher_layers for i in layer_map
    ):
        raise ValueError(
            f"Expected `layer_map` to give each of the student's {student_layers} layers a "
            f"teacher layer in [1, {teacher_layers}]. Received: layer_map={layer_map}"
        )
    return layer_map


def _backbone(model):
    return model if isinstance(model, BertBackbone) else model.backbone


@keras_attn_export("keras_attn.models.student_from_teacher", serializable=False)
def student_from_teacher(teacher, num_layers, layer_map=None):
    """A shallower copy of `teacher`, initialised from every k-th of its layers.

    "We initialize the student from the teacher by taking one layer out of two"
    (Sanh et al., 2019, DistilBERT): the student has the teacher's embeddings,
    configuration and (for a task model) head, and `num_layers` blocks copied from
    the teacher's layers `layer_map` (default: evenly spaced, the last one included,
    `uniform_layer_map`).

    Args:
        teacher: a `BertBackbone`, `BertClassifier` or `BertPretrainer`.
        num_layers: the student's depth, `1 <= num_layers <= teacher's`.
        layer_map: the teacher layer (1-based) to copy into each student layer.

    Returns:
        A model of the teacher's type, with `num_layers` layers.

    Example:

    >>> import numpy as np
    >>> from keras_attn.models import BertBackbone, BertClassifier, student_from_teacher
    >>> teacher = BertClassifier(BertBackbone(vocabulary_size=50, num_layers=4,
    ...     num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8), 2)
    >>> student = student_from_teacher(teacher, 2)
    >>> student.backbone.num_layers
    2
    >>> bool(np.all(np.asarray(student.backbone.transformer_layers[1].weights[0])
    ...     == np.asarray(teacher.backbone.transformer_layers[3].weights[0])))
    True
    """
    if not isinstance(teacher, (BertBackbone, *TASK_MODELS)):
        raise TypeError(
            "Expected a BertBackbone, BertClassifier or BertPretrainer. "
            f"Received: teacher of type {type(teacher).__name__}"
        )
    source = _backbone(teacher)
    check_positive_int("num_layers", num_layers)
    if source.share_layers != "none":
        raise ValueError(
            "Expected a teacher with a block per layer. "
            f"Received: share_layers={source.share_layers!r}"
        )
    if num_layers > source.num_layers:
        raise ValueError(
            f"Expected `num_layers` <= the teacher's {source.num_layers}. "
            f"Received: num_layers={num_layers}"
        )
    layer_map = check_layer_map(layer_map, source.num_layers, num_layers)
    backbone = BertBackbone.from_config({**source.get_config(), "num_layers": num_layers})
    taken = [source.transformer_layers[i - 1] for i in layer_map]
    shared = [
        (getattr(backbone, name), getattr(source, name))
        for name in _SHARED_LAYERS
        if getattr(source, name) is not None
    ]
    for mine, theirs in [*shared, *zip(backbone.transformer_layers, taken, strict=True)]:
        mine.set_weights(theirs.get_weights())
    if isinstance(teacher, BertBackbone):
        return backbone
    student = type(teacher).from_config(
        {**teacher.get_config(), "backbone": keras.saving.serialize_keras_object(backbone)}
    )
    student.backbone.set_weights(backbone.get_weights())
    for mine, theirs in zip(_head_weights(student), _head_weights(teacher), strict=True):
        mine.assign(theirs)
    return student


def _head_weights(model):
    inside = {id(v) for v in model.backbone.weights}
    return [v for v in model.weights if id(v) not in inside]
