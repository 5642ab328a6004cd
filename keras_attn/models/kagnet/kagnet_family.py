"""The KagNet family's registry entry: the model stands on a `BertBackbone` it brings
along (as a language model is its own backbone)."""

from keras_attn.models import registry
from keras_attn.models.kagnet.kagnet import KagNet

KAGNET = registry.register(registry.Family(name="kagnet", backbone_cls=KagNet))
