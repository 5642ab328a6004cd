"""The ERNIE family's registry entry: `ErnieBackbone`, its typing head (`keras-attn
finetune` with `data.task: entity_typing`; served with linking in the graph:
`keras_attn.export.signatures.mention_typing`) and its pre-trainer
(`keras-attn pretrain --objective ernie`: masked LM, next sentence and dEA, the text
linked to the synsets of `model.entity_vectors` in the data pipeline)."""

import functools

from keras_attn.errors import UserInputError
from keras_attn.models import registry
from keras_attn.models.ernie.entity_typing import EntityTyping
from keras_attn.models.ernie.ernie_backbone import ErnieBackbone
from keras_attn.models.ernie.ernie_pretrainer import ErniePretrainer


def _entity_vectors(settings):
    """The run's `(synsets, vectors)`, read and checked once for the data pipeline's
    linking and the model (the file named by its size and time: a new one is read)."""
    import os

    path = str(settings.entity_vectors)
    try:
        stat = os.stat(path) if os.path.isfile(path) else None
        key = (stat.st_size, stat.st_mtime_ns) if stat else None
        return _read_vectors(path, key) if key else _read_vectors.__wrapped__(path, key)
    except (OSError, ValueError) as error:
        raise UserInputError(f"model.entity_vectors: {error}") from None


@functools.lru_cache(maxsize=1)
def _read_vectors(path, key):
    from keras_attn.knowledge import read_entity_vectors

    return read_entity_vectors(path)  # what is wrong with a missing file, named


def _linking(settings, tokenizer):
    """The sampler's `linker`: WordNet's forms of the vectors' synsets, in the graph."""
    from keras_attn.data import GraphLinker

    synsets, _ = _entity_vectors(settings)
    try:
        return {"linker": GraphLinker.from_entities(synsets)}
    except ValueError as error:
        raise UserInputError(f"model.entity_vectors: {error}") from None


def _build(settings, tokenizer, seed, piece_counts=None):
    """BERT of the preset's size, its lower half the T-Encoder and its upper half the
    token side of the fusion blocks (`ErnieBackbone.from_bert`), the vectors frozen."""
    from keras_attn.models.bert import BertBackbone

    for key, default in (("norm_first", False), ("score", "scaled_dot")):
        if getattr(settings, key) != default:
            raise UserInputError(
                f"model.{key}: expected {default!r} with objective ernie (ERNIE's post-LN "
                f"BERT blocks); got {getattr(settings, key)!r}"
            )
    _, vectors = _entity_vectors(settings)
    bert = BertBackbone.from_size(
        settings.preset, vocabulary_size=tokenizer.vocabulary_size,
        max_sequence_length=settings.sequence_length, dropout=settings.dropout,
        initializer_range=settings.initializer_range,
    )  # fmt: skip
    if bert.num_layers < 2:
        raise UserInputError(f"model.preset: ERNIE needs two blocks or more; {settings.preset}")
    dim = vectors.shape[1]
    heads = next(h for h in (4, 2, 1) if dim % h == 0)  # the paper's 4 where they divide
    backbone = ErnieBackbone.from_bert(bert, len(vectors), entity_dim=dim, entity_num_heads=heads)
    backbone.set_entity_vectors(vectors)
    return ErniePretrainer(backbone, sentence_objective="nsp"), backbone


def _entity_typing(backbone, num_classes, dropout, pooling):
    return EntityTyping(backbone, num_classes=num_classes, dropout=dropout)


def _examples(sampler, masker):
    from keras_attn.data import ernie_pretraining_example

    return ernie_pretraining_example(sampler, masker)


ERNIE = registry.register(
    registry.Family(
        name="ernie",
        backbone_cls=ErnieBackbone,
        heads={"entity_typing": _entity_typing},
        pretrainers={
            "ernie": registry.Pretraining(
                ErniePretrainer, "nsp", _examples, _build, sampler_options=_linking
            )
        },
        signatures={EntityTyping: "entity_typing"},
    )
)
# The same head reads a BertBackbone's text alone (the text-only control of ERNIE's
# typing): BERT's fine-tuning offers it from here.
registry.add_head("bert", "entity_typing", _entity_typing)
