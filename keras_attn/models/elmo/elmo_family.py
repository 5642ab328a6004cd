"""ELMo's registry entry: `ElmoBiLM`, whose layers the feature-based heads read."""

from keras_attn.models import registry
from keras_attn.models.elmo.elmo_bilm import ElmoBiLM

ELMO = registry.register(registry.Family(name="elmo", backbone_cls=ElmoBiLM))
