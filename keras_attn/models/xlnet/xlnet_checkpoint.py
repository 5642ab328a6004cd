"""Hugging Face XLNet checkpoints in and out of `XLNetBackbone` (and the LM head's bias).

XLNet's attention weights are already per head, `(d_model, heads, head_dim)`, as our
`EinsumDense` kernels are, except the output projection `o`, used transposed
(`ibnd,hnd->ibh`). Names are XLNetModel's (`layer.0.rel_attn.q`); the task models put
`transformer.` before them, and XLNetLMHeadModel adds `lm_loss.bias` (its weight is
the word embedding).
"""

import dataclasses

import numpy as np

from keras_attn.checkpoints import (
    IDENTITY,
    CheckpointError,
    Transform,
    activation,
    assign,
    config_file,
    dense,
    exported_tensors,
    hf_activation,
    norm,
    positive_ints,
    read_hf_folder,
    warn_unused,
    write_hf_folder,
)
from keras_attn.errors import UserInputError

PREFIX = "transformer."
LM_BIAS = "lm_loss.bias"


@dataclasses.dataclass(frozen=True)
class Permuted(Transform):
    """A weight stored with its axes in another order: ours = theirs.transpose(axes)."""

    axes: tuple

    def theirs_shape(self, shape):
        inverse = np.argsort(self.axes)
        return tuple(shape[i] for i in inverse)

    def to_ours(self, value, shape):
        return value.transpose(self.axes).reshape(shape)

    def to_theirs(self, value):
        return value.transpose(np.argsort(self.axes))


@dataclasses.dataclass(frozen=True)
class Reshaped(Transform):
    """A weight stored with extra unit axes (`mask_emb`, `(1, 1, d_model)`)."""

    leading: int = 1

    def theirs_shape(self, shape):
        return (1,) * self.leading + tuple(shape)


def table(backbone):
    """`[(variable, checkpoint name, Transform)]` for every variable of `backbone`."""
    rows = [
        (backbone.token_embedding.embeddings, "word_embedding.weight", IDENTITY),
        (backbone.mask_embedding.embeddings, "mask_emb", Reshaped()),
    ]
    for i, block in enumerate(backbone.transformer_layers):
        prefix, attention = f"layer.{i}", block.self_attention
        rows += [
            (attention.query_dense.kernel, f"{prefix}.rel_attn.q", IDENTITY),
            (attention.key_dense.kernel, f"{prefix}.rel_attn.k", IDENTITY),
            (attention.value_dense.kernel, f"{prefix}.rel_attn.v", IDENTITY),
            (attention.position_dense.kernel, f"{prefix}.rel_attn.r", IDENTITY),
            (attention.output_dense.kernel, f"{prefix}.rel_attn.o", Permuted((1, 2, 0))),
            (attention.content_bias, f"{prefix}.rel_attn.r_w_bias", IDENTITY),
            (attention.position_bias, f"{prefix}.rel_attn.r_r_bias", IDENTITY),
            (attention.segment_bias, f"{prefix}.rel_attn.r_s_bias", IDENTITY),
            (attention.segment_embeddings, f"{prefix}.rel_attn.seg_embed", IDENTITY),
        ]
        rows += norm(block.self_attention_layer_norm, f"{prefix}.rel_attn.layer_norm")
        rows += dense(block.feedforward_intermediate_dense, f"{prefix}.ff.layer_1")
        rows += dense(block.feedforward_output_dense, f"{prefix}.ff.layer_2")
        rows += norm(block.feedforward_layer_norm, f"{prefix}.ff.layer_norm")
    return rows


def backbone_kwargs(config):
    """An XLNet `config.json` -> `XLNetBackbone` arguments (a ValueError names a
    setting we cannot honour)."""
    if config.get("model_type") != "xlnet":
        raise UserInputError(
            "Expected model_type 'xlnet' (the encoder XLNetBackbone reads). "
            f"Received: model_type={config.get('model_type')!r}"
        )
    vocabulary, layers, heads, hidden, inner = positive_ints(
        config, ("vocab_size", "n_layer", "n_head", "d_model", "d_inner")
    )
    settings = {
        "attn_type": (config.get("attn_type", "bi"), "bi"),
        "bi_data": (config.get("bi_data", False), False),
        "untie_r": (config.get("untie_r", True), True),
        "d_head": (config.get("d_head", hidden // heads), hidden // heads),
    }
    bad = {key: value for key, (value, wanted) in settings.items() if value != wanted}
    if hidden % heads or bad:
        raise UserInputError(
            "Expected XLNet's bidirectional attention (attn_type 'bi', bi_data false), "
            "each layer's own biases (untie_r true) and d_head = d_model / n_head. "
            f"Received: {bad or {'d_model': hidden, 'n_head': heads}}"
        )
    clamp = config.get("clamp_len", -1)
    return dict(
        vocabulary_size=vocabulary,
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=inner,
        dropout=config.get("dropout", 0.1),
        activation=activation(config, "ff_activation"),
        layer_norm_epsilon=config.get("layer_norm_eps", 1e-12),
        clamp_length=clamp if isinstance(clamp, int) and clamp > 0 else None,
        initializer_range=config.get("initializer_range", 0.02),
    )


def backbone_and_tensors(cls, path, **overrides):
    """`(backbone, tensors, unused names)` from a checkpoint folder."""
    config, tensors = read_hf_folder(path)
    tensors = {name.removeprefix(PREFIX): value for name, value in tensors.items()}
    try:
        kwargs = backbone_kwargs(config)
        kwargs.update(overrides)
        backbone = cls(**kwargs)
        rows = table(backbone)
        assign(rows, tensors, "XLNet weight(s)", "XLNetBackbone")
    except ValueError as error:
        raise CheckpointError(f"{config_file(path)}: {error}") from None
    used = {name for _, name, _ in rows}
    return backbone, tensors, sorted(name for name in tensors if name not in used)


def load_backbone(cls, path, **overrides):
    """`XLNetBackbone.from_pretrained`."""
    backbone, _, unused = backbone_and_tensors(cls, path, **overrides)
    warn_unused(cls, unused)
    return backbone


def load_classifier(cls, path, **kwargs):
    """`XLNetClassifier.from_pretrained`: an `XLNetForSequenceClassification` folder."""
    config, _ = read_hf_folder(path)
    backbone, tensors, unused = backbone_and_tensors(cls.backbone_cls, path)
    try:
        summary = (config.get("summary_type", "last"), config.get("summary_use_proj", True))
        activation = config.get("summary_activation", "tanh")
        if summary != ("last", True) or activation != "tanh":
            raise UserInputError(
                "Expected XLNet's sequence summary: the last token, projected, tanh. "
                f"Received: summary_type={summary[0]!r}, summary_use_proj={summary[1]}, "
                f"summary_activation={activation!r}"
            )
        head = tensors.get("logits_proj.weight")
        if head is None:
            raise UserInputError(
                "Expected an XLNetForSequenceClassification checkpoint (logits_proj.weight)"
            )
        model = cls(backbone, num_classes=head.shape[0], pooling="last", **kwargs)
        assign(
            dense(model.summary_dense, "sequence_summary.summary")
            + dense(model.output_dense, "logits_proj"),
            tensors,
            "classifier weight(s)",
            "XLNetClassifier",
        )
    except ValueError as error:
        raise CheckpointError(f"{config_file(path)}: {error}") from None
    return model


def backbone_config(backbone):
    """`XLNetBackbone` -> an XLNet `config.json`."""
    return {
        "model_type": "xlnet",
        "architectures": ["XLNetLMHeadModel"],
        "vocab_size": backbone.vocabulary_size,
        "d_model": backbone.hidden_dim,
        "n_layer": backbone.num_layers,
        "n_head": backbone.num_heads,
        "d_head": backbone.hidden_dim // backbone.num_heads,
        "d_inner": backbone.intermediate_dim,
        "ff_activation": hf_activation(backbone),
        "untie_r": True,
        "attn_type": "bi",
        "bi_data": False,
        "clamp_len": backbone.clamp_length or -1,
        "dropout": backbone.dropout,
        "layer_norm_eps": backbone.layer_norm_epsilon,
        "initializer_range": backbone.initializer_range,
        "mem_len": None,
        "reuse_len": None,
        "same_length": False,
    }


def save_backbone(backbone, folder, lm_bias=None):
    """Writes `config.json` and `model.safetensors` in XLNetLMHeadModel's names
    (`lm_bias`: the LM head's bias, zeros by default)."""
    config = backbone_config(backbone)
    tensors = exported_tensors(table(backbone), PREFIX)
    if lm_bias is None:
        lm_bias = np.zeros((backbone.vocabulary_size,), "float32")
    tensors[LM_BIAS] = np.asarray(lm_bias, "float32")
    tensors["lm_loss.weight"] = tensors[PREFIX + "word_embedding.weight"]
    return write_hf_folder(folder, config, tensors)
