"""ELMo: a bidirectional LSTM language model whose layers feed task models (feature-based)."""

from keras_attn.models.elmo import elmo_family  # noqa: F401  (registers the family)
from keras_attn.models.elmo.elmo_bilm import ElmoBiLM, character_table

__all__ = ["ElmoBiLM", "character_table"]
