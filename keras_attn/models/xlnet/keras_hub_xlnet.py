"""XLNet between keras-hub and us: keras-hub's `XLNetBackbone` is our `XLNetBackbone`
(two-stream relative attention, Transformer-XL's position encoding, segment encodings;
exact GELU, LayerNorm epsilon 1e-12, no clamp on relative distances), as the family's
`registry.KerasHubTwin`.

keras-hub has no XLNet tokenizer, preprocessor or task: a backbone alone moves, and a
preset folder holds no tokenizer to compare. The variables are the same under other
names; two hold the same values in another layout: keras-hub's attention output kernel
is `transformers`' `(hidden, heads, head_dim)` where ours is `(heads, head_dim,
hidden)`, and its mask embedding is `(1, 1, hidden)` where ours is `(1, hidden)`.
"""

from keras_attn.checkpoints.keras_hub_weights import block_parameters, check_settings, copy_weights
from keras_attn.models.xlnet.xlnet_backbone import XLNetBackbone

RENAMES = {
    "content_query_embedding/word_embedding/": "token_embedding/",
    "encoder_block_attn_mask_layer/mask_emb": "mask_embedding/embeddings",
    "xlnet_encoder_": "transformer_layer_",
    "/rel_attn/encoding/": "/self_attention/position/",
    "/rel_attn/": "/self_attention/",
    "/content_attention_bias": "/self_attention/content_bias",
    "/positional_attention_bias": "/self_attention/position_bias",
    "/segment_attention_bias": "/self_attention/segment_bias",
    "/segment_encoding": "/self_attention/segment_embeddings",
    "/layer_norm_rel_attn/": "/self_attention_layer_norm/",
    "/layer_norm_ff/": "/feedforward_layer_norm/",
}
SETTINGS = {"activation": "gelu", "layer_norm_epsilon": 1e-12, "clamp_length": None}
# keras-hub's (hidden, heads, head_dim) output kernel -> ours (heads, head_dim, hidden).
TO_OURS, TO_HUB = (1, 2, 0), (2, 0, 1)


def _copy(source, target, ours_is_source):
    """Every weight by path: the mask embedding reshaped, the attention output kernels
    transposed into the target's layout."""
    ours = source if ours_is_source else target
    axes = TO_HUB if ours_is_source else TO_OURS
    outputs = [w.path for w in ours.weights if w.path.endswith("/attention_output/kernel")]
    copy_weights(
        source,
        target,
        RENAMES,
        reshaped=("mask_embedding/embeddings",),
        transposed=dict.fromkeys(outputs, axes),
    )


def to_ours(hub):
    """keras-hub's `XLNetBackbone` -> ours, weights copied."""
    config = hub.get_config()
    if config.get("activation", "gelu") != "gelu":
        raise ValueError(
            f"Our XLNetBackbone reads activation='gelu' from keras-hub; this one has "
            f"activation={config['activation']!r}"
        )
    ours = XLNetBackbone(
        config["vocabulary_size"],
        config["num_layers"],
        config["num_heads"],
        config["hidden_dim"],
        config["intermediate_dim"],
        dropout=config["dropout"],
    )
    _copy(hub, ours, ours_is_source=False)
    return ours


def to_hub(backbone):
    """Our `XLNetBackbone` (exact GELU, epsilon 1e-12, no clamp) -> keras-hub's."""
    import keras_hub

    check_settings(backbone, SETTINGS, "XLNetBackbone")
    hub = keras_hub.models.XLNetBackbone(
        vocabulary_size=backbone.vocabulary_size,
        num_layers=backbone.num_layers,
        num_heads=backbone.num_heads,
        hidden_dim=backbone.hidden_dim,
        intermediate_dim=backbone.intermediate_dim,
        dropout=backbone.dropout,
    )
    _copy(backbone, hub, ours_is_source=True)
    return hub


def parameters(config):
    """The weights a keras-hub `XLNetBackbone` config claims: the embedding, the mask
    embedding and, per block, projections without biases, three biases and the
    segment encodings where BERT's block has its four biases."""
    size = {k: int(config[k]) for k in ("vocabulary_size", "num_layers", "hidden_dim",
                                        "intermediate_dim")}  # fmt: skip
    h, i = size["hidden_dim"], size["intermediate_dim"]
    block = block_parameters(h, i) - 4 * h + h * h + 3 * h + 2 * h
    return (size["vocabulary_size"] + 1) * h + size["num_layers"] * block
