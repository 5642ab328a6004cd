"""Gemma 3's text decoder: Hugging Face folders and GGUF files."""

from keras_attn.models.gemma import gemma_family  # noqa: F401  (registers the family)
from keras_attn.models.gemma.gemma_language_model import GemmaLanguageModel

__all__ = ["GemmaLanguageModel"]
