"""Gemma 3 text checkpoints (the Hugging Face layout, and llama.cpp's GGUF files) in and
out of `GemmaLanguageModel`.

Gemma's RMSNorm multiplies by `1 + w` and stores `w`; ours multiplies by its scale, so
every norm's scale is the stored weight plus one (`PLUS_ONE`). GGUF files store `1 + w`
already (llama.cpp's converter adds the one); their names are mapped to Hugging Face's
and the one taken off, as `transformers` reads them, so both formats go one way in.
llama.cpp rotates Gemma's queries and keys in halves, as Hugging Face does: no rows to
reorder.
"""

import dataclasses

from keras_attn.checkpoints import (
    IDENTITY,
    CheckpointError,
    Linear,
    Transform,
    assign,
    config_file,
    exported_tensors,
    positive_floats,
    positive_ints,
    read_hf_folder,
    warn_unused,
    write_hf_folder,
)
from keras_attn.errors import UserInputError
from keras_attn.models.llama import projection_rows

MODEL_TYPES = ("gemma3_text",)
_OUTPUT = Linear(in_axes=2)


@dataclasses.dataclass(frozen=True)
class PlusOne(Transform):
    """A Gemma norm weight `w` <-> our scale `1 + w`."""

    def to_ours(self, value, shape):
        return value.reshape(shape) + 1.0

    def to_theirs(self, value):
        return value - 1.0


PLUS_ONE = PlusOne()


def table(model):
    """`[(variable, checkpoint name, Transform)]` for every variable of `model`."""
    rows = [(model.token_embedding.embeddings, "model.embed_tokens.weight", IDENTITY)]
    for i, block in enumerate(model.transformer_layers):
        prefix, attention = f"model.layers.{i}", block.self_attention
        norms = {
            "input_layernorm": block.self_attention_layer_norm,
            "self_attn.q_norm": attention.query_norm,
            "self_attn.k_norm": attention.key_norm,
            "post_attention_layernorm": block.self_attention_post_norm,
            "pre_feedforward_layernorm": block.feedforward_layer_norm,
            "post_feedforward_layernorm": block.feedforward_post_norm,
        }
        rows += [(n.scale, f"{prefix}.{name}.weight", PLUS_ONE) for name, n in norms.items()]
        rows += projection_rows(block, prefix)
    rows.append((model.final_layer_norm.scale, "model.norm.weight", PLUS_ONE))
    return rows


def _global_every(config):
    """Gemma 3's layer pattern: every n-th layer global, as `layer_types` (or the
    older `sliding_window_pattern`) says; another pattern is refused by name."""
    layers = config["num_hidden_layers"]
    types = config.get("layer_types")
    every = config.get("sliding_window_pattern") or config.get("_sliding_window_pattern") or 6
    if types is None:
        return every
    if not isinstance(types, list) or len(types) != layers:
        raise UserInputError(f"Expected {layers} layer_types. Received: {types!r:.200}")
    global_layers = [i for i, kind in enumerate(types) if kind == "full_attention"]
    for n in range(1, layers + 1):
        if global_layers == [i for i in range(layers) if (i + 1) % n == 0]:
            return n
    raise UserInputError(
        f"Expected Gemma 3's layer pattern (every n-th layer global). Received: layer_types={types}"
    )


def _rope(config):
    """`(global base, local base, global linear factor)` from `rope_parameters`
    (transformers 5: per layer kind) or `rope_theta`, `rope_local_base_freq` and
    `rope_scaling` (4.x)."""
    parameters = config.get("rope_parameters") or {}
    full = dict(config.get("rope_scaling") or {})
    full.setdefault("rope_theta", config.get("rope_theta", 1_000_000.0))
    full.update(parameters.get("full_attention") or {})
    local = {"rope_theta": config.get("rope_local_base_freq", 10_000.0)}
    local.update(parameters.get("sliding_attention") or {})
    for kind, values in (("full_attention", full), ("sliding_attention", local)):
        rope_type = values.get("rope_type", values.get("type", "default"))
        if rope_type not in ("default", "linear") or (
            kind == "sliding_attention" and rope_type != "default"
        ):
            raise UserInputError(
                f"Expected RoPE without scaling (or linear on global layers). Received: "
                f"{kind} rope_type={rope_type!r}"
            )
    factor = full.get("factor", 1.0) if full.get("rope_type", full.get("type")) == "linear" else 1
    return positive_floats(
        {
            "rope_theta": full["rope_theta"],
            "local rope_theta": local["rope_theta"],
            "factor": factor,
        }
    )


def model_kwargs(config):
    """A Gemma 3 text `config.json` -> `GemmaLanguageModel` arguments."""
    if config.get("model_type") not in MODEL_TYPES:
        raise UserInputError(
            f"Expected model_type in {MODEL_TYPES} (Gemma 3's text decoder). "
            f"Received: model_type={config.get('model_type')!r}"
        )
    vocabulary, layers, heads, hidden, inner, head_dim = positive_ints(
        config,
        (
            "vocab_size",
            "num_hidden_layers",
            "num_attention_heads",
            "hidden_size",
            "intermediate_size",
            "head_dim",
        ),
    )
    bad = {
        key: config.get(key)
        for key, wanted in (
            ("attention_bias", False),
            ("hidden_activation", "gelu_pytorch_tanh"),
            ("final_logit_softcapping", None),
            ("attn_logit_softcapping", None),
            ("query_pre_attn_scalar", head_dim),
            ("use_bidirectional_attention", False),
            ("tie_word_embeddings", True),
        )
        if config.get(key, wanted) != wanted
    }
    if bad:
        raise UserInputError(
            "Expected Gemma 3's text decoder: no biases, the tanh GELU, no soft-capping, "
            f"queries scaled by head_dim, tied embeddings. Received: {bad}"
        )
    base, local_base, factor = _rope(config)
    window = config.get("sliding_window", 512)
    if not isinstance(window, int) or window < 1:
        raise UserInputError(f"Expected a positive sliding_window. Received: {window!r}")
    kv_heads = config.get("num_key_value_heads") or heads
    pad = config.get("pad_token_id")
    return dict(
        vocabulary_size=vocabulary,
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=inner,
        head_dim=head_dim,
        num_key_value_heads=None if kv_heads == heads else kv_heads,
        max_sequence_length=config.get("max_position_embeddings", 32768),
        window=window - 1 if window > 1 else None,
        global_every=_global_every(config),
        rope_max_wavelength=base,
        local_rope_max_wavelength=local_base,
        rope_scaling_factor=factor,
        layer_norm_epsilon=positive_floats({"rms_norm_eps": config.get("rms_norm_eps", 1e-6)})[0],
        dropout=config.get("attention_dropout", 0.0),
        pad_token_id=pad if isinstance(pad, int) and 0 <= pad < vocabulary else 0,
    )


def hf_weights(model):
    """`{Hugging Face name: float32 array}` of `model`'s weights (LoRA merged)."""
    return exported_tensors(table(model))


def load_from(cls, config, tensors, source, **overrides):
    """A `cls` from a Gemma 3 configuration and Hugging Face-named tensors; all or
    nothing (`source`: the file the errors name)."""
    tensors = {name.removeprefix("language_model."): v for name, v in tensors.items()}
    tensors.pop("lm_head.weight", None)  # tied: a copy of the embedding
    try:
        kwargs = model_kwargs(config)
        kwargs.update(overrides)
        model = cls(**kwargs)
        rows = table(model)
        assign(rows, tensors, "Gemma weight(s)", cls.__name__)
    except ValueError as error:
        raise CheckpointError(f"{source}: {error}") from None
    used = {name for _, name, _ in rows}
    warn_unused(cls, sorted(n for n in tensors if n not in used))
    return model


def load_model(cls, path, **overrides):
    """`GemmaLanguageModel.from_pretrained` of a folder."""
    config, tensors = read_hf_folder(path)
    return load_from(cls, config, tensors, config_file(path), **overrides)


def model_config(model):
    """`GemmaLanguageModel` -> a Gemma 3 text `config.json`."""
    import keras

    from keras_attn.layers.activations import gelu_approximate

    if keras.activations.get(model.activation) is not gelu_approximate:
        raise ValueError(
            f"Gemma 3 gates with the tanh GELU. Received: activation={model.activation!r}"
        )
    layers = model.num_layers
    types = [
        "full_attention" if (i + 1) % model.global_every == 0 else "sliding_attention"
        for i in range(layers)
    ]
    full = {"rope_type": "default", "rope_theta": model.rope_max_wavelength}
    if model.rope_scaling_factor != 1.0:
        full.update(rope_type="linear", factor=model.rope_scaling_factor)
    return {
        "model_type": "gemma3_text",
        "architectures": ["Gemma3ForCausalLM"],
        "vocab_size": model.vocabulary_size,
        "hidden_size": model.hidden_dim,
        "intermediate_size": model.intermediate_dim,
        "num_hidden_layers": layers,
        "num_attention_heads": model.num_heads,
        "num_key_value_heads": model.num_key_value_heads or model.num_heads,
        "head_dim": model.head_dim,
        "query_pre_attn_scalar": model.head_dim,
        "hidden_activation": "gelu_pytorch_tanh",
        "max_position_embeddings": model.max_sequence_length,
        "rms_norm_eps": model.layer_norm_epsilon,
        "sliding_window": (model.window or 0) + 1,
        "layer_types": types,
        "rope_parameters": {
            "full_attention": full,
            "sliding_attention": {
                "rope_type": "default",
                "rope_theta": model.local_rope_max_wavelength,
            },
        },
        "rope_theta": model.rope_max_wavelength,
        "rope_local_base_freq": model.local_rope_max_wavelength,
        "tie_word_embeddings": True,
        "attention_bias": False,
        "attention_dropout": model.dropout,
        "final_logit_softcapping": None,
        "attn_logit_softcapping": None,
        "pad_token_id": model.pad_token_id,
    }


def save_model(model, folder):
    """`GemmaLanguageModel.save_pretrained`: Gemma3ForCausalLM's names."""
    return write_hf_folder(folder, model_config(model), exported_tensors(table(model)))


# --- GGUF (architecture gemma3) ---

GGUF_NAMES = {
    "token_embd.weight": "model.embed_tokens.weight",
    "output_norm.weight": "model.norm.weight",
    "blk.{}.attn_norm.weight": "model.layers.{}.input_layernorm.weight",
    "blk.{}.attn_q.weight": "model.layers.{}.self_attn.q_proj.weight",
    "blk.{}.attn_k.weight": "model.layers.{}.self_attn.k_proj.weight",
    "blk.{}.attn_v.weight": "model.layers.{}.self_attn.v_proj.weight",
    "blk.{}.attn_output.weight": "model.layers.{}.self_attn.o_proj.weight",
    "blk.{}.attn_q_norm.weight": "model.layers.{}.self_attn.q_norm.weight",
    "blk.{}.attn_k_norm.weight": "model.layers.{}.self_attn.k_norm.weight",
    "blk.{}.post_attention_norm.weight": "model.layers.{}.post_attention_layernorm.weight",
    "blk.{}.ffn_norm.weight": "model.layers.{}.pre_feedforward_layernorm.weight",
    "blk.{}.post_ffw_norm.weight": "model.layers.{}.post_feedforward_layernorm.weight",
    "blk.{}.ffn_gate.weight": "model.layers.{}.mlp.gate_proj.weight",
    "blk.{}.ffn_up.weight": "model.layers.{}.mlp.up_proj.weight",
    "blk.{}.ffn_down.weight": "model.layers.{}.mlp.down_proj.weight",
}


def gguf_config(file):
    """The Hugging Face configuration a `gemma3` GGUF file's metadata describes (the
    local RoPE base and the 5:1 pattern are Gemma 3's own: the file does not say them)."""

    def key(name, default=None):
        return file.get(f"gemma3.{name}", default)

    heads = key("attention.head_count")
    layers = key("block_count")
    # The queries' scale is not in the file: llama.cpp takes 1/sqrt(head_dim), but for
    # the 27B model (62 layers) 1/sqrt(hidden / heads), as Gemma 3's release says.
    scalar = key("attention.key_length")
    if layers == 62 and isinstance(heads, int) and heads and key("embedding_length"):
        scalar = key("embedding_length") // heads
    return {
        "model_type": "gemma3_text",
        "vocab_size": len(file.get("tokenizer.ggml.tokens", []))
        or file.shapes.get("token_embd.weight", (0,))[0],
        "hidden_size": key("embedding_length"),
        "intermediate_size": key("feed_forward_length"),
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": key("attention.head_count_kv", heads),
        "head_dim": key("attention.key_length"),
        "query_pre_attn_scalar": scalar,
        "max_position_embeddings": key("context_length", 32768),
        "rms_norm_eps": key("attention.layer_norm_rms_epsilon", 1e-6),
        "rope_theta": key("rope.freq_base", 1_000_000.0),
        "rope_local_base_freq": 10_000.0,
        "sliding_window": key("attention.sliding_window", 512),
        "sliding_window_pattern": 6,
        "pad_token_id": file.get("tokenizer.ggml.padding_token_id"),
    }
