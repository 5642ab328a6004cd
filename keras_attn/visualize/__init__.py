"""Pictures of attention: heat maps of attention probabilities, tokens on both axes, and
attention over an image for each generated word."""

from keras_attn.visualize.attention_heatmap import (
    attention_figure,
    attention_heatmap,
    attention_image_summary,
)
from keras_attn.visualize.attention_over_image import attention_over_image

__all__ = [
    "attention_figure",
    "attention_heatmap",
    "attention_image_summary",
    "attention_over_image",
]
