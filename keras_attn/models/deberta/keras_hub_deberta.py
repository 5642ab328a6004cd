"""DeBERTa-v3 between keras-hub and us: `DebertaV3Backbone` / `DebertaV3TextClassifier`
and their SentencePiece `DebertaV3Tokenizer`, as the family's `registry.KerasHubTwin`.

Both are Hugging Face's `deberta-v2` with DeBERTa-v3's settings: relative positions in
log buckets (keras-hub's `bucket_size` is our `position_buckets`, its
`max_sequence_length` our relative range), content-to-position and position-to-content
attention with the position projections shared, no segment or absolute position
embedding, exact GELU, LayerNorm epsilon 1e-7. The variables are the same under other
names; keras-hub's attention output is a Dense kernel where ours splits the heads. Its
classifier's `pooled_dense` (GELU, on `[CLS]`) is our classifier's `pooler_dense`.
"""

from keras_attn.checkpoints.keras_hub_weights import (
    block_parameters,
    check_settings,
    copy_weights,
    hub_sizes,
    hub_truncate,
)
from keras_attn.models.deberta.deberta_backbone import DebertaV3Backbone
from keras_attn.models.deberta.deberta_classifier import DebertaV3Classifier

RENAMES = {  # in this order: the layer norm's path starts as the embedding's does
    "rel_embedding/rel_embeddings_layer_norm/": "relative_position_embedding/layer_norm/",
    "rel_embedding/rel_embedding": "relative_position_embedding/embeddings",
    "disentangled_attention_encoder_layer_": "transformer_layer_",
    "/self_attention_layer_norm/": "/attention_layer_norm/",
    "/self_attention_layer/": "/attention/",
    "/feedforward_layer_norm/": "/output_layer_norm/",
    "/feedforward_intermediate_dense/": "/intermediate_dense/",
    "/feedforward_output_dense/": "/output_dense/",
}
SETTINGS = {
    "attention_types": ["c2p", "p2c"],
    "share_position_projections": True,
    "num_segments": 0,
    "position_biased_input": False,
    "embedding_dim": None,
    "activation": "gelu",
    "layer_norm_epsilon": 1e-7,
}


def _reshaped(model):
    return tuple(
        w.path for w in model.weights if w.path.endswith("/attention/attention_output/kernel")
    )


def to_ours(hub):
    """keras-hub's `DebertaV3Backbone` -> ours, weights copied."""
    config = hub.get_config()
    ours = DebertaV3Backbone(
        **hub_sizes(config),
        position_buckets=config["bucket_size"],
    )
    copy_weights(hub, ours, RENAMES, reshaped=_reshaped(ours))
    return ours


def to_hub(backbone):
    """Our `DebertaV3Backbone` (DeBERTa-v3's settings) -> keras-hub's, weights copied."""
    import keras_hub

    check_settings(backbone, SETTINGS, "DebertaV3Backbone")
    hub = keras_hub.models.DebertaV3Backbone(
        vocabulary_size=backbone.vocabulary_size,
        num_layers=backbone.num_layers,
        num_heads=backbone.num_heads,
        hidden_dim=backbone.hidden_dim,
        intermediate_dim=backbone.intermediate_dim,
        max_sequence_length=backbone.max_sequence_length,
        bucket_size=backbone.position_buckets,
        dropout=backbone.dropout,
    )
    copy_weights(backbone, hub, RENAMES, reshaped=_reshaped(backbone))
    return hub


def tokenizer_to_ours(hub_tokenizer, sequence_length, lowercase=None, truncate="round_robin"):
    """keras-hub's `DebertaV3Tokenizer` -> ours, of its SentencePiece model, cutting a
    pair as the preset's preprocessor does (`truncate`)."""
    from keras_attn.models.deberta.deberta_tokenizer import DebertaV3Tokenizer

    return DebertaV3Tokenizer(
        bytes(hub_tokenizer.proto), sequence_length=sequence_length, truncate=truncate
    )


def tokenizer_to_hub(tokenizer):
    """Our `DebertaV3Tokenizer` -> keras-hub's, of the same SentencePiece model."""
    import keras_hub

    return keras_hub.models.DebertaV3Tokenizer(proto=tokenizer.model)


def _check_classifier(model):
    if not isinstance(model, DebertaV3Classifier) or model.pooling != "cls":
        raise ValueError(
            "keras-hub's DebertaV3TextClassifier reads [CLS] through a GELU dense layer: "
            f"expected a DebertaV3Classifier with pooling='cls'. Received: {type(model).__name__}"
            + (f" with pooling={model.pooling!r}" if hasattr(model, "pooling") else "")
        )


def classifier_to_hub(model, hub_backbone, hub_tokenizer, sequence_length, tokenizer):
    """Our `DebertaV3Classifier` -> keras-hub's `DebertaV3TextClassifier` with its
    preprocessor, the head copied."""
    import keras_hub

    _check_classifier(model)
    preprocessor = keras_hub.models.DebertaV3TextClassifierPreprocessor(
        hub_tokenizer, sequence_length=sequence_length, truncate=hub_truncate(tokenizer)
    )
    hub = keras_hub.models.DebertaV3TextClassifier(
        hub_backbone, model.num_classes, preprocessor=preprocessor, dropout=model.dropout
    )
    hub.pooled_dense.set_weights(model.pooler_dense.get_weights())
    hub.output_dense.set_weights(model.output_dense.get_weights())
    return hub


def classifier_head(hub, model):
    """keras-hub's `DebertaV3TextClassifier` head into ours."""
    if hub.get_config().get("activation") not in (None, "linear"):
        raise ValueError(
            f"keras-hub's classifier applies activation={hub.get_config()['activation']!r} "
            "to its logits; ours returns logits"
        )
    _check_classifier(model)
    if hub.pooled_dense.units != model.pooler_dense.units:
        raise ValueError(
            f"keras-hub's classifier has a {hub.pooled_dense.units}-wide pooled_dense; ours "
            f"is {model.pooler_dense.units} wide"
        )
    model.pooler_dense.set_weights(hub.pooled_dense.get_weights())
    model.output_dense.set_weights(hub.output_dense.get_weights())


def parameters(config):
    """The weights a keras-hub `DebertaV3Backbone` config claims."""
    size = {k: int(config[k]) for k in ("vocabulary_size", "num_layers", "hidden_dim",
                                        "intermediate_dim", "bucket_size")}  # fmt: skip
    h, i = size["hidden_dim"], size["intermediate_dim"]
    embeddings = size["vocabulary_size"] * h + 2 * h + 2 * size["bucket_size"] * h + 2 * h
    return embeddings + size["num_layers"] * block_parameters(h, i)
