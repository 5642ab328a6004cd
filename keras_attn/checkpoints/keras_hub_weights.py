"""Weights between keras-hub's models and ours, for every family with a keras-hub twin:
variables copied by path, the sizes keras-hub's configs name, the settings it fixes, and
how its preprocessors cut a pair."""

import numpy as np

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
