"""The Transformer-XL family's registry entry (no Hugging Face twin: `transformers`
v5 removed `TransfoXL`)."""

from keras_attn.models import registry
from keras_attn.models.transformer_xl.transformer_xl import TransformerXL

TRANSFORMER_XL = registry.register(
    registry.Family(
        name="transformer_xl",
        backbone_cls=TransformerXL,
        signatures={TransformerXL: "language_model"},
    )
)
