"""Reads a Hugging Face ELECTRA pair (generator + discriminator folders) into
`ElectraPretrainer`, heads included."""

import numpy as np

from keras_attn.checkpoints import IDENTITY, CheckpointError, assign, dense, norm
from keras_attn.models.bert import bert_checkpoint

# The embeddings the two checkpoints of one ELECTRA hold twice (trained as one set).
SHARED = (
    "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight",
    "embeddings.LayerNorm.weight",
    "embeddings.LayerNorm.bias",
)


def _generator_head(pretrainer):
    """ElectraForMaskedLM's head: dense, GELU, LayerNorm, then the tied output's bias."""
    head = pretrainer.masked_lm_head
    return (
        dense(head.dense, "generator_predictions.dense")
        + norm(head.layer_norm, "generator_predictions.LayerNorm")
        + [(head.output_bias, "generator_lm_head.bias", IDENTITY)]
    )


def _discriminator_head(pretrainer):
    """ElectraForPreTraining's head: dense, activation, one logit per token."""
    return dense(pretrainer.rtd_dense, "discriminator_predictions.dense") + dense(
        pretrainer.rtd_output, "discriminator_predictions.dense_prediction"
    )


def load_pretrainer(cls, generator_path, discriminator_path, **kwargs):
    """`ElectraPretrainer.from_pretrained`: both backbones and both heads."""
    from keras_attn.models.bert.bert_backbone import BertBackbone

    generator, generator_tensors, _ = bert_checkpoint.backbone_and_tensors(
        BertBackbone, generator_path
    )
    discriminator, discriminator_tensors, _ = bert_checkpoint.backbone_and_tensors(
        BertBackbone, discriminator_path
    )
    for name in SHARED:
        if name in generator_tensors and name in discriminator_tensors:
            difference = np.abs(generator_tensors[name] - discriminator_tensors[name]).max()
            if difference > 0:
                raise CheckpointError(
                    f"{generator_path} and {discriminator_path} are not one ELECTRA: their "
                    f"{name} differ (max abs {difference:g}); ElectraPretrainer shares the "
                    "embeddings, as ELECTRA is trained"
                )
    tied = generator_tensors.get("generator_lm_head.weight")
    if tied is not None and np.abs(tied - generator_tensors[SHARED[0]]).max() > 0:
        raise CheckpointError(
            f"{generator_path}: generator_lm_head.weight is not the word embeddings "
            "(ElectraPretrainer ties them)"
        )
    pretrainer = cls(generator, discriminator, **kwargs)
    for path, tensors, table, what in (
        (generator_path, generator_tensors, _generator_head, "ElectraForMaskedLM head weight(s)"),
        (
            discriminator_path,
            discriminator_tensors,
            _discriminator_head,
            "ElectraForPreTraining head weight(s)",
        ),
    ):
        try:
            assign(table(pretrainer), tensors, what, model="ElectraPretrainer")
        except ValueError as error:
            raise CheckpointError(f"{path}: {error}") from None
    return pretrainer
