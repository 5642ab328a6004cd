"""The Gemma family's registry entry: `GemmaLanguageModel` (Gemma 3's text decoder), its
Hugging Face twin (`Gemma3ForCausalLM`) and llama.cpp's `gemma3` GGUF files."""

import functools

from keras_attn.models import registry
from keras_attn.models.gemma.gemma_checkpoint import (
    GGUF_NAMES,
    MODEL_TYPES,
    gguf_config,
    hf_weights,
    load_from,
)
from keras_attn.models.gemma.gemma_language_model import GemmaLanguageModel
from keras_attn.models.gguf import GGUFArchitecture, add_gguf_architecture
from keras_attn.models.gguf import tokenizers as gguf_tokenizers

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
    )
)
# llama.cpp's converter leaves Gemma 3's query and key rows in Hugging Face's order and
# stores each RMS norm's weight as 1 + w.
add_gguf_architecture(
    GGUFArchitecture(
        name="gemma3",
        tensor_names=GGUF_NAMES,
        interleaved_rope_rows=False,
        config=gguf_config,
        build=functools.partial(load_from, GemmaLanguageModel),
        family="gemma",
        norm_offset=1.0,
        hf_weights=hf_weights,
    )
)
