"""The Gemma family's registry entry: `GemmaLanguageModel` (Gemma 3's text decoder), its
Hugging Face twin (`Gemma3ForCausalLM`) and llama.cpp's `gemma3` GGUF files."""

import functools

from keras_attn.models import gguf_tokenizers, registry
from keras_attn.models.gemma.gemma_checkpoint import MODEL_TYPES, load_gguf
from keras_attn.models.gemma.gemma_language_model import GemmaLanguageModel

GEMMA = registry.register(
    registry.Family(
        name="gemma",
        backbone_cls=GemmaLanguageModel,
        model_types=MODEL_TYPES,
        twin=registry.HuggingFaceTwin(
            keras_file="model.keras",
            tokenizer_files=(),
            auto_class="AutoModelForCausalLM",
            read_tokenizer=lambda folder: None,
            probe=registry.token_probe,
        ),
        signatures={GemmaLanguageModel: "language_model"},
        tokenizer=gguf_tokenizers.SENTENCEPIECE,
        gguf_loaders={"gemma3": functools.partial(load_gguf, GemmaLanguageModel)},
    )
)
