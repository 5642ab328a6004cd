"""Attention scoring functions: `call(query, key) -> scores`, resolved by `get`."""

from keras_attn.layers.scoring.additive_score import AdditiveScore
from keras_attn.layers.scoring.attention_score import AttentionScore
from keras_attn.layers.scoring.cosine_score import CosineScore
from keras_attn.layers.scoring.dot_score import DotScore
from keras_attn.layers.scoring.general_score import GeneralScore
from keras_attn.layers.scoring.location_score import LocationScore
from keras_attn.layers.scoring.lookup import SCORES, get, serialize
from keras_attn.layers.scoring.scaled_dot_score import ScaledDotScore

__all__ = [
    "AdditiveScore",
    "AttentionScore",
    "CosineScore",
    "DotScore",
    "GeneralScore",
    "LocationScore",
    "SCORES",
    "ScaledDotScore",
    "get",
    "serialize",
]
