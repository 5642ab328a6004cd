"""The ERNIE family's registry entry: `ErnieBackbone`, its typing head (served with
linking in the graph: `keras_attn.export.signatures.mention_typing`) and its pre-trainer
(masked LM, next sentence, dEA). `keras-attn pretrain --objective ernie` is still to
come (issue 60's notes)."""

from keras_attn.models import registry
from keras_attn.models.ernie.entity_typing import EntityTyping
from keras_attn.models.ernie.ernie_backbone import ErnieBackbone
from keras_attn.models.ernie.ernie_pretrainer import ErniePretrainer

ERNIE = registry.register(
    registry.Family(
        name="ernie",
        backbone_cls=ErnieBackbone,
        classes=(ErniePretrainer,),
        signatures={EntityTyping: "entity_typing"},
    )
)
