"""Pictures of attention: heat maps of attention probabilities, tokens on both axes."""

from keras_attn.visualize.attention_heatmap import attention_heatmap

__all__ = ["attention_heatmap"]
