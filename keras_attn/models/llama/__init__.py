"""Llama-shaped decoders (Llama 2, SmolLM2, Mistral): Hugging Face folders and GGUF files."""

from keras_attn.models.llama import llama_family  # noqa: F401  (registers the family)
from keras_attn.models.llama.llama_language_model import LlamaLanguageModel

__all__ = ["LlamaLanguageModel"]
