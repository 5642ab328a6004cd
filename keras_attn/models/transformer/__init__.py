"""The encoder-decoder Transformer, GPT, and what trains them."""

from keras_attn.models.transformer.gpt_language_model import GPTLanguageModel
from keras_attn.models.transformer.label_smoothed_cross_entropy import LabelSmoothedCrossEntropy
from keras_attn.models.transformer.transformer_schedule import TransformerSchedule
from keras_attn.models.transformer.transformer_seq2seq import TransformerSeq2Seq

__all__ = ["GPTLanguageModel", "LabelSmoothedCrossEntropy", "TransformerSchedule", "TransformerSeq2Seq"]
