"""The DeBERTa family's registry entry: `DebertaV3Backbone`, its heads, Hugging Face
`deberta-v2` folders, and a SentencePiece tokenizer kept as `spm.model`."""

from keras_attn.models import registry
from keras_attn.models.deberta.deberta_backbone import DebertaV3Backbone
from keras_attn.models.deberta.deberta_classifier import (
    DebertaV3Classifier,
    DebertaV3SpanQA,
    DebertaV3TokenClassifier,
)

FILES = ("spm.model",)


def _classifier(backbone, num_classes, dropout, pooling):
    return DebertaV3Classifier(backbone, num_classes=num_classes, dropout=dropout, pooling=pooling)


def _tagger(backbone, num_classes, dropout, pooling):
    return DebertaV3TokenClassifier(backbone, num_classes=num_classes, dropout=dropout)


def _span_qa(backbone, num_classes, dropout, pooling):
    return DebertaV3SpanQA(backbone)


def _load_tokenizer(folder, sequence_length=128, lowercase=True):
    """The folder's SentencePiece model (cased as it is: `lowercase` does not apply)."""
    from keras_attn.models.deberta.deberta_tokenizer import DebertaV3Tokenizer

    return DebertaV3Tokenizer.from_folder(folder, sequence_length=sequence_length)


def _save_tokenizer(tokenizer, folder):
    tokenizer.save_assets(folder)


TOKENIZER = registry.TokenizerFiles(FILES, _load_tokenizer, _save_tokenizer)


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
        },
        attention_maps=True,
        classes=(DebertaV3Classifier, DebertaV3TokenClassifier, DebertaV3SpanQA),
        tokenizer=TOKENIZER,
    )
)
