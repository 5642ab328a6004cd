"""The DeBERTa family's registry entry: `DebertaV3Backbone`, its heads, its masked-LM
pre-training (`keras-attn pretrain --objective deberta`), Hugging Face `deberta-v2`
folders, and a SentencePiece tokenizer kept as `spm.model` (or, for a backbone
pre-trained here, the run's WordPiece `vocab.txt`)."""

from keras_attn.errors import UserInputError
from keras_attn.models import registry
from keras_attn.models.deberta import keras_hub_deberta
from keras_attn.models.deberta.deberta_backbone import DebertaV3Backbone
from keras_attn.models.deberta.deberta_classifier import (
    DebertaV3Classifier,
    DebertaV3SpanQA,
    DebertaV3TokenClassifier,
)
from keras_attn.models.deberta.deberta_masked_lm import DebertaV3MaskedLM

FILES = ("spm.model",)


def _classifier(backbone, num_classes, dropout, pooling):
    return DebertaV3Classifier(backbone, num_classes=num_classes, dropout=dropout, pooling=pooling)


def _tagger(backbone, num_classes, dropout, pooling):
    return DebertaV3TokenClassifier(backbone, num_classes=num_classes, dropout=dropout)


def _span_qa(backbone, num_classes, dropout, pooling):
    return DebertaV3SpanQA(backbone)


def _load_tokenizer(folder, sequence_length=128, lowercase=True, truncate="longest_first"):
    """The folder's SentencePiece model (cased as it is: `lowercase` does not apply)."""
    from keras_attn.models.deberta.deberta_tokenizer import DebertaV3Tokenizer

    return DebertaV3Tokenizer.from_folder(
        folder, sequence_length=sequence_length, truncate=truncate
    )


def _save_tokenizer(tokenizer, folder):
    if hasattr(tokenizer, "model"):  # SentencePiece
        tokenizer.save_assets(folder)
    else:  # the WordPiece vocabulary of a backbone pre-trained here
        registry.WORDPIECE.save(tokenizer, folder)


TOKENIZER = registry.TokenizerFiles(
    FILES,
    _load_tokenizer,
    _save_tokenizer,
    or_else=registry.WORDPIECE,
    classes=("DebertaV3Tokenizer",),
)


def _build_masked_lm(settings, tokenizer, seed, piece_counts=None):
    """`pretrain --objective deberta`: a `DebertaV3Backbone` of the preset's size (its
    own post-LN blocks and disentangled attention) under `DebertaV3MaskedLM`; v3's
    256 position buckets over 512 positions, so half the sequence length here."""
    for key, value, default in (
        ("norm_first", settings.norm_first, False),
        ("score", settings.score, "scaled_dot"),
    ):
        if value != default:
            raise UserInputError(
                f"model.{key}: expected {default!r} with objective deberta (DeBERTa's "
                f"post-LN blocks and disentangled attention); got {value!r}"
            )
    backbone = DebertaV3Backbone.from_size(
        settings.preset,
        vocabulary_size=tokenizer.vocabulary_size,
        max_sequence_length=settings.sequence_length,
        position_buckets=min(256, settings.sequence_length // 2),
        dropout=settings.dropout,
        initializer_range=settings.initializer_range,
    )
    return DebertaV3MaskedLM(backbone), backbone


def _probe(backbone):
    """Two rows, the second half-padded; segments only where the backbone has them."""
    x = registry.encoder_probe(backbone)
    if not backbone.num_segments:
        x["segment_ids"] = x["segment_ids"] * 0
    return x


DEBERTA = registry.register(
    registry.Family(
        name="deberta",
        backbone_cls=DebertaV3Backbone,
        heads={"classification": _classifier, "tagging": _tagger, "span_qa": _span_qa},
        masked_lm=DebertaV3MaskedLM,
        pretrainers={
            "deberta": registry.Pretraining(
                DebertaV3MaskedLM,
                "none",
                registry.data_examples("bert_pretraining_example"),
                _build_masked_lm,
            )
        },
        model_types=("deberta-v2",),
        twin=registry.HuggingFaceTwin(
            keras_file="backbone.keras",
            tokenizer_files=FILES,
            auto_class="AutoModel",
            read_tokenizer=TOKENIZER.read,
            probe=_probe,
        ),
        signatures={
            DebertaV3Classifier: "classifier",
            DebertaV3TokenClassifier: "tagger",
            DebertaV3SpanQA: "span_qa",
            DebertaV3MaskedLM: "masked_lm",
        },
        attention_maps=True,
        tokenizer=TOKENIZER,
        keras_hub=registry.KerasHubTwin(
            backbone_classes=("DebertaV3Backbone",),
            to_ours=keras_hub_deberta.to_ours,
            to_hub=keras_hub_deberta.to_hub,
            tokenizer_to_ours=keras_hub_deberta.tokenizer_to_ours,
            tokenizer_to_hub=keras_hub_deberta.tokenizer_to_hub,
            parameters=keras_hub_deberta.parameters,
            classifier_to_hub=keras_hub_deberta.classifier_to_hub,
            classifier_head=keras_hub_deberta.classifier_head,
        ),
    )
)
