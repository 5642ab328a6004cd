"""ERNIE (Zhang et al., 2019): BERT's encoder, then knowledge fusion blocks that read a
knowledge graph's entities aligned to their mentions."""

from keras_attn.models.ernie import ernie_family  # noqa: F401  (registers the family)
from keras_attn.models.ernie.entity_typing import EntityTyping
from keras_attn.models.ernie.ernie_backbone import ErnieBackbone
from keras_attn.models.ernie.ernie_inputs import ernie_inputs
from keras_attn.models.ernie.ernie_pretrainer import ErniePretrainer, dea_inputs

__all__ = ["EntityTyping", "ErnieBackbone", "ErniePretrainer", "dea_inputs", "ernie_inputs"]
