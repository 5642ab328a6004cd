"""XLNet: Transformer-XL layers read in permuted factorisation orders."""

from keras_attn.models.xlnet import xlnet_family  # noqa: F401  (registers the family)
from keras_attn.models.xlnet.xlnet_backbone import XLNetBackbone
from keras_attn.models.xlnet.xlnet_classifier import XLNetClassifier
from keras_attn.models.xlnet.xlnet_pretrainer import XLNetPretrainer

__all__ = ["XLNetBackbone", "XLNetClassifier", "XLNetPretrainer"]
