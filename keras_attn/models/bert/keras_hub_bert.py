"""BERT between keras-hub and us: `BertBackbone` / `BertTextClassifier` and their
`BertTokenizer`, as the family's `registry.KerasHubTwin`.

keras-hub's BERT is ours with three settings fixed: post-LN blocks of scaled-dot
attention, tanh-approximated GELU, LayerNorm epsilon 1e-12, no factorised or shared
layers; its variables are ours under the same paths (its `self_attention_layer` is our
`self_attention`). Its classifier reads the tanh pooler on `[CLS]`, as our
`BertClassifier(pooling="cls")`. Its `BertTokenizer` lower-cases without stripping
accents unless told; ours reads its settings as they are.
"""

from keras_attn.models.bert.bert_backbone import BertBackbone
from keras_attn.models.bert.bert_classifier import BertClassifier

HUB_NAMES = {"/self_attention_layer/": "/self_attention/"}


def copy_weights(source, target, renames=None, unmatched=()):
    """Every weight of `source` into `target`'s weight of the same path (keras-hub's
    paths read in our names: `HUB_NAMES`, or `renames`: a dict of substrings, or a
    function of the path); the two sets of paths must be equal, but for `unmatched`
    (our paths keras-hub's class has no twin of: left as they are on either side)."""

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
        if tuple(by_path[path].shape) != tuple(weight.shape):
            raise ValueError(f"{path}: shape {by_path[path].shape} where we hold {weight.shape}")
        weight.assign(by_path[path])


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


def to_ours(hub):
    """keras-hub's `BertBackbone` -> ours, weights copied."""
    from keras_attn.layers import gelu_approximate

    config = hub.get_config()
    ours = BertBackbone(
        vocabulary_size=config["vocabulary_size"],
        num_layers=config["num_layers"],
        num_heads=config["num_heads"],
        hidden_dim=config["hidden_dim"],
        intermediate_dim=config["intermediate_dim"],
        max_sequence_length=config["max_sequence_length"],
        num_segments=config["num_segments"],
        dropout=config["dropout"],
        activation=gelu_approximate,
    )
    copy_weights(hub, ours)
    return ours


def to_hub(backbone):
    """Our `BertBackbone` -> keras-hub's, weights copied."""
    import keras_hub

    check_settings(backbone, BERT_SETTINGS)
    hub = keras_hub.models.BertBackbone(
        vocabulary_size=backbone.vocabulary_size,
        num_layers=backbone.num_layers,
        num_heads=backbone.num_heads,
        hidden_dim=backbone.hidden_dim,
        intermediate_dim=backbone.intermediate_dim,
        max_sequence_length=backbone.max_sequence_length,
        num_segments=backbone.num_segments,
        dropout=backbone.dropout,
    )
    copy_weights(backbone, hub)
    return hub


def tokenizer_to_ours(hub_tokenizer, sequence_length, lowercase=None):
    """keras-hub's `BertTokenizer` -> our `WordPieceTokenizer` tokenising as it does."""
    from keras_attn.data import WordPieceTokenizer

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


def classifier_to_hub(model, hub_backbone, hub_tokenizer, sequence_length):
    """Our `BertClassifier` (pooling `"cls"`) -> keras-hub's `BertTextClassifier` with a
    `BertTextClassifierPreprocessor`, its head copied."""
    import keras_hub

    if not isinstance(model, BertClassifier) or model.pooling != "cls":
        raise ValueError(
            "keras-hub's BertTextClassifier reads the pooled [CLS] output: expected a "
            f"BertClassifier with pooling='cls'. Received: {type(model).__name__}"
            + (f" with pooling={model.pooling!r}" if isinstance(model, BertClassifier) else "")
        )
    preprocessor = keras_hub.models.BertTextClassifierPreprocessor(
        hub_tokenizer, sequence_length=sequence_length
    )
    hub = keras_hub.models.BertTextClassifier(
        hub_backbone, model.num_classes, preprocessor=preprocessor, dropout=model.dropout
    )
    hub.output_dense.set_weights(model.output_dense.get_weights())
    return hub


def classifier_head(hub, model):
    """keras-hub's `BertTextClassifier` head (its `logits` Dense) into our classifier."""
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
    """The weights a keras-hub `BertBackbone` config claims (embeddings, blocks, pooler)."""
    size = {k: int(config[k]) for k in ("vocabulary_size", "num_layers", "hidden_dim",
                                        "intermediate_dim", "max_sequence_length")}  # fmt: skip
    h, i = size["hidden_dim"], size["intermediate_dim"]
    segments = int(config.get("num_segments", 2))
    embeddings = (size["vocabulary_size"] + size["max_sequence_length"] + segments) * h + 2 * h
    block = 4 * (h * h + h) + 2 * h + (h * i + i) + (i * h + h) + 2 * h
    return embeddings + size["num_layers"] * block + h * h + h
