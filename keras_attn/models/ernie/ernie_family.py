"""The ERNIE family's registry entry: `ErnieBackbone` and `EntityTyping` (issue 60: its
pre-training, linking in the graph and exports follow)."""

from keras_attn.models import registry
from keras_attn.models.ernie.entity_typing import EntityTyping
from keras_attn.models.ernie.ernie_backbone import ErnieBackbone

ERNIE = registry.register(
    registry.Family(name="ernie", backbone_cls=ErnieBackbone, classes=(EntityTyping,))
)
