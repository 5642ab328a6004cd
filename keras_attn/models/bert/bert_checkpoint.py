"""Reads encoder checkpoints (Hugging Face BERT, ELECTRA, ALBERT, DistilBERT, or an
original Google TF1 BERT) into BertBackbone.

Both file layouts are first brought to one naming, Hugging Face's, with Linear weights
as `(out, in)` like torch; then the family's table (`checkpoint_layouts`, chosen by the
configuration's `model_type`) maps those names onto our variables.
"""

import json
import pathlib
import re

import numpy as np

from keras_attn.checkpoints import (
    CheckpointError,
    CheckpointFileNotFound,
    assign,
    config_file,
    exported_tensors,
    read_hf_folder,
    read_json,
    read_weights,
    warn_unused,
    write_hf_folder,
)
from keras_attn.models.bert import checkpoint_configs, checkpoint_layouts

# Buffers that are stored with the weights but are not parameters.
_BUFFERS = ("embeddings.position_ids",)


def read_checkpoint(path):
    """Returns `(config, tensors)`: the model config and name -> numpy array.

    Names follow Hugging Face (`encoder.layer.0.attention.self.query.weight`),
    without a leading `bert.`; Linear weights are `(out, in)`.
    """
    path = pathlib.Path(path)
    if path.is_dir() and not (path / "config.json").exists():
        if (path / "bert_config.json").exists():
            config = read_json(path / "bert_config.json")
            return config, _read_tf1(path, config)
        raise CheckpointFileNotFound(
            "Expected config.json (Hugging Face layout) or bert_config.json (TF1 layout) "
            f"in {path}. Found: {sorted(p.name for p in path.iterdir())}"
        )
    config, tensors = read_hf_folder(path)
    known = checkpoint_layouts.LAYOUTS.get(config.get("model_type", "bert"))
    prefix = known.prefix if known else ""  # an unknown model_type is named later
    tensors = {_strip_prefix(name, prefix): value for name, value in tensors.items()}
    return config, tensors


def read_config(path):
    """The configuration of a checkpoint folder (Hugging Face's or TF1's), no weights."""
    if not pathlib.Path(path).is_dir():
        raise CheckpointFileNotFound(f"Expected a checkpoint folder. Received: path={str(path)!r}")
    return read_json(config_file(path))


def _strip_prefix(name, prefix):
    """Task models' names (`electra.encoder...`) -> the bare model's (`encoder...`)."""
    return name[len(prefix) :] if prefix and name.startswith(prefix) else name


def _read_tf1(path, config):
    """The TF1 checkpoint's tensors, once `config`'s sizes are checked against the
    shapes its index lists (no tensor read before)."""
    from keras_attn.checkpoints.sizes import check_sizes
    from keras_attn.requirements import require_tensorflow

    tf = require_tensorflow("Reading a TF1 BERT checkpoint (bert_model.ckpt)")

    indexes = sorted(path.glob("*.ckpt*.index"))
    if not indexes:
        raise CheckpointFileNotFound(f"Found bert_config.json but no *.ckpt*.index file in {path}")

    def read(index):
        reader = tf.train.load_checkpoint(str(index)[: -len(".index")])
        shapes = reader.get_variable_to_shape_map()
        check_sizes(config, shapes, "bert_config.json", index)
        return {_tf1_name(name): _tf1_value(name, reader.get_tensor(name)) for name in shapes}

    return read_weights(indexes[0], read)


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
    """Maps a configuration (HF keys of its `model_type`, or TF1 BERT's) to `BertBackbone`
    arguments."""
    return checkpoint_layouts.layout(config).kwargs(config)


def load_weights(backbone, tensors, layout):
    """Assigns every backbone variable from `tensors` (names of `layout`); returns the
    unused names. What the family lacks (DistilBERT's segments) is set to zeros.

    Raises a ValueError naming every missing tensor or mismatched shape.
    """
    if backbone.norm_first:
        raise ValueError(
            "Encoder checkpoints hold post-LN weights. Received a backbone with norm_first=True"
        )
    _check_one_set_per_layer(backbone, layout)
    table = layout.table(backbone)
    _check_covered(backbone, table, layout)
    assign(table, tensors)
    for variable in layout.zeroed(backbone):
        variable.assign(np.zeros(variable.shape, variable.dtype))
    used = {name for _, name, _ in table} | set(_BUFFERS)
    return sorted(set(tensors) - used)


def _check_one_set_per_layer(backbone, layout, shared_weights=False):
    """Hugging Face's encoders hold a block per layer, or ALBERT's one shared block."""
    if shared_weights or backbone.share_layers in ("attention", "feedforward"):
        raise ValueError(
            f"A {layout.model_type} checkpoint holds one set of weights per layer (ALBERT: one "
            f"shared block); received a backbone with share_layers={backbone.share_layers!r}"
        )


def _check_covered(backbone, table, layout, hint="leave out the overrides it does not have"):
    """Every backbone variable is loaded once (or zeroed, or is a pooler the family
    lacks): an override the checkpoint does not have (`share_layers=True` for BERT,
    an `embedding_dim`) would otherwise leave weights random or overwritten."""
    loaded = [id(variable) for variable, _, _ in table]
    if len(set(loaded)) != len(loaded):
        _check_one_set_per_layer(backbone, layout, shared_weights=True)
    covered = set(loaded) | {id(v) for v in layout.zeroed(backbone)}
    if not layout.pooler:
        covered |= {id(v) for v in backbone.pooled_dense.weights}
    left = [v.path for v in backbone.weights if id(v) not in covered]
    if left:
        raise ValueError(
            f"A {layout.model_type} checkpoint has no weights for {left[:4]}"
            + (f" ({len(left)} in all)" if len(left) > 4 else "")
            + f"; {hint} (embedding_dim, share_layers)"
        )


def load_backbone(cls, path, **overrides):
    """`BertBackbone.from_pretrained`: config and weights from a checkpoint folder."""
    backbone, _, unused = backbone_and_tensors(cls, path, **overrides)
    warn_unused(cls, unused)
    return backbone


def backbone_and_tensors(cls, path, **overrides):
    """`(backbone, tensors, unused names)`: the backbone loaded from `path`, with the
    checkpoint's tensors for the heads that task models load themselves."""
    config, tensors = read_checkpoint(path)
    try:
        layout = checkpoint_layouts.layout(config)
        kwargs = layout.kwargs(config)
        kwargs.update(overrides)
        backbone = cls(**kwargs)  # a ValueError here names a configuration value
        unused = load_weights(backbone, tensors, layout)
    except ValueError as error:
        raise CheckpointError(f"{config_file(path)}: {error}") from None
    backbone.unused_checkpoint_variables = unused
    return backbone, tensors, unused


def default_model_type(backbone):
    """ALBERT for shared layers, ELECTRA for a factorised embedding, else BERT."""
    if backbone.share_layers != "none":
        return "albert"
    return "electra" if backbone.embedding_dim else "bert"


def save_backbone(backbone, folder, model_type=None, tokenizer=None, head=None):
    """`BertBackbone.save_pretrained`: the Hugging Face layout of `model_type`; `head`
    (`(config entries, tensors)`, a task model's) puts the backbone's tensors under the
    base model's prefix (`bert.`) beside the head's."""
    import keras

    model_type = model_type or default_model_type(backbone)
    if model_type not in checkpoint_layouts.LAYOUTS:
        raise ValueError(
            f"Expected model_type in {sorted(checkpoint_layouts.LAYOUTS)}. "
            f"Received: model_type={model_type!r}"
        )
    if backbone.score != "scaled_dot" or backbone.norm_first:
        raise ValueError(
            "Hugging Face's encoders are post-LN with scaled dot-product attention. Received: "
            f"score={backbone.score!r}, norm_first={backbone.norm_first}"
        )
    layout = checkpoint_layouts.LAYOUTS[model_type]
    _check_one_set_per_layer(backbone, layout)
    table = layout.table(backbone)
    _check_covered(backbone, table, layout, hint="choose the model_type that has them")
    for variable in layout.zeroed(backbone):
        if np.any(keras.ops.convert_to_numpy(variable)):
            raise ValueError(
                f"{model_type} has no {variable.path}; this backbone's is not zero "
                "(it was trained with segments): save it as model_type='bert'"
            )
    to_config, architecture, tokenizer_class = checkpoint_configs.CONFIG_WRITERS[model_type]
    config = {**to_config(backbone), "model_type": model_type, "architectures": [architecture]}
    tensors = exported_tensors(table)
    if head is not None:
        entries, head_tensors = head
        config.update(entries)
        tensors = {**exported_tensors(table, prefix=f"{model_type}."), **head_tensors}
    folder = write_hf_folder(folder, config, tensors)
    if tokenizer is not None:
        from keras_attn.data.wordpiece_tokenizer import write_vocabulary

        if tokenizer_class is None:
            raise ValueError(
                f"{model_type} tokenizes with SentencePiece, not a WordPiece vocabulary"
            )
        write_vocabulary(tokenizer.vocabulary, folder / "vocab.txt")
        (folder / "tokenizer_config.json").write_text(
            json.dumps(
                {
                    "tokenizer_class": tokenizer_class,
                    "do_lower_case": tokenizer.lowercase,
                    "model_max_length": backbone.max_sequence_length,
                },
                indent=2,
            )
            + "\n",
            encoding="utf-8",
        )
    return folder


def save_classifier(classifier, folder, tokenizer=None, labels=None):
    """`BertClassifier.save_pretrained`: `transformers`' `BertForSequenceClassification`
    layout (the tanh pooler on `[CLS]`, then `classifier`)."""
    import keras

    if classifier.pooling != "cls":
        raise ValueError(
            "Expected pooling='cls': BertForSequenceClassification classifies the pooled "
            f"[CLS] output. Received: pooling={classifier.pooling!r}"
        )
    names = [str(i) for i in range(classifier.num_classes)] if labels is None else list(labels)
    if len(names) != classifier.num_classes:
        raise ValueError(
            f"Expected `labels` to name the {classifier.num_classes} classes. Received: "
            f"{len(names)} names"
        )
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in classifier.output_dense.weights)
    entries = {
        "architectures": ["BertForSequenceClassification"],
        "id2label": dict(enumerate(names)),
        "label2id": {name: i for i, name in enumerate(names)},
        "classifier_dropout": classifier.dropout,
    }
    tensors = {"classifier.weight": kernel.T.astype("float32"), "classifier.bias": bias}
    return save_backbone(classifier.backbone, folder, "bert", tokenizer, head=(entries, tensors))
