"""Resolves a scoring name, config or instance to a scoring layer."""

import keras

from keras_attn.api_export import keras_attn_export
from keras_attn.layers.scoring.additive_score import AdditiveScore
from keras_attn.layers.scoring.attention_score import AttentionScore
from keras_attn.layers.scoring.cosine_score import CosineScore
from keras_attn.layers.scoring.dot_score import DotScore
from keras_attn.layers.scoring.general_score import GeneralScore
from keras_attn.layers.scoring.scaled_dot_score import ScaledDotScore

SCORES = {
    "additive": AdditiveScore,
    "cosine": CosineScore,
    "dot": DotScore,
    "general": GeneralScore,
    "scaled_dot": ScaledDotScore,
}


@keras_attn_export("keras_attn.layers.scoring.get")
def get(identifier):
    """Returns a scoring layer for a name, a serialized config or an instance.

    Like `keras.activations.get`: an `AttentionScore` instance is returned as it
    is (so two attention layers given one instance share its weights); a name
    builds a new layer with default arguments; a dict from `serialize` rebuilds one.

    Args:
        identifier: one of `"scaled_dot"`, `"dot"`, `"additive"`, `"cosine"`,
            `"general"`, a dict from `serialize`, or an `AttentionScore`.

    Returns:
        An `AttentionScore` layer.

    Example:

    >>> from keras_attn.layers import scoring
    >>> type(scoring.get("additive")).__name__
    'AdditiveScore'
    """
    if isinstance(identifier, AttentionScore):
        return identifier
    if isinstance(identifier, str):
        if identifier not in SCORES:
            raise ValueError(
                f"Unknown attention score. Expected one of {sorted(SCORES)} or an "
                f"AttentionScore instance. Received: score={identifier!r}"
            )
        return SCORES[identifier]()
    if isinstance(identifier, dict):
        layer = keras.saving.deserialize_keras_object(identifier)
        if not isinstance(layer, AttentionScore):
            raise ValueError(
                f"Expected a serialized AttentionScore. Received: score={identifier!r}"
            )
        return layer
    raise TypeError(
        f"Expected `score` to be one of {sorted(SCORES)}, a serialized "
        f"AttentionScore dict or an AttentionScore instance. Received: "
        f"score={identifier!r} of type {type(identifier).__name__}"
    )


@keras_attn_export("keras_attn.layers.scoring.serialize")
def serialize(score):
    """Returns what `get` accepts back: a known name as it is, else a config dict.

    Args:
        score: a scoring name, a serialized dict or an `AttentionScore`.

    Returns:
        A string or a serialized-layer dict.

    Example:

    >>> from keras_attn.layers import scoring
    >>> scoring.serialize("cosine")
    'cosine'
    >>> scoring.serialize(scoring.get("cosine"))["registered_name"]
    'keras_attn>CosineScore'
    """
    if isinstance(score, str):
        get(score)  # raises on an unknown name
        return score
    if isinstance(score, dict):
        return score
    return keras.saving.serialize_keras_object(get(score))


def instantiate(identifier, **overrides):
    """A new scoring layer from a name or config, with `overrides` (e.g. `name`)."""
    config = serialize(identifier)
    if isinstance(config, str):
        return SCORES[config](**overrides)
    config = dict(config, config={**config["config"], **overrides})
    return get(config)
