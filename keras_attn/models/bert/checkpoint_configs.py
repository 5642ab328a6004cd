"""Hugging Face configuration keys <-> `BertBackbone` arguments, per encoder family.

`*_kwargs(config)` read a `config.json` (a ValueError names a key that cannot be used);
`*_config(backbone)` write one, and `CONFIG_WRITERS` pairs them with the model and
tokenizer class names `transformers` records.
"""

from keras_attn.checkpoints import activation, hf_activation, positive_ints
from keras_attn.errors import UserInputError


def _divisible(hidden, heads, names):
    if hidden % heads:
        raise UserInputError(
            f"Expected {names[0]} divisible by {names[1]}. "
            f"Received: {names[0]}={hidden}, {names[1]}={heads}"
        )


def bert_kwargs(config):
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise UserInputError(
            "Only absolute position embeddings are supported. Received: "
            f"position_embedding_type={config['position_embedding_type']!r}"
        )
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
    _divisible(hidden, heads, ("hidden_size", "num_attention_heads"))
    return dict(
        vocabulary_size=vocabulary,
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=intermediate,
        max_sequence_length=config.get("max_position_embeddings", 512),
        num_segments=config.get("type_vocab_size", 2),
        dropout=config.get("hidden_dropout_prob", 0.1),
        activation=activation(config, "hidden_act"),
        layer_norm_epsilon=config.get("layer_norm_eps", 1e-12),
        initializer_range=config.get("initializer_range", 0.02),
    )


def electra_kwargs(config):
    kwargs = bert_kwargs(config)
    (embedding,) = positive_ints(config, ("embedding_size",))
    if embedding != kwargs["hidden_dim"]:
        kwargs["embedding_dim"] = embedding
    return kwargs


def albert_kwargs(config):
    kwargs = bert_kwargs(config)
    (embedding,) = positive_ints(config, ("embedding_size",))
    groups, inner = config.get("num_hidden_groups", 1), config.get("inner_group_num", 1)
    if (groups, inner) != (1, 1):
        raise UserInputError(
            "Only ALBERT with one shared layer is supported (every released ALBERT). "
            f"Received: num_hidden_groups={groups}, inner_group_num={inner}"
        )
    if embedding == kwargs["hidden_dim"]:
        raise UserInputError(
            "Expected ALBERT's embedding_size to differ from hidden_size (its embedding is "
            f"factorised). Received: embedding_size={embedding}, hidden_size={kwargs['hidden_dim']}"
        )
    return {**kwargs, "embedding_dim": embedding, "share_layers": True}


def distilbert_kwargs(config):
    vocabulary, layers, heads, hidden, intermediate = positive_ints(
        config, ("vocab_size", "n_layers", "n_heads", "dim", "hidden_dim")
    )
    _divisible(hidden, heads, ("dim", "n_heads"))
    return dict(
        vocabulary_size=vocabulary,
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=intermediate,
        max_sequence_length=config.get("max_position_embeddings", 512),
        dropout=config.get("dropout", 0.1),
        activation=activation(config, "activation"),
        layer_norm_epsilon=1e-12,  # fixed in DistilBERT's code
        initializer_range=config.get("initializer_range", 0.02),
    )


def bert_config(backbone):
    return {
        "vocab_size": backbone.vocabulary_size,
        "hidden_size": backbone.hidden_dim,
        "num_hidden_layers": backbone.num_layers,
        "num_attention_heads": backbone.num_heads,
        "intermediate_size": backbone.intermediate_dim,
        "hidden_act": hf_activation(backbone),
        "hidden_dropout_prob": backbone.dropout,
        "attention_probs_dropout_prob": backbone.dropout,
        "max_position_embeddings": backbone.max_sequence_length,
        "type_vocab_size": backbone.num_segments,
        "initializer_range": backbone.initializer_range,
        "layer_norm_eps": backbone.layer_norm_epsilon,
        "position_embedding_type": "absolute",
    }


def factorised_config(backbone):
    return {
        **bert_config(backbone),
        "embedding_size": backbone.embedding_dim or backbone.hidden_dim,
    }


def albert_config(backbone):
    return {**factorised_config(backbone), "num_hidden_groups": 1, "inner_group_num": 1}


def distilbert_config(backbone):
    if backbone.layer_norm_epsilon != 1e-12:
        raise ValueError(
            "DistilBERT's LayerNorm epsilon is fixed at 1e-12. "
            f"Received: layer_norm_epsilon={backbone.layer_norm_epsilon}"
        )
    return {
        "vocab_size": backbone.vocabulary_size,
        "dim": backbone.hidden_dim,
        "n_layers": backbone.num_layers,
        "n_heads": backbone.num_heads,
        "hidden_dim": backbone.intermediate_dim,
        "activation": hf_activation(backbone),
        "dropout": backbone.dropout,
        "attention_dropout": backbone.dropout,
        "max_position_embeddings": backbone.max_sequence_length,
        "initializer_range": backbone.initializer_range,
        "sinusoidal_pos_embds": False,
    }


CONFIG_WRITERS = {
    "bert": (bert_config, "BertModel", "BertTokenizer"),
    "electra": (factorised_config, "ElectraModel", "ElectraTokenizer"),
    "albert": (albert_config, "AlbertModel", None),
    "distilbert": (distilbert_config, "DistilBertModel", "DistilBertTokenizer"),
}
