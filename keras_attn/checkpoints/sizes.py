"""A checkpoint's configuration checked against its weights' shapes, before any model is
built from it.

A `config.json` is a file anyone can edit: `vocab_size` 3·10⁷ beside weights of 4,168
rows, or `num_hidden_layers` 10⁶, would otherwise be trusted and allocated (gigabytes,
minutes of building) before the weights are compared. Every size a configuration gives
is the length of some weight's axis, or bounds one: each is checked against the shapes
the weight file's header lists (`weight_shapes`: safetensors and TF1 checkpoints are
read without loading a tensor), so nothing is built larger than the weights.
"""

import re

from keras_attn.checkpoints.checkpoint_errors import CheckpointError

# Keys whose value, in every family that has them, is the length of a weight's axis.
EXACT = (
    "vocab_size",
    "hidden_size",
    "intermediate_size",
    "embedding_size",
    "n_embd",
    "n_inner",
    "d_model",
    "d_inner",
    "dim",
    "hidden_dim",
)
# Keys that count heads, segments or layer groups: at most the longest axis.
BOUNDED = (
    "type_vocab_size",
    "num_attention_heads",
    "num_key_value_heads",
    "head_dim",
    "n_head",
    "n_heads",
    "d_head",
    "num_hidden_groups",
    "inner_group_num",
)
# Keys of positions: a table's rows where the family keeps one (then the weights' check
# after the build names a mismatch), or a bound a family keeps as no weight at all
# (DeBERTa-v3's absolute positions with `position_biased_input` false, its relative
# distances over log buckets): at most the longest axis, or `MAX_POSITIONS` where that
# is shorter (a tiny DeBERTa's weights may all be shorter than its 64 positions).
POSITIONS = (
    "max_position_embeddings",
    "n_positions",
    "n_ctx",
    "max_relative_positions",
    "position_buckets",
)
MAX_POSITIONS = 1 << 16
# Keys that count layers: at most the layers the weights hold (the highest index of a
# name's numbered part, plus one).
LAYERS = ("num_hidden_layers", "n_layer", "n_layers", "num_layers")
# ALBERT repeats its shared layers `num_hidden_layers` times (weights of one group): the
# repeats are bounded by this instead (its published sizes use 12 and 24).
SHARED_LAYER_REPEATS = 256


def check_sizes(config, shapes, config_name, weights_name):
    """Raises `CheckpointError` naming the key, its value and the weight file unless every
    size in `config` fits `shapes` (`{weight name: shape}`): see `EXACT`, `BOUNDED`,
    `LAYERS`. Keys absent, `None` or not positive are left to the family's own checks.

    Example:

    >>> from keras_attn.checkpoints.sizes import check_sizes
    >>> shapes = {"embeddings.word_embeddings.weight": (4168, 32),
    ...           "encoder.layer.0.intermediate.dense.weight": (37, 32)}
    >>> check_sizes({"vocab_size": 4168, "hidden_size": 32, "num_hidden_layers": 1},
    ...             shapes, "config.json", "model.safetensors")
    >>> check_sizes({"vocab_size": 30_000_000}, shapes, "config.json", "model.safetensors")
    Traceback (most recent call last):
    ...
    keras_attn.checkpoints.checkpoint_errors.CheckpointError: config.json: vocab_size 30000000 is no axis of any weight in model.safetensors (their axes: 32, 37, 4168); the configuration and the weights disagree
    """  # noqa: E501
    axes = sorted({int(n) for shape in shapes.values() for n in shape})
    longest = max(axes, default=0)

    def given(key):
        value = config.get(key)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    for key in EXACT:
        value = given(key)
        if value is not None and value > 0 and value not in axes:
            shown = ", ".join(map(str, axes[-8:]))
            raise CheckpointError(
                f"{config_name}: {key} {value} is no axis of any weight in {weights_name} "
                f"(their axes: {shown}); the configuration and the weights disagree"
            )
    for keys, bound in ((BOUNDED, longest), (POSITIONS, max(longest, MAX_POSITIONS))):
        for key in keys:
            value = given(key)
            if value is not None and value > bound:
                raise CheckpointError(
                    f"{config_name}: {key} {value} is larger than any axis of the weights in "
                    f"{weights_name} (the longest: {longest}"
                    + ("" if bound == longest else f"; positions: at most {bound}")
                    + ")"
                )
    indices = [int(i) for name in shapes for i in re.findall(r"(?:^|[._/])(\d+)(?=[._/])", name)]
    held = max(indices, default=0) + 1
    shared = given("num_hidden_groups") is not None  # ALBERT: repeats of shared layers
    limit = SHARED_LAYER_REPEATS if shared else held
    for key in LAYERS:
        value = given(key)
        if value is not None and value > limit:
            what = f"at most {limit} repeats of shared layers" if shared else f"{held} layers"
            raise CheckpointError(
                f"{config_name}: {key} {value}, where the weights in {weights_name} hold {what}"
            )


def safetensors_shapes(file):
    """`{name: shape}` of a safetensors file, read from its header alone."""
    from safetensors import safe_open

    with safe_open(str(file), framework="numpy") as f:
        return {name: tuple(f.get_slice(name).get_shape()) for name in f.keys()}
