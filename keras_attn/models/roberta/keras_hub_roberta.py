"""RoBERTa between keras-hub and us: `RobertaBackbone` / `RobertaTextClassifier` and their
byte-level BPE `RobertaTokenizer`, as the family's `registry.KerasHubTwin`.

keras-hub's RoBERTa is ours with its settings fixed (post-LN, scaled-dot attention, exact
GELU, LayerNorm epsilon 1e-5) and two parts placed elsewhere. It has no segment
embedding: our one segment's row (every token's, `num_segments=1`) is added to every
position row on the way out and is zero on the way in, the same sums either way. Its
classifier's `pooled_dense` (tanh, on `<s>`) is our backbone's pooler, which
`BertClassifier(pooling="cls")` reads: the head moves between the two. Positions: ours
count the real tokens (Hugging Face's, `padding_token_id` skipped), keras-hub's count
from the row's start; for right-padded rows, which keras-hub's preprocessors make, every
real token gets the same position.
"""

from keras_attn.checkpoints.keras_hub_weights import (
    block_parameters,
    check_settings,
    copy_weights,
    hub_sizes,
    hub_truncate,
)
from keras_attn.models.bert import BertClassifier
from keras_attn.models.roberta.roberta_backbone import RobertaBackbone

RENAMES = {
    "embeddings/token_embedding/": "token_embedding/",
    "embeddings/position_embedding/": "position_embedding/",
    "/self_attention_layer/": "/self_attention/",
}
# Ours, with no twin in keras-hub's backbone (see above).
SEGMENT = "segment_embedding/embeddings"
UNMATCHED = (SEGMENT, "pooled_dense/kernel", "pooled_dense/bias")
SETTINGS = {
    "norm_first": False,
    "score": "scaled_dot",
    "embedding_dim": None,
    "share_layers": "none",
    "layer_norm_epsilon": 1e-5,
    "activation": "gelu",
    "num_segments": 1,
}


def _weight(model, path):
    return next(w for w in model.weights if w.path == path)


def to_ours(hub):
    """keras-hub's `RobertaBackbone` -> ours, weights copied (the segment row zero)."""
    config = hub.get_config()
    ours = RobertaBackbone(
        **hub_sizes(config),
    )
    copy_weights(hub, ours, RENAMES, UNMATCHED)
    segment = _weight(ours, SEGMENT)
    segment.assign(segment * 0)
    return ours


def to_hub(backbone):
    """Our `RobertaBackbone` -> keras-hub's, weights copied, the segment row folded into
    the positions."""
    import keras_hub

    if not isinstance(backbone, RobertaBackbone):
        raise ValueError(f"Expected a RobertaBackbone. Received: {type(backbone).__name__}")
    check_settings(backbone, SETTINGS, "RobertaBackbone")
    hub = keras_hub.models.RobertaBackbone(
        vocabulary_size=backbone.vocabulary_size,
        num_layers=backbone.num_layers,
        num_heads=backbone.num_heads,
        hidden_dim=backbone.hidden_dim,
        intermediate_dim=backbone.intermediate_dim,
        max_sequence_length=backbone.max_sequence_length,
        dropout=backbone.dropout,
    )
    copy_weights(backbone, hub, RENAMES, UNMATCHED)
    positions = _weight(hub, "embeddings/position_embedding/embeddings")
    positions.assign(positions + _weight(backbone, SEGMENT)[0][None])
    return hub


def tokenizer_to_ours(hub_tokenizer, sequence_length, lowercase=None, truncate="round_robin"):
    """keras-hub's `RobertaTokenizer` -> ours (byte-level BPE: `lowercase` does not
    apply), cutting a pair as the preset's preprocessor does (`truncate`)."""
    from keras_attn.models.roberta.roberta_tokenizer import RobertaTokenizer

    return RobertaTokenizer(
        dict(hub_tokenizer.vocabulary),
        list(hub_tokenizer.merges),
        sequence_length,
        truncate=truncate,
    )


def tokenizer_to_hub(tokenizer):
    """Our `RobertaTokenizer` -> keras-hub's."""
    import keras_hub

    return keras_hub.models.RobertaTokenizer(
        vocabulary=dict(tokenizer.piece_ids), merges=list(tokenizer.merges)
    )


def _check_classifier(model):
    if not isinstance(model, BertClassifier) or model.pooling != "cls":
        raise ValueError(
            "keras-hub's RobertaTextClassifier reads <s> through a tanh dense layer, our "
            "pooler: expected a BertClassifier with pooling='cls'. Received: "
            f"{type(model).__name__}"
            + (f" with pooling={model.pooling!r}" if isinstance(model, BertClassifier) else "")
        )


def classifier_to_hub(model, hub_backbone, hub_tokenizer, sequence_length, tokenizer):
    """Our `BertClassifier` on a `RobertaBackbone` -> keras-hub's `RobertaTextClassifier`
    with its preprocessor: our pooler as its `pooled_dense`, our output layer as its."""
    import keras_hub

    _check_classifier(model)
    preprocessor = keras_hub.models.RobertaTextClassifierPreprocessor(
        hub_tokenizer, sequence_length=sequence_length, truncate=hub_truncate(tokenizer)
    )
    hub = keras_hub.models.RobertaTextClassifier(
        hub_backbone, model.num_classes, preprocessor=preprocessor, dropout=model.dropout
    )
    hub.pooled_dense.set_weights(model.backbone.pooled_dense.get_weights())
    hub.output_dense.set_weights(model.output_dense.get_weights())
    return hub


def classifier_head(hub, model):
    """keras-hub's `RobertaTextClassifier` head into ours: its `pooled_dense` as our
    backbone's pooler, its `output_dense` as ours."""
    if hub.get_config().get("activation") not in (None, "linear"):
        raise ValueError(
            f"keras-hub's classifier applies activation={hub.get_config()['activation']!r} "
            "to its logits; ours returns logits"
        )
    _check_classifier(model)
    if hub.hidden_dim != model.backbone.hidden_dim:
        raise ValueError(
            f"keras-hub's classifier has a {hub.hidden_dim}-wide pooled_dense; our pooler is "
            f"{model.backbone.hidden_dim} wide (the backbone's hidden_dim)"
        )
    model.backbone.pooled_dense.set_weights(hub.pooled_dense.get_weights())
    model.output_dense.set_weights(hub.output_dense.get_weights())


def parameters(config):
    """The weights a keras-hub `RobertaBackbone` config claims (embeddings and blocks)."""
    size = {k: int(config[k]) for k in ("vocabulary_size", "num_layers", "hidden_dim",
                                        "intermediate_dim", "max_sequence_length")}  # fmt: skip
    h, i = size["hidden_dim"], size["intermediate_dim"]
    embeddings = (size["vocabulary_size"] + size["max_sequence_length"]) * h + 2 * h
    return embeddings + size["num_layers"] * block_parameters(h, i)
