"""Reads a Hugging Face ELECTRA pair (generator + discriminator folders) into
`ElectraPretrainer`, heads included."""

import numpy as np

from keras_attn.models.bert import bert_checkpoint
from keras_attn.models.bert.bert_checkpoint import CheckpointError
from keras_attn.models.bert.checkpoint_layouts import LINEAR, Transform

IDENTITY = Transform()

# The embeddings the two checkpoints of one ELECTRA hold twice (trained as one set).
SHARED = (
    "embeddings.word_embeddings.weight",
    "embeddings.position_embeddings.weight",
    "embeddings.token_type_embeddings.weight",
    "embeddings.LayerNorm.weight",
    "embeddings.LayerNorm.bias",
)


def _heads(pretrainer):
    """(variable, checkpoint name, transform, which checkpoint) of the two heads."""
    head = pretrainer.masked_lm_head
    return [
        (head.dense.kernel, "generator_predictions.dense.weight", LINEAR, "generator"),
        (head.dense.bias, "generator_predictions.dense.bias", IDENTITY, "generator"),
        (head.layer_norm.gamma, "generator_predictions.LayerNorm.weight", IDENTITY, "generator"),
        (head.layer_norm.beta, "generator_predictions.LayerNorm.bias", IDENTITY, "generator"),
        (head.output_bias, "generator_lm_head.bias", IDENTITY, "generator"),
        (pretrainer.rtd_dense.kernel, "discriminator_predictions.dense.weight", LINEAR, "disc"),
        (pretrainer.rtd_dense.bias, "discriminator_predictions.dense.bias", IDENTITY, "disc"),
        (
            pretrainer.rtd_output.kernel,
            "discriminator_predictions.dense_prediction.weight",
            LINEAR,
            "disc",
        ),
        (
            pretrainer.rtd_output.bias,
            "discriminator_predictions.dense_prediction.bias",
            IDENTITY,
            "disc",
        ),
    ]


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
    sources = {
        "generator": (generator_path, generator_tensors),
        "disc": (discriminator_path, discriminator_tensors),
    }
    missing = [
        f"{sources[which][0]}: {name}"
        for _, name, _, which in _heads(pretrainer)
        if name not in sources[which][1]
    ]
    if missing:
        raise CheckpointError(
            f"Expected an ElectraForMaskedLM generator and an ElectraForPreTraining "
            f"discriminator; missing: {missing}"
        )
    for variable, name, transform, which in _heads(pretrainer):
        value = np.asarray(sources[which][1][name], "float32")
        shape = tuple(variable.shape)
        if value.shape != transform.theirs_shape(shape):
            raise CheckpointError(
                f"{sources[which][0]}: {name} {value.shape} vs {variable.path} {shape}"
            )
        variable.assign(transform.to_ours(value, shape))
    return pretrainer
