"""The task models on a BertBackbone: `Task` with BERT's backbone class."""

from keras_attn.models.bert.bert_backbone import BertBackbone
from keras_attn.models.task import Task, without_weights_of


def without_poolers(weights, *backbones):
    """`weights` less the backbones' pooler, for objectives that never read
    `pooled_output`."""
    return without_weights_of(weights, [backbone.pooled_dense for backbone in backbones])


class BertTask(Task):
    """Base of the functional task models on a `BertBackbone` (pre-training,
    classification, tagging, span QA, multiple choice)."""

    backbone_cls = BertBackbone
