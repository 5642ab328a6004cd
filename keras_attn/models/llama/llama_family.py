"""The Llama family's registry entry: `LlamaLanguageModel`, its Hugging Face twin
(Llama, Mistral, Qwen 2 and 3), `keras-attn lm --architecture llama`, GGUF files through
`keras_attn.models.from_gguf`, and the byte-level BPE those files carry
(`keras_attn.data.byte_level_bpe`)."""

import dataclasses
import functools

from keras_attn.errors import UserInputError
from keras_attn.models import registry
from keras_attn.models.gguf import GGUFArchitecture, add_gguf_architecture
from keras_attn.models.gguf import tokenizers as gguf_tokenizers
from keras_attn.models.llama import gguf_checkpoint
from keras_attn.models.llama.llama_checkpoint import MODEL_TYPES, hf_weights, load_from
from keras_attn.models.llama.llama_language_model import LlamaLanguageModel


def _build_language_model(settings, tokenizer):
    """`keras-attn lm --architecture llama`: pre-RMSNorm blocks, SwiGLU, RoPE on every
    layer, `num_key_value_heads` shared key/value heads, the output tied to the token
    embedding. What a Llama does not have is refused by name, not left unused."""
    other = {
        key: value
        for key, value, llama in (
            ("model.norm_first", settings.norm_first, True),
            ("model.score", settings.score, "scaled_dot"),
            ("model.position_embedding", settings.position_embedding, "learned"),
        )
        if value != llama
    }
    if other:
        raise UserInputError(
            "Expected the llama architecture's own blocks (pre-norm, scaled dot scores, "
            f"RoPE: leave these options at their defaults). Received: {other}"
        )
    arguments = registry.decoder_arguments(settings, tokenizer)
    arguments.pop("norm_first")  # always pre-norm: checked above
    return LlamaLanguageModel(
        tokenizer.vocabulary_size,
        **arguments,
        num_key_value_heads=settings.num_key_value_heads,
        max_sequence_length=settings.sequence_length,
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
        # A GGUF file's byte-level BPE or SentencePiece, or a `keras-attn lm` run's
        # WordPiece vocabulary.
        tokenizer=dataclasses.replace(
            gguf_tokenizers.BYTE_LEVEL_BPE,
            or_else=dataclasses.replace(gguf_tokenizers.SENTENCEPIECE, or_else=registry.WORDPIECE),
        ),
        language_models=(registry.LanguageModel("llama", _build_language_model),),
    )
)
# llama.cpp's converter interleaves Llama's query and key rows for GGML's RoPE.
add_gguf_architecture(
    GGUFArchitecture(
        name="llama",
        tensor_names=gguf_checkpoint.GGUF_NAMES,
        interleaved_rope_rows=True,
        config=gguf_checkpoint.hf_config,
        build=functools.partial(load_from, LlamaLanguageModel),
        family="llama",
        hf_weights=hf_weights,
    )
)
for _name, _names in (
    ("qwen2", gguf_checkpoint.QWEN2_NAMES),
    ("qwen3", gguf_checkpoint.QWEN3_NAMES),
):
    add_gguf_architecture(
        GGUFArchitecture(
            name=_name,
            tensor_names=_names,
            interleaved_rope_rows=False,  # llama.cpp's converter keeps Qwen's rows as they are
            config=gguf_checkpoint.qwen_config,
            build=functools.partial(load_from, LlamaLanguageModel),
            family="llama",
            hf_weights=hf_weights,
        )
    )
