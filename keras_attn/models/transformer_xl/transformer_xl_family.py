"""The Transformer-XL family's registry entry (no Hugging Face twin: `transformers`
v5 removed `TransfoXL`)."""

from keras_attn.models import registry
from keras_attn.models.transformer_xl.transformer_xl import TransformerXL


def _build_language_model(settings, tokenizer):
    """`keras-attn lm --architecture transformer_xl`: segments of `sequence_length`, the
    memory carried from one to the next inside each training window."""
    return TransformerXL(
        tokenizer.vocabulary_size,
        **registry.decoder_arguments(settings, tokenizer),
        segment_length=settings.sequence_length,
        memory_length=settings.memory_length,
        # Farther distances share the training's longest (the paper's clamp_len).
        clamp_length=settings.memory_length + settings.sequence_length,
    )


def _window(settings):
    """A training example holds `segments` consecutive segments."""
    return settings.sequence_length * settings.segments


TRANSFORMER_XL = registry.register(
    registry.Family(
        name="transformer_xl",
        backbone_cls=TransformerXL,
        signatures={TransformerXL: "language_model"},
        language_models=(
            registry.LanguageModel("transformer_xl", _build_language_model, window=_window),
        ),
    )
)
