"""BERT between keras-hub and us: `BertBackbone` / `BertTextClassifier` and their
`BertTokenizer`, as the family's `registry.KerasHubTwin`.

keras-hub's BERT is ours with three settings fixed: post-LN blocks of scaled-dot
attention, tanh-approximated GELU, LayerNorm epsilon 1e-12, no factorised or shared
layers; its variables are ours under the same paths (its `self_attention_layer` is our
`self_attention`). Its classifier reads the tanh pooler on `[CLS]`, as our
`BertClassifier(pooling="cls")`. Its `BertTokenizer` lower-cases without stripping
accents unless told; ours reads its settings as they are.
"""

from keras_attn.checkpoints.keras_hub_weights import (
    HUB_NAMES,
    block_parameters,
    check_settings,
    copy_weights,
    hub_sizes,
    hub_truncate,
)
from keras_attn.models.bert.bert_backbone import BertBackbone
from keras_attn.models.bert.bert_classifier import BertClassifier

# What keras-hub's BertBackbone fixes (the tanh GELU, as Google's BERT).
BERT_SETTINGS = {
    "norm_first": False,
    "score": "scaled_dot",
    "embedding_dim": None,
    "share_layers": "none",
    "layer_norm_epsilon": 1e-12,
    "activation": "gelu_approximate",
}


# keras-hub's DistilBERT and ELECTRA backbones, in our names: their own embedding paths.
DISTILBERT_NAMES = {
    **HUB_NAMES,
    "token_and_position_embedding/token_embedding/": "token_embedding/",
    "token_and_position_embedding/position_embedding/": "position_embedding/",
}
ELECTRA_NAMES = {**HUB_NAMES, "embeddings_projection/": "embedding_projection/"}
# Ours, with no twin in keras-hub's DistilBERT (which reads no segments, has no pooler).
DISTILBERT_UNMATCHED = ("segment_embedding/embeddings", "pooled_dense/kernel", "pooled_dense/bias")
DISTILBERT_SETTINGS = {**BERT_SETTINGS, "activation": "gelu"}
ELECTRA_SETTINGS = {key: v for key, v in BERT_SETTINGS.items() if key != "embedding_dim"}


def _segment(backbone):
    return next(w for w in backbone.weights if w.path == "segment_embedding/embeddings")


def to_ours(hub):
    """keras-hub's `BertBackbone`, `DistilBertBackbone` or `ElectraBackbone` -> our
    `BertBackbone`, weights copied (DistilBERT: the segment rows zero, so segments are
    read as it reads them: not at all)."""
    from keras_attn.layers import gelu_approximate

    config = hub.get_config()
    kind = type(hub).__name__
    sizes = hub_sizes(config)
    if kind == "DistilBertBackbone":
        ours = BertBackbone(**sizes, activation="gelu")
        copy_weights(hub, ours, DISTILBERT_NAMES, DISTILBERT_UNMATCHED)
        _segment(ours).assign(_segment(ours) * 0)
        return ours
    extra = {"embedding_dim": config["embedding_dim"]} if kind == "ElectraBackbone" else {}
    ours = BertBackbone(
        **sizes, num_segments=config["num_segments"], activation=gelu_approximate, **extra
    )
    copy_weights(hub, ours, ELECTRA_NAMES if extra else HUB_NAMES)
    return ours


def _hub_kind(backbone):
    """The keras-hub class that computes what `backbone` computes: `ElectraBackbone`
    (a factorised embedding), `DistilBertBackbone` (exact GELU, every segment row zero:
    segments read as DistilBERT reads them, not at all), else `BertBackbone`."""
    import numpy as np

    if backbone.embedding_dim is not None and backbone.share_layers == "none":
        return "ElectraBackbone", ELECTRA_SETTINGS
    activation = str(getattr(backbone.activation, "__name__", backbone.activation))
    if activation == "gelu" and not np.any(np.asarray(_segment(backbone))):
        return "DistilBertBackbone", DISTILBERT_SETTINGS
    return "BertBackbone", BERT_SETTINGS


def to_hub(backbone):
    """Our `BertBackbone` -> keras-hub's class that computes the same (`_hub_kind`),
    weights copied; what none of them computes is a `ValueError`, named."""
    import keras_hub

    kind, settings = _hub_kind(backbone)
    check_settings(backbone, settings, kind)
    sizes = dict(
        num_layers=backbone.num_layers,
        num_heads=backbone.num_heads,
        hidden_dim=backbone.hidden_dim,
        intermediate_dim=backbone.intermediate_dim,
        max_sequence_length=backbone.max_sequence_length,
        dropout=backbone.dropout,
    )
    if kind == "DistilBertBackbone":
        hub = keras_hub.models.DistilBertBackbone(vocabulary_size=backbone.vocabulary_size, **sizes)
        copy_weights(backbone, hub, DISTILBERT_NAMES, DISTILBERT_UNMATCHED)
        return hub
    if kind == "ElectraBackbone":
        hub = keras_hub.models.ElectraBackbone(
            vocab_size=backbone.vocabulary_size,
            embedding_dim=backbone.embedding_dim,
            num_segments=backbone.num_segments,
            **sizes,
        )
        copy_weights(backbone, hub, ELECTRA_NAMES)
        return hub
    hub = keras_hub.models.BertBackbone(
        vocabulary_size=backbone.vocabulary_size, num_segments=backbone.num_segments, **sizes
    )
    copy_weights(backbone, hub)
    return hub


def tokenizer_to_ours(hub_tokenizer, sequence_length, lowercase=None, truncate="round_robin"):
    """keras-hub's `BertTokenizer` -> our `WordPieceTokenizer` tokenising as it does
    (which cuts a pair round robin, as keras-hub's preprocessor does by default)."""
    from keras_attn.data import WordPieceTokenizer

    if truncate != "round_robin":
        raise ValueError(
            "Our WordPieceTokenizer cuts a pair round robin (Google BERT's); this keras-hub "
            f"preset's preprocessor cuts it with truncate={truncate!r}"
        )
    config = hub_tokenizer.get_config()
    if config.get("suffix_indicator", "##") != "##" or not config.get("split", True):
        raise ValueError(
            "Expected a keras-hub BertTokenizer that splits words and marks pieces with '##'. "
            f"Received: split={config.get('split')}, suffix_indicator="
            f"{config.get('suffix_indicator')!r}"
        )
    lowercase = config.get("lowercase", False) if lowercase is None else lowercase
    return WordPieceTokenizer(
        list(hub_tokenizer.get_vocabulary()),
        lowercase=lowercase,
        sequence_length=sequence_length,
        strip_accents=config.get("strip_accents", False),
    )


def tokenizer_to_hub(tokenizer):
    """Our `WordPieceTokenizer` -> keras-hub's `BertTokenizer` tokenising as it does."""
    import keras_hub

    return keras_hub.models.BertTokenizer(
        vocabulary=list(tokenizer.vocabulary),
        lowercase=tokenizer.lowercase,
        strip_accents=tokenizer.strip_accents,
    )


# keras-hub's classifiers that read the pooled [CLS] output through one Dense layer, as
# ours does, by the backbone class under them: their class names' prefix.
HUB_CLASSIFIERS = {"BertBackbone": "Bert", "AlbertBackbone": "Albert"}


def classifier_to_hub(model, hub_backbone, hub_tokenizer, sequence_length, tokenizer=None):
    """Our `BertClassifier` (pooling `"cls"`) -> keras-hub's `BertTextClassifier` (or
    `AlbertTextClassifier`) with its preprocessor, the head copied."""
    import keras_hub

    if not isinstance(model, BertClassifier) or model.pooling != "cls":
        raise ValueError(
            "keras-hub's BertTextClassifier reads the pooled [CLS] output: expected a "
            f"BertClassifier with pooling='cls'. Received: {type(model).__name__}"
            + (f" with pooling={model.pooling!r}" if isinstance(model, BertClassifier) else "")
        )
    prefix = HUB_CLASSIFIERS.get(type(hub_backbone).__name__)
    if prefix is None:
        raise ValueError(
            f"keras-hub has no classifier on a {type(hub_backbone).__name__} that reads the "
            "pooled [CLS] output as ours does (its DistilBERT head is a ReLU layer, its "
            "ELECTRA has none): write the backbone alone"
        )
    preprocessor = getattr(keras_hub.models, f"{prefix}TextClassifierPreprocessor")(
        hub_tokenizer, sequence_length=sequence_length, truncate=hub_truncate(tokenizer)
    )
    hub = getattr(keras_hub.models, f"{prefix}TextClassifier")(
        hub_backbone, model.num_classes, preprocessor=preprocessor, dropout=model.dropout
    )
    hub.output_dense.set_weights(model.output_dense.get_weights())
    return hub


def classifier_head(hub, model):
    """keras-hub's `BertTextClassifier` (or `AlbertTextClassifier`) head (its `logits`
    Dense) into our classifier."""
    if type(hub).__name__ not in {f"{p}TextClassifier" for p in HUB_CLASSIFIERS.values()}:
        raise ValueError(
            f"keras-hub's {type(hub).__name__} head is not the pooled [CLS] output and a "
            "Dense layer that ours is: give another num_classes for a new head"
        )
    if hub.activation is not None and hub.get_config().get("activation") not in (None, "linear"):
        raise ValueError(
            f"keras-hub's classifier applies activation={hub.get_config()['activation']!r} "
            "to its logits; ours returns logits"
        )
    if getattr(model, "pooling", "cls") != "cls":
        raise ValueError(
            "keras-hub's classifier head reads the pooled [CLS] output; this classifier has "
            f"pooling={model.pooling!r}, which would feed it another vector: use pooling='cls' "
            "for the preset's head"
        )
    model.output_dense.set_weights(hub.output_dense.get_weights())


def parameters(config):
    """The weights a keras-hub `BertBackbone`, `DistilBertBackbone` or `ElectraBackbone`
    config claims (embeddings, blocks, pooler), told apart by their keys."""
    config = dict(config)
    config.setdefault("vocabulary_size", config.get("vocab_size"))
    size = {k: int(config[k]) for k in ("vocabulary_size", "num_layers", "hidden_dim",
                                        "intermediate_dim", "max_sequence_length")}  # fmt: skip
    h, i = size["hidden_dim"], size["intermediate_dim"]
    e = int(config.get("embedding_dim") or h)  # ELECTRA's factorised embedding
    distilbert = "num_segments" not in config
    segments = 0 if distilbert else int(config["num_segments"])
    embeddings = (size["vocabulary_size"] + size["max_sequence_length"] + segments) * e + 2 * e
    if e != h:
        embeddings += e * h + h  # the projection
    pooler = 0 if distilbert else h * h + h
    return embeddings + size["num_layers"] * block_parameters(h, i) + pooler
