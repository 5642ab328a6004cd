"""GPT: a decoder-only language model with learned positions; GPT-2 checkpoints."""

from keras_attn.models.gpt import gpt_family  # noqa: F401  (registers the family)
from keras_attn.models.gpt.gpt_finetuning import GPTFineTuner, gpt1_inputs
from keras_attn.models.gpt.gpt_language_model import GPTLanguageModel

__all__ = ["GPTFineTuner", "GPTLanguageModel", "gpt1_inputs"]
