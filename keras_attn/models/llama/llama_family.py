"""The Llama family's registry entry: `LlamaLanguageModel`, its Hugging Face twin
(Llama, Mistral), GGUF files through `keras_attn.models.from_gguf`, and the byte-level
BPE those files carry (`keras_attn.data.byte_level_bpe`)."""

from keras_attn.models import gguf_tokenizers, registry
from keras_attn.models.llama import gguf_checkpoint
from keras_attn.models.llama.llama_checkpoint import MODEL_TYPES
from keras_attn.models.llama.llama_language_model import LlamaLanguageModel

LLAMA = registry.register(
    registry.Family(
        name="llama",
        backbone_cls=LlamaLanguageModel,
        model_types=MODEL_TYPES,
        twin=registry.HuggingFaceTwin(
            keras_file="model.keras",
            tokenizer_files=(),
            auto_class="AutoModelForCausalLM",
            read_tokenizer=lambda folder: None,
            probe=registry.token_probe,
        ),
        signatures={LlamaLanguageModel: "language_model"},
        tokenizer=gguf_tokenizers.BYTE_LEVEL_BPE,
        gguf_loaders={"llama": gguf_checkpoint.load_file},
    )
)
