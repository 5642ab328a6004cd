"""Hugging Face `deberta-v2` folders (DeBERTa-v2 and -v3) <-> `DebertaV3Backbone`."""

from keras_attn.checkpoints import (
    BIAS,
    IDENTITY,
    LINEAR,
    CheckpointError,
    Linear,
    activation,
    assign,
    config_file,
    dense,
    exported_tensors,
    hf_activation,
    norm,
    positive_ints,
    read_hf_folder,
    warn_unused,
    write_hf_folder,
)
from keras_attn.errors import UserInputError

MODEL_TYPE, PREFIX = "deberta-v2", "deberta."
_BUFFERS = ("embeddings.position_ids",)


def _attention_types(config):
    types = config.get("pos_att_type") or []
    if isinstance(types, str):
        types = [t.strip() for t in types.lower().split("|")]
    unknown = [t for t in types if t not in ("c2p", "p2c")]
    if unknown:
        raise UserInputError(f"Expected pos_att_type of c2p and p2c. Received: {unknown}")
    return tuple(t for t in ("c2p", "p2c") if t in types)


def backbone_kwargs(config):
    """A `deberta-v2` configuration -> `DebertaV3Backbone` arguments (what the
    backbone does not do is a `UserInputError` naming the key)."""
    vocabulary, layers, heads, hidden, intermediate = positive_ints(
        config,
        (
            "vocab_size",
            "num_hidden_layers",
            "num_attention_heads",
            "hidden_size",
            "intermediate_size",
        ),
    )
    if not config.get("relative_attention", False):
        raise UserInputError(
            "Expected relative_attention: true (DeBERTa's disentangled attention). Received: "
            f"relative_attention={config.get('relative_attention')!r}"
        )
    if config.get("conv_kernel_size", 0):
        raise UserInputError(
            "DeBERTa-v2's convolution layer (conv_kernel_size) is not supported (v3 has "
            f"none). Received: conv_kernel_size={config['conv_kernel_size']}"
        )
    norm_rel_ebd = [x.strip() for x in str(config.get("norm_rel_ebd", "none")).lower().split("|")]
    if "layer_norm" not in norm_rel_ebd:
        raise UserInputError(
            "Expected norm_rel_ebd 'layer_norm' (v2 and v3 normalise the relative "
            f"embeddings). Received: norm_rel_ebd={config.get('norm_rel_ebd')!r}"
        )
    positions = config.get("max_position_embeddings", 512)
    relative = config.get("max_relative_positions", -1)
    relative = positions if relative < 1 else relative
    biased = config.get("position_biased_input", True)
    if biased and relative != positions:
        raise UserInputError(
            "Expected max_relative_positions equal to max_position_embeddings with "
            f"position_biased_input. Received: {relative} and {positions}"
        )
    embedding = config.get("embedding_size", hidden)
    buckets = config.get("position_buckets", -1)
    return dict(
        vocabulary_size=vocabulary,
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=intermediate,
        max_sequence_length=relative,
        position_buckets=buckets if buckets > 0 else 0,
        attention_types=_attention_types(config),
        share_position_projections=bool(config.get("share_att_key", False)),
        num_segments=config.get("type_vocab_size", 0),
        position_biased_input=bool(biased),
        embedding_dim=None if embedding == hidden else embedding,
        dropout=config.get("hidden_dropout_prob", 0.1),
        activation=activation(config, "hidden_act"),
        layer_norm_epsilon=config.get("layer_norm_eps", 1e-7),
        initializer_range=config.get("initializer_range", 0.02),
    )


def _projection(layer, name):
    return [(layer.kernel, f"{name}.weight", LINEAR), (layer.bias, f"{name}.bias", BIAS)]


def table(backbone):
    """Our variables and their checkpoint names, with the transforms between them."""
    rows = [(backbone.token_embedding.embeddings, "embeddings.word_embeddings.weight", IDENTITY)]
    if backbone.position_embedding is not None:
        rows.append(
            (
                backbone.position_embedding.embeddings,
                "embeddings.position_embeddings.weight",
                IDENTITY,
            )
        )
    if backbone.segment_embedding is not None:
        rows.append(
            (
                backbone.segment_embedding.embeddings,
                "embeddings.token_type_embeddings.weight",
                IDENTITY,
            )
        )
    if backbone.embedding_projection is not None:
        rows.append((backbone.embedding_projection.kernel, "embeddings.embed_proj.weight", LINEAR))
    rows += norm(backbone.embeddings_layer_norm, "embeddings.LayerNorm")
    relative = backbone.relative_positions
    rows.append((relative.embeddings, "encoder.rel_embeddings.weight", IDENTITY))
    rows += norm(relative.layer_norm, "encoder.LayerNorm")
    for i, block in enumerate(backbone.transformer_layers):
        prefix, attention = f"encoder.layer.{i}", block.attention
        rows += _projection(attention.query_dense, f"{prefix}.attention.self.query_proj")
        rows += _projection(attention.key_dense, f"{prefix}.attention.self.key_proj")
        rows += _projection(attention.value_dense, f"{prefix}.attention.self.value_proj")
        if attention.position_key_dense is not None:
            rows += _projection(
                attention.position_key_dense, f"{prefix}.attention.self.pos_key_proj"
            )
        if attention.position_query_dense is not None:
            rows += _projection(
                attention.position_query_dense, f"{prefix}.attention.self.pos_query_proj"
            )
        rows += [
            (attention.output_dense.kernel, f"{prefix}.attention.output.dense.weight", Linear(2)),
            (attention.output_dense.bias, f"{prefix}.attention.output.dense.bias", IDENTITY),
        ]
        rows += norm(block.attention_layer_norm, f"{prefix}.attention.output.LayerNorm")
        rows += dense(block.intermediate_dense, f"{prefix}.intermediate.dense")
        rows += dense(block.output_dense, f"{prefix}.output.dense")
        rows += norm(block.output_layer_norm, f"{prefix}.output.LayerNorm")
    return rows


def load_backbone(cls, path, **overrides):
    """`DebertaV3Backbone.from_pretrained`: configuration and weights of a folder."""
    backbone, _, unused = backbone_and_tensors(cls, path, **overrides)
    warn_unused(cls, unused)
    return backbone


def backbone_and_tensors(cls, path, **overrides):
    """`(backbone, tensors, unused names)` of a folder: the heads' tensors stay for the
    task models that read them."""
    config, tensors = read_hf_folder(path)
    if config.get("model_type") != MODEL_TYPE:
        raise CheckpointError(
            f"{config_file(path)}: expected model_type {MODEL_TYPE!r}. Received: "
            f"{config.get('model_type')!r}"
        )
    tensors = {
        name[len(PREFIX) :] if name.startswith(PREFIX) else name: value
        for name, value in tensors.items()
    }
    try:
        backbone = cls(**{**backbone_kwargs(config), **overrides})
        rows = table(backbone)
        assign(rows, tensors)
    except ValueError as error:
        raise CheckpointError(f"{config_file(path)}: {error}") from None
    unused = sorted(set(tensors) - {name for _, name, _ in rows} - set(_BUFFERS))
    backbone.unused_checkpoint_variables = unused
    return backbone, tensors, unused


def config(backbone):
    """The `deberta-v2` configuration of a backbone."""
    return {
        "model_type": MODEL_TYPE,
        "architectures": ["DebertaV2Model"],
        "vocab_size": backbone.vocabulary_size,
        "hidden_size": backbone.hidden_dim,
        "num_hidden_layers": backbone.num_layers,
        "num_attention_heads": backbone.num_heads,
        "intermediate_size": backbone.intermediate_dim,
        "hidden_act": hf_activation(backbone),
        "hidden_dropout_prob": backbone.dropout,
        "attention_probs_dropout_prob": backbone.dropout,
        "max_position_embeddings": backbone.max_sequence_length,
        "max_relative_positions": backbone.max_sequence_length,
        "type_vocab_size": backbone.num_segments,
        "initializer_range": backbone.initializer_range,
        "layer_norm_eps": backbone.layer_norm_epsilon,
        "relative_attention": True,
        "position_buckets": backbone.position_buckets or -1,
        "pos_att_type": list(backbone.attention_types),
        "share_att_key": backbone.share_position_projections,
        "norm_rel_ebd": "layer_norm",
        "position_biased_input": backbone.position_biased_input,
        "pad_token_id": 0,
        "pooler_hidden_act": "gelu",
        "pooler_dropout": 0,
        **({"embedding_size": backbone.embedding_dim} if backbone.embedding_dim else {}),
    }


def save_backbone(backbone, folder, model_type=None, tokenizer=None):
    """`DebertaV3Backbone.save_pretrained`."""
    if model_type not in (None, MODEL_TYPE):
        raise ValueError(
            f"A DebertaV3Backbone is written as model_type {MODEL_TYPE!r}. Received: {model_type!r}"
        )
    settings = config(backbone)
    if tokenizer is not None:
        settings["pad_token_id"] = tokenizer.pad_id
    folder = write_hf_folder(folder, settings, exported_tensors(table(backbone)))
    if tokenizer is not None:
        tokenizer.save_pretrained(folder, model_max_length=backbone.max_sequence_length)
    return folder
