"""Pictures of attention: heat maps of attention probabilities, tokens on both axes."""

from keras_attn.visualize.attention_heatmap import attention_heatmap, attention_image_summary

__all__ = ["attention_heatmap", "attention_image_summary"]
