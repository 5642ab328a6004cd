"""Llama-architecture GGUF files (SmolLM2's, TinyLlama's): their tensor names and the
Hugging Face config their metadata describes, for the `llama` record of
`keras_attn.models.gguf` (added in `llama_family.py`).

llama.cpp's converter renames the Hugging Face tensors (`blk.0.attn_q.weight` for
`model.layers.0.self_attn.q_proj.weight`) and interleaves the two halves of each query
and key head's rows (Hugging Face's RoPE rotates the pair `(i, i + d/2)`, GGML's the pair
`(2i, 2i + 1)`), which reading puts back; everything else is the Hugging Face layout.
"""

from keras_attn.checkpoints.checkpoint_errors import CheckpointError

# GGUF's name -> the Hugging Face name (`{}`: the block's number).
GGUF_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "output.weight": "lm_head.weight",
    "blk.{}.attn_norm.weight": "model.layers.{}.input_layernorm.weight",
    "blk.{}.attn_q.weight": "model.layers.{}.self_attn.q_proj.weight",
    "blk.{}.attn_k.weight": "model.layers.{}.self_attn.k_proj.weight",
    "blk.{}.attn_v.weight": "model.layers.{}.self_attn.v_proj.weight",
    "blk.{}.attn_output.weight": "model.layers.{}.self_attn.o_proj.weight",
    "blk.{}.ffn_norm.weight": "model.layers.{}.post_attention_layernorm.weight",
    "blk.{}.ffn_gate.weight": "model.layers.{}.mlp.gate_proj.weight",
    "blk.{}.ffn_up.weight": "model.layers.{}.mlp.up_proj.weight",
    "blk.{}.ffn_down.weight": "model.layers.{}.mlp.down_proj.weight",
}


# Qwen 2's biases on the query, key and value projections; Qwen 3's RMSNorm of each
# query and key head. llama.cpp's converter writes both without interleaving the query
# and key rows (its `Qwen2Model` and `Qwen3Model` keep Hugging Face's order).
QWEN2_NAMES = {
    **GGUF_NAMES,
    **{
        f"blk.{{}}.attn_{part}.bias": f"model.layers.{{}}.self_attn.{part}_proj.bias"
        for part in "qkv"
    },
}
QWEN3_NAMES = {
    **GGUF_NAMES,
    "blk.{}.attn_q_norm.weight": "model.layers.{}.self_attn.q_norm.weight",
    "blk.{}.attn_k_norm.weight": "model.layers.{}.self_attn.k_norm.weight",
}


def qwen_config(file):
    """The Hugging Face configuration of a Qwen 2 or Qwen 3 GGUF file (`general.
    architecture` `qwen2` or `qwen3`: Llama's keys under the architecture's prefix)."""
    config = hf_config(file)
    if "sliding_window" in config:
        raise CheckpointError(f"{file.path}: a sliding window in a Qwen file is not supported")
    config["model_type"] = file.architecture()
    return config


def hf_config(file):
    """The Hugging Face `config.json` a Llama GGUF file's metadata describes."""
    arch = file.architecture()

    def key(name, default=None):
        return file.get(f"{arch}.{name}", default)

    heads = key("attention.head_count")
    hidden = key("embedding_length")
    if file.get(f"{arch}.rope.scaling.type", "none") not in ("none", "linear"):
        raise CheckpointError(
            f"{file.path}: RoPE scaling {file.get(f'{arch}.rope.scaling.type')!r} is not "
            "supported (none or linear)"
        )
    if "rope_freqs.weight" in file.shapes:  # llama.cpp's form of rope_type 'llama3'
        raise CheckpointError(
            f"{file.path}: RoPE frequencies scaled per dimension (rope_freqs.weight, Llama "
            "3.1's rope_type 'llama3') are not supported (none or linear)"
        )
    vocabulary = key("vocab_size", len(file.get("tokenizer.ggml.tokens", [])))
    config = {
        "model_type": "llama",
        "vocab_size": vocabulary,
        "hidden_size": hidden,
        "intermediate_size": key("feed_forward_length"),
        "num_hidden_layers": key("block_count"),
        "num_attention_heads": heads,
        "num_key_value_heads": key("attention.head_count_kv", heads),
        "max_position_embeddings": key("context_length", 2048),
        "rms_norm_eps": key("attention.layer_norm_rms_epsilon", 1e-5),
        "rope_theta": key("rope.freq_base", 10000.0),
        "tie_word_embeddings": "output.weight" not in file.shapes,
        "pad_token_id": file.get("tokenizer.ggml.padding_token_id"),
        "eos_token_id": file.get("tokenizer.ggml.eos_token_id"),
        "hidden_act": "silu",
    }
    if key("attention.key_length") is not None:
        config["head_dim"] = key("attention.key_length")
    if file.get(f"{arch}.rope.scaling.type") == "linear":
        config["rope_scaling"] = {"type": "linear", "factor": key("rope.scaling.factor", 1.0)}
    if key("attention.sliding_window") is not None:  # Mistral's
        config["model_type"] = "mistral"
        config["sliding_window"] = key("attention.sliding_window")
    return config
