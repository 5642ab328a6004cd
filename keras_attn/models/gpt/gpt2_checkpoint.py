"""GPT-2 checkpoints (the Hugging Face layout) in and out of `GPTLanguageModel`.

GPT-2 is our pre-LN decoder with learned positions, an unscaled token embedding tied
to the output, and the tanh GELU. Its checkpoint differs in naming and in two layouts:
`Conv1D` weights are `(in, out)` (not torch Linear's `(out, in)`), and the query, key
and value projections are one fused `c_attn` (`(hidden, 3 * hidden)`, in that order),
split here into three tensors on reading and joined again on writing. Names are
GPT2Model's (`h.0.attn.c_attn.weight`); GPT2LMHeadModel's (`transformer.` before them,
`lm_head.weight` tied to `wte`) read the same.
"""

import dataclasses
import math
import pathlib
import re

import numpy as np

from keras_attn.checkpoints import (
    BIAS,
    IDENTITY,
    CheckpointError,
    Transform,
    activation,
    assign,
    config_file,
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
# Stored with the weights by some versions, not parameters: the causal-mask buffers.
_BUFFERS = re.compile(r"h\.\d+\.attn\.(bias|masked_bias)$")


@dataclasses.dataclass(frozen=True)
class Conv1D(Transform):
    """GPT-2's `Conv1D` weight `(in, out)`: ours `(in..., out...)` reshaped, the first
    `in_axes` axes being the input (2 for the attention output, split per head)."""

    in_axes: int = 1

    def theirs_shape(self, shape):
        return (math.prod(shape[: self.in_axes]), math.prod(shape[self.in_axes :]))


CONV1D = Conv1D()


def _conv(layer, name):
    return [(layer.kernel, f"{name}.weight", CONV1D), (layer.bias, f"{name}.bias", IDENTITY)]


def table(model):
    """`[(variable, checkpoint name, Transform)]` for every variable of `model`; the
    fused `c_attn` appears as `c_attn.{q,k,v}.{weight,bias}`."""
    rows = [
        (model.token_embedding.embeddings, "wte.weight", IDENTITY),
        (model.position_embedding.position_embeddings, "wpe.weight", IDENTITY),
    ]
    for i, block in enumerate(model.transformer_layers):
        attention, prefix = block.self_attention, f"h.{i}"
        rows += norm(block.self_attention_layer_norm, f"{prefix}.ln_1")
        for dense, part in zip(
            (attention.query_dense, attention.key_dense, attention.value_dense), "qkv", strict=True
        ):
            rows += [
                (dense.kernel, f"{prefix}.attn.c_attn.{part}.weight", CONV1D),
                (dense.bias, f"{prefix}.attn.c_attn.{part}.bias", BIAS),
            ]
        rows += [
            (attention.output_dense.kernel, f"{prefix}.attn.c_proj.weight", Conv1D(in_axes=2)),
            (attention.output_dense.bias, f"{prefix}.attn.c_proj.bias", IDENTITY),
        ]
        rows += norm(block.feedforward_layer_norm, f"{prefix}.ln_2")
        rows += _conv(block.feedforward_intermediate_dense, f"{prefix}.mlp.c_fc")
        rows += _conv(block.feedforward_output_dense, f"{prefix}.mlp.c_proj")
    return rows + norm(model.final_layer_norm, "ln_f")


def model_kwargs(config):
    """A GPT-2 `config.json` -> `GPTLanguageModel` arguments (a ValueError names a key
    we cannot honour)."""
    if config.get("model_type") != "gpt2":
        raise UserInputError(
            "Expected model_type 'gpt2' (the decoder GPTLanguageModel reads). "
            f"Received: model_type={config.get('model_type')!r}"
        )
    vocabulary, layers, heads, hidden, positions = positive_ints(
        config, ("vocab_size", "n_layer", "n_head", "n_embd", "n_positions")
    )
    if hidden % heads:
        raise UserInputError(
            f"Expected n_embd divisible by n_head. Received: n_embd={hidden}, n_head={heads}"
        )
    unsupported = {
        "scale_attn_weights": (config.get("scale_attn_weights", True), True),
        "scale_attn_by_inverse_layer_idx": (
            config.get("scale_attn_by_inverse_layer_idx", False),
            False,
        ),
        "add_cross_attention": (config.get("add_cross_attention", False), False),
        "tie_word_embeddings": (config.get("tie_word_embeddings", True), True),
    }
    bad = {key: value for key, (value, wanted) in unsupported.items() if value != wanted}
    if bad:
        raise UserInputError(
            "Expected GPT-2's attention scaled by 1/sqrt(head size), no cross-attention and "
            f"an output tied to the token embedding. Received: {bad}"
        )
    # GPT-2 has no padding token; transformers' users pad with the end token too. Small
    # test configurations keep GPT-2's 50256 for a smaller vocabulary: then 0.
    pad = config.get("pad_token_id")
    if pad is None:
        pad = config.get("eos_token_id")
    if not isinstance(pad, int) or not 0 <= pad < vocabulary:
        pad = 0
    return dict(
        vocabulary_size=vocabulary,
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=config.get("n_inner") or 4 * hidden,
        max_sequence_length=positions,
        dropout=config.get("resid_pdrop", 0.1),
        norm_first=True,
        position_embedding="learned",
        activation=activation(config, "activation_function"),
        layer_norm_epsilon=config.get("layer_norm_epsilon", 1e-5),
        pad_token_id=pad,
        scale_embeddings=False,
    )


def _split_attention(tensors):
    """Each fused `c_attn` weight and bias -> its query, key and value parts."""
    split = {}
    for name, value in tensors.items():
        match = re.fullmatch(r"(h\.\d+\.attn\.c_attn)\.(weight|bias)", name)
        if match is None:
            split[name] = value
            continue
        if value.shape[-1] % 3:
            raise UserInputError(f"{name}: expected a last axis of 3 x n_embd, got {value.shape}")
        for part, piece in zip("qkv", np.split(np.asarray(value), 3, axis=-1), strict=True):
            split[f"{match[1]}.{part}.{match[2]}"] = piece
    return split


def load_model(cls, path, **overrides):
    """`GPTLanguageModel.from_pretrained`: configuration and weights from a folder."""
    config, tensors = read_hf_folder(path)
    tensors = {name.removeprefix(PREFIX): value for name, value in tensors.items()}
    head = tensors.pop("lm_head.weight", None)
    try:
        kwargs = model_kwargs(config)
        kwargs.update(overrides)
        model = cls(**kwargs)
        if (
            not model.norm_first
            or model.scale_embeddings
            or model.position_embedding_type != ("learned")
        ):
            raise ValueError(
                "GPT-2's weights need norm_first=True, scale_embeddings=False and "
                "position_embedding='learned'; leave those overrides out"
            )
        if head is not None and "wte.weight" in tensors:
            if not np.array_equal(np.asarray(head), np.asarray(tensors["wte.weight"])):
                raise ValueError("lm_head.weight differs from wte.weight (an untied output head)")
        tensors = _split_attention(tensors)
        rows = table(model)
        assign(rows, tensors, "GPT-2 weight(s)", "GPTLanguageModel")
    except ValueError as error:
        raise CheckpointError(f"{config_file(path)}: {error}") from None
    used = {name for _, name, _ in rows}
    warn_unused(cls, sorted(n for n in tensors if n not in used and not _BUFFERS.fullmatch(n)))
    return model


def model_config(model):
    """`GPTLanguageModel` -> a GPT-2 `config.json` (a ValueError names what GPT-2 lacks)."""
    problems = {
        key: value
        for key, value, wanted in (
            ("norm_first", model.norm_first, True),
            ("score", model.score, "scaled_dot"),
            ("position_embedding", model.position_embedding_type, "learned"),
            ("scale_embeddings", model.scale_embeddings, False),
            ("num_key_value_heads", model.num_key_value_heads or model.num_heads, model.num_heads),
        )
        if value != wanted
    }
    if problems:
        raise ValueError(
            "GPT-2 is pre-LN with scaled dot-product attention (one key/value head per "
            "query head), learned positions and an unscaled token embedding. Received: "
            f"{problems}"
        )
    return {
        "model_type": "gpt2",
        "architectures": ["GPT2LMHeadModel"],
        "vocab_size": model.vocabulary_size,
        "n_positions": model.max_sequence_length,
        "n_embd": model.hidden_dim,
        "n_layer": model.num_layers,
        "n_head": model.num_heads,
        "n_inner": model.intermediate_dim,
        "activation_function": hf_activation(model),
        "resid_pdrop": model.dropout,
        "embd_pdrop": model.dropout,
        "attn_pdrop": model.dropout,
        "layer_norm_epsilon": model.layer_norm_epsilon,
        "initializer_range": 0.02,
        "scale_attn_weights": True,
        "tie_word_embeddings": True,
        "pad_token_id": model.pad_token_id,
    }


def save_model(model, folder, tokenizer=None):
    """`GPTLanguageModel.save_pretrained`: GPT2Model's names, `c_attn` fused again."""
    config = model_config(model)
    tensors = exported_tensors(table(model))
    for i in range(model.num_layers):
        for kind in ("weight", "bias"):
            parts = [tensors.pop(f"h.{i}.attn.c_attn.{part}.{kind}") for part in "qkv"]
            tensors[f"h.{i}.attn.c_attn.{kind}"] = np.concatenate(parts, axis=-1)
    folder = pathlib.Path(folder)
    if tokenizer is not None:
        from keras_attn.data.byte_pair import save_byte_pair_vocabulary

        folder.mkdir(parents=True, exist_ok=True)
        config.update(save_byte_pair_vocabulary(tokenizer, folder, model.max_sequence_length))
    return write_hf_folder(folder, config, tensors)
