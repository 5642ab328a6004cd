"""Models built from keras_attn layers with the functional API.

Every family folder under `keras_attn/models/` is imported here (`registry.discover`)
and registers itself; the public names a family declares as `keras_attn.models.NAME`
(`keras_attn_export`) are this module's attributes without being listed below.
"""

from keras_attn.api_export import EXPORTED
from keras_attn.models import presets, registry
from keras_attn.models.bert import (
    BERT_SIZES,
    BertBackbone,
    BertClassifier,
    BertMultipleChoice,
    BertPretrainer,
    BertSpanQA,
    BertTokenClassifier,
    ElectraPretrainer,
    encoder_flops,
)
from keras_attn.models.distillation import Distiller, student_from_teacher
from keras_attn.models.feature_based import FeatureBasedClassifier, FeatureBasedTagger
from keras_attn.models.generation_config import GenerationConfig
from keras_attn.models.gpt import GPTLanguageModel
from keras_attn.models.keras_hub_presets import save_to_preset
from keras_attn.models.layout_maps import model_structure
from keras_attn.models.logits_processors import (
    min_p_filter,
    repetition_penalty,
    top_k_filter,
    top_p_filter,
)
from keras_attn.models.presets import list_presets
from keras_attn.models.pretrained import from_gguf, from_pretrained
from keras_attn.models.seq2seq import TransformerSeq2Seq
from keras_attn.models.stop_strings import stop_string_end
from keras_attn.models.task_kinds import CausalLM, MaskedLM, TextClassifier
from keras_attn.models.transformer_xl import TransformerXL
from keras_attn.models.xlnet import XLNetBackbone, XLNetClassifier, XLNetPretrainer

__all__ = [
    "BERT_SIZES",
    "BertBackbone",
    "BertClassifier",
    "BertMultipleChoice",
    "BertPretrainer",
    "BertSpanQA",
    "BertTokenClassifier",
    "Distiller",
    "ElectraPretrainer",
    "encoder_flops",
    "FeatureBasedClassifier",
    "FeatureBasedTagger",
    "GPTLanguageModel",
    "GenerationConfig",
    "TextClassifier",
    "MaskedLM",
    "CausalLM",
    "TransformerSeq2Seq",
    "TransformerXL",
    "XLNetBackbone",
    "XLNetClassifier",
    "XLNetPretrainer",
    "from_gguf",
    "from_pretrained",
    "model_structure",
    "min_p_filter",
    "repetition_penalty",
    "top_k_filter",
    "top_p_filter",
    "presets",
    "registry",
    "list_presets",
    "save_to_preset",
    "stop_string_end",
    "student_from_teacher",
]

# Imported when first asked for: they hold tokenizers, which need TensorFlow (the models
# themselves run on any backend).
_NEED_TENSORFLOW = {
    "CausalLMPreprocessor": "keras_attn.models.preprocessors",
    "MaskedLMPreprocessor": "keras_attn.models.preprocessors",
    "MultipleChoicePreprocessor": "keras_attn.models.preprocessors",
    "Seq2SeqPreprocessor": "keras_attn.models.preprocessors",
    "SpanQAPreprocessor": "keras_attn.models.preprocessors",
    "TokenClassifierPreprocessor": "keras_attn.models.preprocessors",
    "Preprocessor": "keras_attn.models.preprocessors",
    "TextClassifierPreprocessor": "keras_attn.models.preprocessors",
}
__all__ += sorted(_NEED_TENSORFLOW)

registry.discover()  # every family folder, the ones not imported above included
_FAMILY_NAMES = {
    path.rpartition(".")[2]: symbol
    for path, symbol in EXPORTED.items()
    if path.rpartition(".")[0] == __name__ and path.rpartition(".")[2] not in __all__
}
__all__ += sorted(_FAMILY_NAMES)


def __getattr__(name):
    if name in _FAMILY_NAMES:
        return _FAMILY_NAMES[name]
    if name in _NEED_TENSORFLOW:
        import importlib

        return getattr(importlib.import_module(_NEED_TENSORFLOW[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_FAMILY_NAMES) | set(_NEED_TENSORFLOW))
