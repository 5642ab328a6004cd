"""The ERNIE family's registry entry: `ErnieBackbone`, its typing head and its
pre-trainer (masked LM, next sentence, dEA). Linking runs in Python (`ernie_inputs`);
`keras-attn pretrain --objective ernie` and a typing export with linking in the graph
are still to come (issue 60's notes)."""

from keras_attn.models import registry
from keras_attn.models.ernie.entity_typing import EntityTyping
from keras_attn.models.ernie.ernie_backbone import ErnieBackbone
from keras_attn.models.ernie.ernie_pretrainer import ErniePretrainer

ERNIE = registry.register(
    registry.Family(
        name="ernie", backbone_cls=ErnieBackbone, classes=(EntityTyping, ErniePretrainer)
    )
)
