"""Hugging Face `roberta` folders <-> `RobertaBackbone`.

RoBERTa's checkpoint is BERT's table of names (`checkpoint_layouts`) with two changes:
the position table holds `pad_token_id + 1` rows before the first position (Hugging
Face counts positions from after the padding index), and task models keep the pooler
out (`add_pooling_layer=False`), so it is loaded only when it is there.
"""

import numpy as np

from keras_attn.checkpoints import (
    CheckpointError,
    Transform,
    assign,
    config_file,
    exported_tensors,
    read_hf_folder,
    warn_unused,
    write_hf_folder,
)
from keras_attn.errors import UserInputError
from keras_attn.models.bert import LAYOUTS, bert_config, bert_kwargs

PREFIX = "roberta."
POSITIONS = "embeddings.position_embeddings.weight"
_BUFFERS = ("embeddings.position_ids", "embeddings.token_type_ids")


class _Offset(Transform):
    """Their position table: `offset` rows (never used for a real token), then ours."""

    def __init__(self, offset):
        self.offset = offset

    def theirs_shape(self, shape):
        return (shape[0] + self.offset, *shape[1:])

    def to_ours(self, value, shape):
        return value[self.offset :].reshape(shape)

    def to_theirs(self, value):
        return np.concatenate([np.zeros((self.offset, *value.shape[1:]), value.dtype), value])


def backbone_kwargs(config):
    """A `roberta` configuration -> `RobertaBackbone` arguments."""
    kwargs = bert_kwargs(config)
    padding = config.get("pad_token_id", 1)
    if isinstance(padding, bool) or not isinstance(padding, int) or padding < 0:
        raise UserInputError(f"Expected pad_token_id an int >= 0. Received: {padding!r}")
    positions = config.get("max_position_embeddings", 514) - (padding + 1)
    if positions < 1:
        raise UserInputError(
            f"Expected max_position_embeddings above pad_token_id + 1 = {padding + 1} "
            f"(RoBERTa's positions start after the padding index). Received: "
            f"{config.get('max_position_embeddings')}"
        )
    return {
        **kwargs,
        "max_sequence_length": positions,
        "num_segments": config.get("type_vocab_size", 1),
        "layer_norm_epsilon": config.get("layer_norm_eps", 1e-5),
        "padding_token_id": padding,
    }


def _table(backbone, pooler=True):
    """BERT's rows, the position table offset past the padding index."""
    offset = _Offset(backbone.padding_token_id + 1)
    table = [
        (variable, name, offset if name == POSITIONS else transform)
        for variable, name, transform in LAYOUTS["bert"].table(backbone)
    ]
    return table if pooler else [row for row in table if not row[1].startswith("pooler.")]


def _check_bert_shaped(backbone):
    if backbone.norm_first or backbone.share_layers != "none" or backbone.embedding_dim:
        raise ValueError(
            "RoBERTa is post-LN with one block per layer and unfactorised embeddings. "
            f"Received: norm_first={backbone.norm_first}, share_layers="
            f"{backbone.share_layers}, embedding_dim={backbone.embedding_dim}"
        )


def load_backbone(cls, path, **overrides):
    """`RobertaBackbone.from_pretrained`: configuration and weights of a folder."""
    config, tensors = read_hf_folder(path)
    if config.get("model_type") != "roberta":
        raise CheckpointError(
            f"{config_file(path)}: expected model_type 'roberta'. Received: "
            f"{config.get('model_type')!r}"
        )
    tensors = {
        name[len(PREFIX) :] if name.startswith(PREFIX) else name: value
        for name, value in tensors.items()
    }
    try:
        backbone = cls(**{**backbone_kwargs(config), **overrides})
        _check_bert_shaped(backbone)
        table = _table(backbone, pooler="pooler.dense.weight" in tensors)
        assign(table, tensors)
    except ValueError as error:
        raise CheckpointError(f"{config_file(path)}: {error}") from None
    used = {name for _, name, _ in table} | set(_BUFFERS)
    backbone.unused_checkpoint_variables = sorted(set(tensors) - used)
    warn_unused(cls, backbone.unused_checkpoint_variables)
    return backbone


def save_backbone(backbone, folder, model_type=None, tokenizer=None):
    """`RobertaBackbone.save_pretrained`: config, weights and the tokenizer's files."""
    if model_type not in (None, "roberta"):
        raise ValueError(
            f"A RobertaBackbone is written as model_type 'roberta'. Received: {model_type!r}"
        )
    if backbone.score != "scaled_dot":
        raise ValueError(
            f"RoBERTa's attention is scaled dot-product. Received: score={backbone.score!r}"
        )
    _check_bert_shaped(backbone)
    offset = backbone.padding_token_id + 1
    special = {"pad_token_id": backbone.padding_token_id, "bos_token_id": 0, "eos_token_id": 2}
    if tokenizer is not None:
        special = {
            "pad_token_id": tokenizer.pad_id,
            "bos_token_id": tokenizer.cls_id,
            "eos_token_id": tokenizer.sep_id,
        }
        if tokenizer.pad_id != backbone.padding_token_id:
            raise ValueError(
                f"The tokenizer's <pad> is id {tokenizer.pad_id}, the backbone's "
                f"padding_token_id {backbone.padding_token_id}: they must agree"
            )
    config = {
        **bert_config(backbone),
        "max_position_embeddings": backbone.max_sequence_length + offset,
        **special,
        "model_type": "roberta",
        "architectures": ["RobertaModel"],
    }
    folder = write_hf_folder(folder, config, exported_tensors(_table(backbone)))
    if tokenizer is not None:
        tokenizer.save_pretrained(folder, model_max_length=backbone.max_sequence_length)
    return folder
