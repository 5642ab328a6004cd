"""The XLNet family's registry entry: `XLNetBackbone`, its classifier and permutation-LM
pre-training, Hugging Face XLNet checkpoints (SentencePiece vocabularies: none copied),
keras-hub's `XLNetBackbone` presets in and out."""

from keras_attn.models import registry
from keras_attn.models.encoder_sizes import BERT_SIZES
from keras_attn.models.xlnet import keras_hub_xlnet
from keras_attn.models.xlnet.xlnet_backbone import XLNetBackbone
from keras_attn.models.xlnet.xlnet_classifier import XLNetClassifier
from keras_attn.models.xlnet.xlnet_pretrainer import XLNetPretrainer

POOLINGS = {"cls": "first", "mean": "mean"}  # fine-tuning's names -> XLNetClassifier's


def _build_pretrainer(settings, tokenizer, seed, piece_counts=None):
    """`XLNetPretrainer` on an `XLNetBackbone` of the run's `preset` size (BERT's sizes)."""
    size = dict(BERT_SIZES[settings.preset])
    backbone = XLNetBackbone(
        tokenizer.vocabulary_size,
        intermediate_dim=4 * size["hidden_dim"],
        dropout=settings.dropout,
        initializer_range=settings.initializer_range,
        **size,
    )
    model = XLNetPretrainer(
        backbone,
        partial_prediction=settings.partial_prediction,
        special_token_ids=tokenizer.special_token_ids,
        seed=seed,
    )
    return model, backbone


def _classifier(backbone, num_classes, dropout, pooling):
    return XLNetClassifier(
        backbone, num_classes=num_classes, dropout=dropout, pooling=POOLINGS[pooling]
    )


XLNET = registry.register(
    registry.Family(
        name="xlnet",
        backbone_cls=XLNetBackbone,
        heads={"classification": _classifier},
        pretrainers={
            "xlnet": registry.Pretraining(
                XLNetPretrainer,
                "none",
                registry.data_examples("xlnet_pretraining_example"),
                _build_pretrainer,
            )
        },
        model_types=("xlnet",),
        twin=registry.HuggingFaceTwin(
            keras_file="backbone.keras",
            tokenizer_files=(),
            auto_class="AutoModel",
            read_tokenizer=lambda folder: None,
            probe=registry.encoder_probe,
        ),
        signatures={XLNetClassifier: "classifier"},
        keras_hub=registry.KerasHubTwin(
            backbone_classes=("XLNetBackbone",),
            to_ours=keras_hub_xlnet.to_ours,
            to_hub=keras_hub_xlnet.to_hub,
            parameters=keras_hub_xlnet.parameters,
        ),
    )
)
