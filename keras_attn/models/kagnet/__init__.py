"""KagNet (Lin et al., 2019): multiple choice that reads the paths between a statement's
concepts and a choice's in a knowledge graph, beside BERT's encoding of the text."""

from keras_attn.models.kagnet import kagnet_family  # noqa: F401  (registers the family)
from keras_attn.models.kagnet.kagnet import KagNet

__all__ = ["KagNet"]
