"""The RoBERTa family's registry entry: `RobertaBackbone`, Hugging Face `roberta`
folders, BERT's heads (their serving signatures come with them), and a byte-level BPE
tokenizer kept as `vocab.json` + `merges.txt`."""

import numpy as np

from keras_attn.models import registry
from keras_attn.models.bert import (
    BertClassifier,
    BertPretrainer,
    BertSpanQA,
    BertTokenClassifier,
)
from keras_attn.models.roberta import keras_hub_roberta
from keras_attn.models.roberta.roberta_backbone import RobertaBackbone

FILES = ("vocab.json", "merges.txt")


def _classifier(backbone, num_classes, dropout, pooling):
    return BertClassifier(backbone, num_classes=num_classes, dropout=dropout, pooling=pooling)


def _tagger(backbone, num_classes, dropout, pooling):
    return BertTokenClassifier(backbone, num_classes=num_classes, dropout=dropout)


def _span_qa(backbone, num_classes, dropout, pooling):
    return BertSpanQA(backbone)


def _load_tokenizer(folder, sequence_length=128, lowercase=True, truncate="longest_first"):
    """The folder's byte-level BPE (cased: `lowercase` does not apply)."""
    from keras_attn.models.roberta.roberta_tokenizer import RobertaTokenizer

    return RobertaTokenizer.from_folder(folder, sequence_length=sequence_length, truncate=truncate)


def _save_tokenizer(tokenizer, folder):
    tokenizer.save_assets(folder)


TOKENIZER = registry.TokenizerFiles(
    FILES, _load_tokenizer, _save_tokenizer, classes=("RobertaTokenizer",)
)


def _probe(backbone):
    """Two rows, the second half-padded with `<pad>`; one segment."""
    x = registry.encoder_probe(backbone)
    x["token_ids"] = np.where(x["padding_mask"] > 0, x["token_ids"], backbone.padding_token_id)
    x["segment_ids"] = np.zeros_like(x["segment_ids"])
    return x


ROBERTA = registry.register(
    registry.Family(
        name="roberta",
        backbone_cls=RobertaBackbone,
        heads={"classification": _classifier, "tagging": _tagger, "span_qa": _span_qa},
        masked_lm=lambda backbone: BertPretrainer(backbone, sentence_objective="none"),
        model_types=("roberta",),
        twin=registry.HuggingFaceTwin(
            keras_file="backbone.keras",
            tokenizer_files=FILES,
            auto_class="AutoModel",
            read_tokenizer=TOKENIZER.read,
            probe=_probe,
        ),
        attention_maps=True,
        tokenizer=TOKENIZER,
        keras_hub=registry.KerasHubTwin(
            backbone_classes=("RobertaBackbone",),
            to_ours=keras_hub_roberta.to_ours,
            to_hub=keras_hub_roberta.to_hub,
            tokenizer_to_ours=keras_hub_roberta.tokenizer_to_ours,
            tokenizer_to_hub=keras_hub_roberta.tokenizer_to_hub,
            classifier_to_hub=keras_hub_roberta.classifier_to_hub,
            classifier_head=keras_hub_roberta.classifier_head,
            parameters=keras_hub_roberta.parameters,
        ),
    )
)
