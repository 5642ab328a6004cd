"""Reads BERT checkpoints (Hugging Face or original Google TF1 layout) into BertBackbone.

Both layouts are first brought to one naming, Hugging Face's, with Linear weights
as `(out, in)` like torch; then one table maps those names onto our variables.
"""

import json
import pathlib
import re
import warnings

import numpy as np

from keras_attn.errors import UserInputError
from keras_attn.layers.activations import gelu_approximate

# Buffers that are stored with the weights but are not parameters.
_BUFFERS = ("embeddings.position_ids",)


class CheckpointError(UserInputError):
    """A checkpoint folder whose files cannot be read or do not fit; names the file."""


class CheckpointFileNotFound(CheckpointError, FileNotFoundError):
    """A checkpoint folder without the files of either layout."""


def _read_json(file):
    try:
        config = json.loads(file.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise CheckpointError(f"{file}: not a JSON configuration ({error})") from None
    if not isinstance(config, dict):
        raise CheckpointError(f"{file}: expected a JSON object of configuration keys")
    return config


def _read_weights(file, read):
    """`read(file)`, with any parser's error turned into one that names the file."""
    try:
        return read(file)
    except (ImportError, CheckpointError):
        raise
    except Exception as error:  # each format's parser has its own exception types
        raise CheckpointError(
            f"{file}: cannot read the weights ({type(error).__name__}: {error}); "
            "the file may be truncated or not a checkpoint"
        ) from None


def read_checkpoint(path):
    """Returns `(config, tensors)`: the model config and name -> numpy array.

    Names follow Hugging Face (`encoder.layer.0.attention.self.query.weight`),
    without a leading `bert.`; Linear weights are `(out, in)`.
    """
    path = pathlib.Path(path)
    if not path.is_dir():
        raise CheckpointFileNotFound(f"Expected a checkpoint folder. Received: path={str(path)!r}")
    if (path / "config.json").exists():
        config = _read_json(path / "config.json")
        if (path / "model.safetensors").exists():
            from safetensors.numpy import load_file

            tensors = _read_weights(path / "model.safetensors", lambda file: load_file(str(file)))
        elif (path / "pytorch_model.bin").exists():
            tensors = _read_weights(path / "pytorch_model.bin", _read_torch_bin)
        else:
            raise CheckpointFileNotFound(
                f"Found config.json but no model.safetensors or pytorch_model.bin in {path}"
            )
        tensors = {_strip_prefix(name): value for name, value in tensors.items()}
    elif (path / "bert_config.json").exists():
        config = _read_json(path / "bert_config.json")
        tensors = _read_tf1(path)
    else:
        raise CheckpointFileNotFound(
            "Expected config.json (Hugging Face layout) or bert_config.json (TF1 layout) "
            f"in {path}. Found: {sorted(p.name for p in path.iterdir())}"
        )
    return config, tensors


def _strip_prefix(name):
    return name[len("bert.") :] if name.startswith("bert.") else name


def _read_torch_bin(file):
    try:
        import torch
    except ImportError as error:
        raise ImportError(
            f"Reading {file.name} needs torch (`pip install torch`); a model.safetensors "
            "file does not."
        ) from error
    state = torch.load(str(file), map_location="cpu", weights_only=True)
    return {
        name: value.float().numpy() if value.is_floating_point() else value.numpy()
        for name, value in state.items()
    }


def _read_tf1(path):
    import tensorflow as tf

    indexes = sorted(path.glob("*.ckpt*.index"))
    if not indexes:
        raise CheckpointFileNotFound(f"Found bert_config.json but no *.ckpt*.index file in {path}")

    def read(index):
        reader = tf.train.load_checkpoint(str(index)[: -len(".index")])
        return {
            _tf1_name(name): _tf1_value(name, reader.get_tensor(name))
            for name in reader.get_variable_to_shape_map()
        }

    return _read_weights(indexes[0], read)


def _tf1_name(name):
    """`bert/encoder/layer_0/attention/self/query/kernel` -> HF naming; others unchanged."""
    if not name.startswith("bert/") or name.endswith(("adam_m", "adam_v")):
        return name
    name = re.sub(r"layer_(\d+)", r"layer.\1", name[len("bert/") :])
    name = re.sub(r"/(gamma|kernel)$", "/weight", name)
    name = re.sub(r"/beta$", "/bias", name)
    if name.startswith("embeddings/") and name.count("/") == 1 and "LayerNorm" not in name:
        name += "/weight"  # embedding tables have no /kernel suffix in TF1
    return name.replace("/", ".")


def _tf1_value(name, value):
    return value.T if name.endswith("/kernel") and value.ndim == 2 else value


def backbone_kwargs(config):
    """Maps a BERT config (HF or TF1 keys) to `BertBackbone` arguments."""
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise CheckpointError(
            "Only absolute position embeddings are supported. Received: "
            f"position_embedding_type={config['position_embedding_type']!r}"
        )
    activations = {
        "gelu": "gelu",
        "relu": "relu",
        "gelu_new": gelu_approximate,
        "gelu_pytorch_tanh": gelu_approximate,
    }
    hidden_act = config.get("hidden_act", "gelu")
    if hidden_act not in activations:
        raise CheckpointError(
            f"Expected hidden_act in {sorted(activations)}. Received: hidden_act={hidden_act!r}"
        )
    required = (
        "vocab_size",
        "num_hidden_layers",
        "num_attention_heads",
        "hidden_size",
        "intermediate_size",
    )
    missing = [key for key in required if not isinstance(config.get(key), int) or config[key] < 1]
    if missing:
        raise CheckpointError(
            f"Expected positive integers for {missing} in the configuration. "
            f"Received: { {key: config.get(key) for key in missing} }"
        )
    if config["hidden_size"] % config["num_attention_heads"]:
        raise CheckpointError(
            f"Expected hidden_size divisible by num_attention_heads. Received: "
            f"hidden_size={config['hidden_size']}, "
            f"num_attention_heads={config['num_attention_heads']}"
        )
    return dict(
        vocabulary_size=config["vocab_size"],
        num_layers=config["num_hidden_layers"],
        num_heads=config["num_attention_heads"],
        hidden_dim=config["hidden_size"],
        intermediate_dim=config["intermediate_size"],
        max_sequence_length=config.get("max_position_embeddings", 512),
        num_segments=config.get("type_vocab_size", 2),
        dropout=config.get("hidden_dropout_prob", 0.1),
        activation=activations[hidden_act],
        layer_norm_epsilon=config.get("layer_norm_eps", 1e-12),
        initializer_range=config.get("initializer_range", 0.02),
    )


def weight_table(backbone):
    """(variable, checkpoint name, transform from the HF `(out, in)` layout) triples."""
    heads, hidden = backbone.num_heads, backbone.hidden_dim
    head_dim = hidden // heads
    table = [
        (backbone.token_embedding.embeddings, "embeddings.word_embeddings.weight", None),
        (backbone.segment_embedding.embeddings, "embeddings.token_type_embeddings.weight", None),
        (
            backbone.position_embedding.position_embeddings,
            "embeddings.position_embeddings.weight",
            None,
        ),
    ]
    table += _norm(backbone.embeddings_layer_norm, "embeddings.LayerNorm")
    for i, block in enumerate(backbone.transformer_layers):
        prefix = f"encoder.layer.{i}"
        attention = block.self_attention
        for dense, name in (
            (attention.query_dense, "query"),
            (attention.key_dense, "key"),
            (attention.value_dense, "value"),
        ):
            table += [
                (
                    dense.kernel,
                    f"{prefix}.attention.self.{name}.weight",
                    lambda w: w.T.reshape(hidden, heads, head_dim),
                ),
                (
                    dense.bias,
                    f"{prefix}.attention.self.{name}.bias",
                    lambda b: b.reshape(heads, head_dim),
                ),
            ]
        table += [
            (
                attention.output_dense.kernel,
                f"{prefix}.attention.output.dense.weight",
                lambda w: w.T.reshape(heads, head_dim, hidden),
            ),
            (attention.output_dense.bias, f"{prefix}.attention.output.dense.bias", None),
        ]
        table += _norm(block.self_attention_layer_norm, f"{prefix}.attention.output.LayerNorm")
        table += _dense(block.feedforward_intermediate_dense, f"{prefix}.intermediate.dense")
        table += _dense(block.feedforward_output_dense, f"{prefix}.output.dense")
        table += _norm(block.feedforward_layer_norm, f"{prefix}.output.LayerNorm")
    table += _dense(backbone.pooled_dense, "pooler.dense")
    return table


def _dense(layer, name):
    return [(layer.kernel, f"{name}.weight", lambda w: w.T), (layer.bias, f"{name}.bias", None)]


def _norm(layer, name):
    return [(layer.gamma, f"{name}.weight", None), (layer.beta, f"{name}.bias", None)]


def load_weights(backbone, tensors):
    """Assigns every backbone variable from `tensors`; returns the unused names.

    Raises a ValueError naming every missing tensor or mismatched shape.
    """
    if backbone.share_layers or backbone.embedding_dim or backbone.norm_first:
        raise ValueError(
            "BERT checkpoints hold post-LN, unshared, unfactorised weights. Received a "
            f"backbone with share_layers={backbone.share_layers}, "
            f"embedding_dim={backbone.embedding_dim}, norm_first={backbone.norm_first}"
        )
    table = weight_table(backbone)
    missing = [name for _, name, _ in table if name not in tensors]
    if missing:
        raise CheckpointError(f"Checkpoint lacks {len(missing)} backbone weight(s): {missing}")
    problems, values = [], []
    for variable, name, transform in table:
        value = np.asarray(tensors[name], "float32")
        try:
            value = transform(value) if transform else value
        except ValueError:  # a reshape to the backbone's heads that cannot be done
            value = None
        if value is None or tuple(value.shape) != tuple(variable.shape):
            problems.append(
                f"{name} {tuple(tensors[name].shape)} vs {variable.path} {tuple(variable.shape)}"
            )
        values.append(value)
    if problems:
        shown = "; ".join(problems[:6]) + (
            f"; ... ({len(problems)} in all)" if len(problems) > 6 else ""
        )
        raise CheckpointError(
            "Checkpoint shapes do not fit the backbone its configuration describes: " + shown
        )
    for (variable, _, _), value in zip(table, values, strict=True):
        variable.assign(value)
    used = {name for _, name, _ in table} | set(_BUFFERS)
    return sorted(set(tensors) - used)


def load_backbone(cls, path, **overrides):
    """`BertBackbone.from_pretrained`: config and weights from a checkpoint folder."""
    config, tensors = read_checkpoint(path)
    config_file = pathlib.Path(path) / (
        "config.json" if (pathlib.Path(path) / "config.json").exists() else "bert_config.json"
    )
    try:
        kwargs = backbone_kwargs(config)
        kwargs.update(overrides)
        backbone = cls(**kwargs)  # a ValueError here names a configuration value
        unused = load_weights(backbone, tensors)
    except ValueError as error:
        raise CheckpointError(f"{config_file}: {error}") from None
    if unused:
        shown = ", ".join(unused[:12]) + (
            f", ... ({len(unused)} in all)" if len(unused) > 12 else ""
        )
        warnings.warn(f"Checkpoint variables not used by {cls.__name__}: {shown}", stacklevel=3)
    backbone.unused_checkpoint_variables = unused
    return backbone
