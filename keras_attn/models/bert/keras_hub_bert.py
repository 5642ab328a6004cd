"""BERT between keras-hub and us: `BertBackbone` / `BertTextClassifier` and their
`BertTokenizer`, as the family's `registry.KerasHubTwin`.

keras-hub's BERT is ours with three settings fixed: post-LN blocks of scaled-dot
attention, tanh-approximated GELU, LayerNorm epsilon 1e-12, no factorised or shared
layers; its variables are ours under the same paths (its `self_attention_layer` is our
`self_attention`). Its classifier reads the tanh pooler on `[CLS]`, as our
`BertClassifier(pooling="cls")`. Its `BertTokenizer` lower-cases without stripping
accents unless told; ours reads its settings as they are.
"""

import numpy as np

from keras_attn.models.bert.bert_backbone import BertBackbone
from keras_attn.models.bert.bert_classifier import BertClassifier

HUB_NAMES = {"/self_attention_layer/": "/self_attention/"}


def copy_weights(source, target, renames=None, unmatched=(), reshaped=(), transposed=None):
    """Every weight of `source` into `target`'s weight of the same path (keras-hub's
    paths read in our names: `HUB_NAMES`, or `renames`: a dict of substrings, or a
    function of the path); the two sets of paths must be equal, but for `unmatched`
    (our paths keras-hub's class has no twin of: left as they are on either side);
    `reshaped`: our paths whose two sides hold the same values in another shape (a
    Dense kernel where an EinsumDense splits the heads); `transposed`: our path ->
    the axes that turn the source's array into the target's layout (XLNet's output
    kernel)."""

    def ours(path):
        if callable(renames):
            return renames(path)
        for theirs, mine in (renames or HUB_NAMES).items():
            path = path.replace(theirs, mine)
        return path

    by_path = {ours(w.path): w for w in source.weights if ours(w.path) not in unmatched}
    targets = {ours(w.path): w for w in target.weights if ours(w.path) not in unmatched}
    if sorted(by_path) != sorted(targets):
        missing, extra = sorted(set(targets) - set(by_path)), sorted(set(by_path) - set(targets))
        raise ValueError(
            f"{type(source).__name__} and {type(target).__name__} hold different weights: "
            f"missing {missing[:5]}, extra {extra[:5]}"
        )
    for path, weight in targets.items():
        value = by_path[path]
        if transposed and path in transposed:
            value = np.transpose(np.asarray(value), transposed[path])
        if tuple(value.shape) != tuple(weight.shape):
            same_size = int(np.prod(value.shape)) == int(np.prod(weight.shape))
            if path not in reshaped or not same_size:
                raise ValueError(f"{path}: shape {value.shape} where we hold {weight.shape}")
            value = np.reshape(np.asarray(value), weight.shape)
        weight.assign(value)


def hub_sizes(config):
    """The sizes every keras-hub encoder and decoder config names, as our constructors
    take them (ELECTRA's `vocab_size` read as `vocabulary_size`)."""
    return dict(
        vocabulary_size=config.get("vocabulary_size", config.get("vocab_size")),
        num_layers=config["num_layers"],
        num_heads=config["num_heads"],
        hidden_dim=config["hidden_dim"],
        intermediate_dim=config["intermediate_dim"],
        max_sequence_length=config["max_sequence_length"],
        dropout=config["dropout"],
    )


def block_parameters(hidden, intermediate):
    """The weights of one Transformer block of keras-hub's (and ours): four attention
    projections with biases, two LayerNorms, the two feed-forward layers."""
    h, i = hidden, intermediate
    return 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h


def check_settings(backbone, fixed, hub_class="BertBackbone"):
    """A ValueError naming the first setting of `backbone` that keras-hub's `hub_class`
    computes otherwise (`fixed`: setting -> keras-hub's value; activations by name)."""
    config = backbone.get_config()
    activation = config["activation"]  # a name, a function, or a serialized function
    if isinstance(activation, dict):
        activation = activation.get("config")
    if callable(activation):
        activation = getattr(activation, "__name__", repr(activation))
    found = dict(config, activation=str(activation).rpartition(">")[2])
    for name, expected in fixed.items():
        if found[name] != expected:
            hint = (
                " (build it with activation=keras_attn.layers.gelu_approximate to write it)"
                if name == "activation" and expected == "gelu_approximate"
                else ""
            )
            raise ValueError(
                f"keras-hub's {hub_class} computes {name}={expected!r}; this backbone has "
                f"{name}={found[name]!r}: its outputs would differ in keras-hub{hint}"
            )


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


def hub_truncate(tokenizer):
    """How keras-hub's preprocessor should cut a pair for `tokenizer`: its way when
    keras-hub's packer has it; ours `"longest_first"` (`transformers`') it has
    not, so it is written round robin with a warning: the same ids but for a pair cut
    to fit, which keras-hub then shares evenly."""
    import warnings

    truncate = getattr(tokenizer, "truncate", "round_robin")
    if truncate == "longest_first":
        warnings.warn(
            "keras-hub's preprocessors cut a pair round robin or waterfall, not longest "
            "first as this tokenizer does: the preset is written round robin (the same ids "
            "unless a pair is cut to fit)",
            stacklevel=3,
        )
        return "round_robin"
    return truncate


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
