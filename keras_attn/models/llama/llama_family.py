"""The Llama family's registry entry: `LlamaLanguageModel`, its Hugging Face twin
(Llama, Mistral), GGUF files through `keras_attn.models.from_gguf`, and the byte-level
BPE those files carry (`keras_attn.data.byte_level_bpe`)."""

from keras_attn.models import registry
from keras_attn.models.llama import gguf_checkpoint
from keras_attn.models.llama.llama_checkpoint import MODEL_TYPES
from keras_attn.models.llama.llama_language_model import LlamaLanguageModel


def _load(folder, sequence_length=None, lowercase=None):
    from keras_attn.data import byte_level_bpe

    return byte_level_bpe.load_files(folder, sequence_length, lowercase)


def _save(tokenizer, folder):
    from keras_attn.data import byte_level_bpe

    byte_level_bpe.save_files(tokenizer, folder)


# vocab.json, merges.txt and the settings a GGUF file's tokenizer adds (special tokens,
# digits apart, its chat template): what a saved preprocessor's assets hold.
BYTE_LEVEL_BPE = registry.TokenizerFiles(
    ("vocab.json", "merges.txt", "byte_level_bpe.json"),
    _load,
    _save,
    classes=("ByteLevelBPETokenizer",),
)

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
        tokenizer=BYTE_LEVEL_BPE,
        gguf_loaders={"llama": gguf_checkpoint.load_file},
    )
)
