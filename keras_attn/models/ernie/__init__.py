"""ERNIE (Zhang et al., 2019): BERT's encoder, then knowledge fusion blocks that read a
knowledge graph's entities aligned to their mentions."""

from keras_attn.models.ernie import ernie_family  # noqa: F401  (registers the family)
from keras_attn.models.ernie.entity_typing import EntityTyping
from keras_attn.models.ernie.ernie_backbone import ErnieBackbone

__all__ = ["EntityTyping", "ErnieBackbone"]
