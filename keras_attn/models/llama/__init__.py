"""Llama-shaped decoders (Llama 2, SmolLM2, Mistral): Hugging Face folders and GGUF files.
Gemma builds on the package's `RMSNormDecoder` and `projection_rows`."""

from keras_attn.models.llama import llama_family  # noqa: F401  (registers the family)
from keras_attn.models.llama.llama_checkpoint import projection_rows as projection_rows
from keras_attn.models.llama.llama_language_model import LlamaLanguageModel
from keras_attn.models.llama.llama_language_model import RMSNormDecoder as RMSNormDecoder

__all__ = ["LlamaLanguageModel"]
