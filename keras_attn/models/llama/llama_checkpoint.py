"""Llama checkpoints (the Hugging Face layout) in and out of `LlamaLanguageModel`.

`LlamaForCausalLM`'s names (`model.layers.0.self_attn.q_proj.weight`); torch Linear
weights `(out, in)`, ours `(in, heads, head_dim)` for the attention's projections. The
RMSNorm weights are the scales as they are. Mistral's layout is the same with a sliding
window; its `sliding_window` `S` lets a position see itself and the `S - 1` before it,
our `window` counts only those before. Qwen 2's adds biases to the query, key and value
projections (our `qkv_bias`), Qwen 3's an RMSNorm of each query and key head
(`self_attn.q_norm`, `self_attn.k_norm`: our `qk_norm`).
"""

import pathlib

from keras_attn.checkpoints import (
    BIAS,
    IDENTITY,
    LINEAR,
    CheckpointError,
    Linear,
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

# model_type -> the class `transformers` builds for it.
_ARCHITECTURES = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
}
MODEL_TYPES = tuple(_ARCHITECTURES)
_OUTPUT = Linear(in_axes=2)  # the attention's output: its input split per head


def projection_rows(block, prefix):
    """The rows of a block's seven projections under Hugging Face's Llama names (Gemma's
    too): `self_attn.{q,k,v,o}_proj` and `mlp.{gate,up,down}_proj`."""
    attention = block.self_attention
    return [
        (attention.query_dense.kernel, f"{prefix}.self_attn.q_proj.weight", LINEAR),
        (attention.key_dense.kernel, f"{prefix}.self_attn.k_proj.weight", LINEAR),
        (attention.value_dense.kernel, f"{prefix}.self_attn.v_proj.weight", LINEAR),
        (attention.output_dense.kernel, f"{prefix}.self_attn.o_proj.weight", _OUTPUT),
        (block.feedforward_gate_dense.kernel, f"{prefix}.mlp.gate_proj.weight", LINEAR),
        (block.feedforward_intermediate_dense.kernel, f"{prefix}.mlp.up_proj.weight", LINEAR),
        (block.feedforward_output_dense.kernel, f"{prefix}.mlp.down_proj.weight", LINEAR),
    ]


def table(model):
    """`[(variable, checkpoint name, Transform)]` for every variable of `model`."""
    rows = [(model.token_embedding.embeddings, "model.embed_tokens.weight", IDENTITY)]
    for i, block in enumerate(model.transformer_layers):
        prefix = f"model.layers.{i}"
        rows += [
            (block.self_attention_layer_norm.scale, f"{prefix}.input_layernorm.weight", IDENTITY),
            (
                block.feedforward_layer_norm.scale,
                f"{prefix}.post_attention_layernorm.weight",
                IDENTITY,
            ),
            *projection_rows(block, prefix),
        ]
        attention = block.self_attention
        if model.qkv_bias:
            rows += [
                (dense.bias, f"{prefix}.self_attn.{name}_proj.bias", BIAS)
                for dense, name in (
                    (attention.query_dense, "q"),
                    (attention.key_dense, "k"),
                    (attention.value_dense, "v"),
                )
            ]
        if model.qk_norm:
            rows += [
                (attention.query_norm.scale, f"{prefix}.self_attn.q_norm.weight", IDENTITY),
                (attention.key_norm.scale, f"{prefix}.self_attn.k_norm.weight", IDENTITY),
            ]
    rows.append((model.final_layer_norm.scale, "model.norm.weight", IDENTITY))
    if not model.tie_word_embeddings:
        rows.append((model.token_embedding.reverse_embeddings, "lm_head.weight", LINEAR))
    return rows


def _rope(config):
    """`(base, linear scaling factor)` from `rope_parameters` (transformers 5) or
    `rope_theta` and `rope_scaling` (4.x); another kind of scaling is refused by name."""
    parameters = dict(config.get("rope_scaling") or {})
    parameters.update(config.get("rope_parameters") or {})
    base = parameters.get("rope_theta", config.get("rope_theta", 10000.0))
    kind = parameters.get("rope_type", parameters.get("type", "default"))
    if kind not in ("default", "linear"):
        raise UserInputError(
            "Expected RoPE without scaling or with linear scaling (rope_type 'default' or "
            f"'linear'). Received: rope_type={kind!r}"
        )
    factor = parameters.get("factor", 1.0) if kind == "linear" else 1.0
    return positive_floats({"rope_theta": base, "factor": factor})


def model_kwargs(config):
    """A Llama (Mistral, Qwen 2, Qwen 3) `config.json` -> `LlamaLanguageModel` arguments (a
    `UserInputError` names a key we cannot honour)."""
    if config.get("model_type") not in MODEL_TYPES:
        raise UserInputError(
            f"Expected model_type in {MODEL_TYPES} (the decoders LlamaLanguageModel reads). "
            f"Received: model_type={config.get('model_type')!r}"
        )
    vocabulary, layers, heads, hidden, inner = positive_ints(
        config,
        (
            "vocab_size",
            "num_hidden_layers",
            "num_attention_heads",
            "hidden_size",
            "intermediate_size",
        ),
    )
    kv_heads = config.get("num_key_value_heads") or heads
    head_dim = config.get("head_dim") or None
    bad = {
        key: config.get(key)
        for key, wanted in (
            ("attention_bias", False),
            ("mlp_bias", False),
            ("hidden_act", "silu"),
            ("pretraining_tp", 1),
            ("use_sliding_window", False),  # Qwen's windows on its upper layers
        )
        if config.get(key, wanted) != wanted
    }
    if bad:
        raise UserInputError(
            "Expected Llama's projections without biases and the SwiGLU feed-forward "
            f"net (hidden_act 'silu'). Received: {bad}"
        )
    base, factor = _rope(config)
    window = config.get("sliding_window") if config.get("model_type") == "mistral" else None
    if window is not None and (not isinstance(window, int) or window < 1):
        raise UserInputError(f"Expected a positive sliding_window. Received: {window!r}")
    pad = config.get("pad_token_id")
    if not isinstance(pad, int) or not 0 <= pad < vocabulary:
        pad = config.get("eos_token_id")
        if isinstance(pad, list):
            pad = pad[0] if pad else None
        if not isinstance(pad, int) or not 0 <= pad < vocabulary:
            pad = 0
    return dict(
        vocabulary_size=vocabulary,
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=inner,
        num_key_value_heads=None if kv_heads == heads else kv_heads,
        head_dim=None if head_dim in (None, hidden // heads) else head_dim,
        max_sequence_length=config.get("max_position_embeddings", 2048),
        rope_max_wavelength=base,
        rope_scaling_factor=factor,
        layer_norm_epsilon=positive_floats({"rms_norm_eps": config.get("rms_norm_eps", 1e-6)})[0],
        tie_word_embeddings=config.get("tie_word_embeddings", False),
        window=None if window is None else window - 1,
        qk_norm=config.get("model_type") == "qwen3",
        qkv_bias=config.get("model_type") == "qwen2",
        dropout=config.get("attention_dropout", 0.0),
        pad_token_id=pad,
    )


def hf_weights(model):
    """`{Hugging Face name: float32 array}` of `model`'s weights (LoRA merged)."""
    return exported_tensors(table(model))


def load_from(cls, config, tensors, source, **overrides):
    """A `cls` from a Llama configuration and checkpoint-named tensors (`source`: the
    file the errors name); all or nothing."""
    tensors = dict(tensors)
    try:
        kwargs = model_kwargs(config)
        if kwargs["tie_word_embeddings"] and "lm_head.weight" in tensors:
            tensors.pop("lm_head.weight")  # transformers may store the tied copy
        kwargs.update(overrides)
        model = cls(**kwargs)
        rows = table(model)
        assign(rows, tensors, "Llama weight(s)", cls.__name__)
    except ValueError as error:
        raise CheckpointError(f"{source}: {error}") from None
    used = {name for _, name, _ in rows}
    warn_unused(cls, sorted(n for n in tensors if n not in used and "rotary_emb" not in n))
    return model


def load_model(cls, path, **overrides):
    """`LlamaLanguageModel.from_pretrained` of a folder."""
    config, tensors = read_hf_folder(path)
    return load_from(cls, config, tensors, config_file(path), **overrides)


def model_config(model):
    """`LlamaLanguageModel` -> a Llama (with a window, Mistral; with `qkv_bias`, Qwen 2;
    with `qk_norm`, Qwen 3) `config.json`."""
    head_dim = model.head_dim or model.hidden_dim // model.num_heads
    qwen = model.qk_norm or model.qkv_bias
    if model.qk_norm and model.qkv_bias or qwen and model.window is not None:
        raise ValueError(
            "Hugging Face has no Llama-shaped decoder with both QK-norm and biases, or "
            "either with a window on every layer. Received: "
            f"qk_norm={model.qk_norm}, qkv_bias={model.qkv_bias}, window={model.window}"
        )
    kind = (
        "qwen3" if model.qk_norm else "qwen2" if model.qkv_bias
        else "mistral" if model.window is not None else "llama"
    )  # fmt: skip
    config = {
        "model_type": kind,
        "architectures": [_ARCHITECTURES[kind]],
        "vocab_size": model.vocabulary_size,
        "hidden_size": model.hidden_dim,
        "intermediate_size": model.intermediate_dim,
        "num_hidden_layers": model.num_layers,
        "num_attention_heads": model.num_heads,
        "num_key_value_heads": model.num_key_value_heads or model.num_heads,
        "head_dim": head_dim,
        "hidden_act": _hidden_act(model),
        "max_position_embeddings": model.max_sequence_length,
        "rms_norm_eps": model.layer_norm_epsilon,
        "rope_theta": model.rope_max_wavelength,
        "rope_parameters": {"rope_type": "default", "rope_theta": model.rope_max_wavelength},
        "tie_word_embeddings": model.tie_word_embeddings,
        "attention_bias": False,
        "mlp_bias": False,
        "attention_dropout": model.dropout,
        "pad_token_id": model.pad_token_id,
    }
    if model.rope_scaling_factor != 1.0:
        config["rope_parameters"].update(rope_type="linear", factor=model.rope_scaling_factor)
        config["rope_scaling"] = {"rope_type": "linear", "factor": model.rope_scaling_factor}
    if model.window is not None:
        config["sliding_window"] = model.window + 1
    return config


def _hidden_act(model):
    import keras

    if keras.activations.get(model.activation) is not keras.activations.silu:
        raise ValueError(
            "Hugging Face's Llama gates with silu (SwiGLU). Received: "
            f"activation={model.activation!r}"
        )
    return "silu"


def save_model(model, folder):
    """`LlamaLanguageModel.save_pretrained`: LlamaForCausalLM's names."""
    config = model_config(model)
    return write_hf_folder(pathlib.Path(folder), config, exported_tensors(table(model)))
