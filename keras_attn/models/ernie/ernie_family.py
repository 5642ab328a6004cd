"""The ERNIE family's registry entry: `ErnieBackbone` (issue 60: its pre-training,
typing head, linking and exports follow)."""

from keras_attn.models import registry
from keras_attn.models.ernie.ernie_backbone import ErnieBackbone

ERNIE = registry.register(registry.Family(name="ernie", backbone_cls=ErnieBackbone))
