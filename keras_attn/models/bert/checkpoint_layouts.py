"""How each encoder family's Hugging Face checkpoint maps onto `BertBackbone`.

BERT, ELECTRA, ALBERT and DistilBERT are one architecture (post-LN encoder blocks over
learned token, segment and position embeddings) under four namings and configurations.
A `Layout` holds, for one `model_type`, the configuration keys (-> `BertBackbone`
arguments) and the table of checkpoint names for the backbone's variables, each with the
`Transform` from the torch layout (Linear weights `(out, in)`) to ours and back.
"""

import dataclasses
import typing

from keras_attn.checkpoints import BIAS, IDENTITY, LINEAR, Linear, dense, norm
from keras_attn.errors import UserInputError
from keras_attn.models.bert import checkpoint_configs as configs


@dataclasses.dataclass(frozen=True)
class Layout:
    """One family's checkpoint: names, configuration keys, what it lacks.

    Attributes:
        model_type: the `model_type` of its `config.json`.
        prefix: what the task models put before the backbone's names (`electra.`).
        kwargs: configuration dict -> `BertBackbone` arguments.
        table: backbone -> `[(variable, checkpoint name, Transform)]`.
        zeroed: backbone -> the variables the family does not have and that must add
            nothing (DistilBERT's segment embedding): they load as zeros.
        pooler: whether the checkpoint holds the tanh pooler (`pooled_dense`); ELECTRA
            and DistilBERT do not, and it keeps its initialisation.
    """

    model_type: str
    prefix: str
    kwargs: typing.Callable
    table: typing.Callable
    zeroed: typing.Callable = lambda backbone: []
    pooler: bool = True


def _embeddings(backbone, segments=True):
    table = [
        (backbone.token_embedding.embeddings, "embeddings.word_embeddings.weight", IDENTITY),
        (
            backbone.position_embedding.position_embeddings,
            "embeddings.position_embeddings.weight",
            IDENTITY,
        ),
    ]
    if segments:
        table.append(
            (
                backbone.segment_embedding.embeddings,
                "embeddings.token_type_embeddings.weight",
                IDENTITY,
            )
        )
    return table + norm(backbone.embeddings_layer_norm, "embeddings.LayerNorm")


def _block(block, names):
    """A block's variables under `names`: query, key, value, attention output, its norm,
    the feed-forward's two dense layers and its norm."""
    attention = block.self_attention
    table = []
    for dense_layer, name in zip(
        (attention.query_dense, attention.key_dense, attention.value_dense),
        names[:3],
        strict=True,
    ):
        table += [
            (dense_layer.kernel, f"{name}.weight", LINEAR),
            (dense_layer.bias, f"{name}.bias", BIAS),
        ]
    table += [
        (attention.output_dense.kernel, f"{names[3]}.weight", Linear(in_axes=2)),
        (attention.output_dense.bias, f"{names[3]}.bias", IDENTITY),
    ]
    table += norm(block.self_attention_layer_norm, names[4])
    table += dense(block.feedforward_intermediate_dense, names[5])
    table += dense(block.feedforward_output_dense, names[6])
    return table + norm(block.feedforward_layer_norm, names[7])


def _bert_block_names(prefix):
    return (
        f"{prefix}.attention.self.query",
        f"{prefix}.attention.self.key",
        f"{prefix}.attention.self.value",
        f"{prefix}.attention.output.dense",
        f"{prefix}.attention.output.LayerNorm",
        f"{prefix}.intermediate.dense",
        f"{prefix}.output.dense",
        f"{prefix}.output.LayerNorm",
    )


def _bert_table(backbone):
    table = _embeddings(backbone)
    for i, block in enumerate(backbone.transformer_layers):
        table += _block(block, _bert_block_names(f"encoder.layer.{i}"))
    return table + dense(backbone.pooled_dense, "pooler.dense")


def _electra_table(backbone):
    table = _embeddings(backbone)
    if backbone.embedding_projection is not None:
        table += dense(backbone.embedding_projection, "embeddings_project")
    for i, block in enumerate(backbone.transformer_layers):
        table += _block(block, _bert_block_names(f"encoder.layer.{i}"))
    return table


def _albert_table(backbone):
    table = _embeddings(backbone) + dense(
        backbone.embedding_projection, "encoder.embedding_hidden_mapping_in"
    )
    layer = "encoder.albert_layer_groups.0.albert_layers.0"
    table += _block(
        backbone.transformer_layers[0],  # one block, shared by every layer
        (
            f"{layer}.attention.query",
            f"{layer}.attention.key",
            f"{layer}.attention.value",
            f"{layer}.attention.dense",
            f"{layer}.attention.LayerNorm",
            f"{layer}.ffn",
            f"{layer}.ffn_output",
            f"{layer}.full_layer_layer_norm",
        ),
    )
    return table + dense(backbone.pooled_dense, "pooler")


def _distilbert_table(backbone):
    table = _embeddings(backbone, segments=False)
    for i, block in enumerate(backbone.transformer_layers):
        prefix = f"transformer.layer.{i}"
        table += _block(
            block,
            (
                f"{prefix}.attention.q_lin",
                f"{prefix}.attention.k_lin",
                f"{prefix}.attention.v_lin",
                f"{prefix}.attention.out_lin",
                f"{prefix}.sa_layer_norm",
                f"{prefix}.ffn.lin1",
                f"{prefix}.ffn.lin2",
                f"{prefix}.output_layer_norm",
            ),
        )
    return table


LAYOUTS = {
    "bert": Layout("bert", "bert.", configs.bert_kwargs, _bert_table),
    "electra": Layout("electra", "electra.", configs.electra_kwargs, _electra_table, pooler=False),
    "albert": Layout("albert", "albert.", configs.albert_kwargs, _albert_table),
    "distilbert": Layout(
        "distilbert",
        "distilbert.",
        configs.distilbert_kwargs,
        _distilbert_table,
        zeroed=lambda backbone: [backbone.segment_embedding.embeddings],
        pooler=False,
    ),
}


def layout(config):
    """The `Layout` of a configuration (no `model_type`: BERT, as old and TF1 configs)."""
    model_type = config.get("model_type", "bert")
    if model_type not in LAYOUTS:
        raise UserInputError(
            f"Expected model_type in {sorted(LAYOUTS)} (the encoders BertBackbone reads). "
            f"Received: model_type={model_type!r}"
        )
    return LAYOUTS[model_type]
