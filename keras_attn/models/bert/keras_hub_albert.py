"""ALBERT between keras-hub and us: keras-hub's `AlbertBackbone` / `AlbertTextClassifier`
and its SentencePiece `AlbertTokenizer` are our `BertBackbone` with a factorised
embedding and one block shared by every layer (`embedding_dim`, `share_layers="all"`),
our classifier on it, and our `AlbertTokenizer`; the BERT family's twin
(`bert_family`) dispatches here by class.

keras-hub's ALBERT runs its layers in `num_groups` groups of `num_inner_repetitions`
distinct blocks; ours shares one block across all layers, which is one group of one
block (ALBERT's published models): any other grouping is refused, named. The block is
BERT's (post-LN, tanh GELU, LayerNorm epsilon 1e-12); the variables are the same
under keras-hub's group path.
"""

from keras_attn.checkpoints.keras_hub_weights import (
    block_parameters,
    check_settings,
    copy_weights,
    hub_sizes,
)
from keras_attn.models.bert.bert_backbone import BertBackbone

NAMES = {
    "/self_attention_layer/": "/self_attention/",
    "group_0_inner_layer_0/": "transformer_layer_shared/",
}
SETTINGS = {
    "norm_first": False,
    "score": "scaled_dot",
    "share_layers": "all",
    "layer_norm_epsilon": 1e-12,
    "activation": "gelu_approximate",
}


def to_ours(hub):
    """keras-hub's `AlbertBackbone` (one group of one block) -> our `BertBackbone`."""
    from keras_attn.layers import gelu_approximate

    config = hub.get_config()
    groups, inner = config["num_groups"], config["num_inner_repetitions"]
    if (groups, inner) != (1, 1):
        raise ValueError(
            "Our BertBackbone shares one block across all layers (ALBERT's published "
            "models); this keras-hub AlbertBackbone runs num_groups="
            f"{groups} of num_inner_repetitions={inner} blocks"
        )
    ours = BertBackbone(
        **hub_sizes(config),
        num_segments=config["num_segments"],
        embedding_dim=config["embedding_dim"],
        share_layers="all",
        activation=gelu_approximate,
    )
    copy_weights(hub, ours, NAMES)
    return ours


def to_hub(backbone):
    """Our `BertBackbone` with a factorised embedding and one shared block -> keras-hub's
    `AlbertBackbone`, weights copied."""
    import keras_hub

    check_settings(backbone, SETTINGS, "AlbertBackbone")
    if backbone.embedding_dim is None:
        raise ValueError(
            "keras-hub's AlbertBackbone projects a factorised embedding; this backbone shares "
            "its layers without one (embedding_dim=None): build it with embedding_dim"
        )
    hub = keras_hub.models.AlbertBackbone(
        vocabulary_size=backbone.vocabulary_size,
        embedding_dim=backbone.embedding_dim,
        num_segments=backbone.num_segments,
        num_groups=1,
        num_inner_repetitions=1,
        num_layers=backbone.num_layers,
        num_heads=backbone.num_heads,
        hidden_dim=backbone.hidden_dim,
        intermediate_dim=backbone.intermediate_dim,
        max_sequence_length=backbone.max_sequence_length,
        dropout=backbone.dropout,
    )
    copy_weights(backbone, hub, NAMES)
    return hub


def tokenizer_to_ours(hub_tokenizer, sequence_length, truncate):
    """keras-hub's `AlbertTokenizer` -> ours, of its SentencePiece model."""
    from keras_attn.models.bert.albert_tokenizer import AlbertTokenizer

    return AlbertTokenizer(
        bytes(hub_tokenizer.proto), sequence_length=sequence_length, truncate=truncate
    )


def tokenizer_to_hub(tokenizer):
    """Our `AlbertTokenizer` -> keras-hub's, of the same SentencePiece model."""
    import keras_hub

    return keras_hub.models.AlbertTokenizer(proto=tokenizer.model)


def parameters(config):
    """The weights a keras-hub `AlbertBackbone` config claims."""
    size = {k: int(config[k]) for k in ("vocabulary_size", "num_layers", "hidden_dim",
                                        "intermediate_dim", "max_sequence_length",
                                        "embedding_dim", "num_segments", "num_groups",
                                        "num_inner_repetitions")}  # fmt: skip
    h, i, e = size["hidden_dim"], size["intermediate_dim"], size["embedding_dim"]
    rows = size["vocabulary_size"] + size["max_sequence_length"] + size["num_segments"]
    embeddings = rows * e + 2 * e + e * h + h
    blocks = size["num_groups"] * size["num_inner_repetitions"]
    return embeddings + blocks * block_parameters(h, i) + h * h + h
