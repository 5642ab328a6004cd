"""One registry of model families: what training, export and the CLI ask instead of
testing model classes.

A family lives in its own folder under `keras_attn/models/` and registers one `Family`
from its `__init__.py`: its backbone class, the task heads fine-tuning builds on that
backbone, its pre-training models, the Hugging Face `model_type`s its checkpoint code
reads, and what `keras-attn convert` needs to move it between `.keras` and a Hugging
Face folder. A model of any of those classes (or a subclass) finds its family through
`family_of`; `lookup` is the same walk over any table keyed by class (the export
signatures' table is one).

Example:

>>> from keras_attn.models import BertBackbone, registry
>>> registry.family_of(BertBackbone(100, 2, 2, 32, 64)).name
'bert'
>>> sorted(registry.family("xlnet").heads)
['classification']
"""

import dataclasses
import json
import pathlib
import typing

import numpy as np

from keras_attn.errors import UserInputError
from keras_attn.models.tokenizer_files import WORDPIECE, TokenizerFiles


@dataclasses.dataclass(frozen=True)
class HuggingFaceTwin:
    """How a family's model goes to and from a Hugging Face folder (`keras-attn convert`).

    Attributes:
        keras_file: the file name convert writes (`backbone.keras`, `model.keras`).
        tokenizer_files: the vocabulary files copied beside it, both ways.
        auto_class: the `transformers` class that loads the written folder.
        read_tokenizer: `folder -> tokenizer or None`, the tokenizer that
            `save_pretrained` writes from the files beside a `.keras` file.
        probe: `model -> inputs` on which a written and a reloaded model must agree.
        model_types: the `model_type`s `save_pretrained(model_type=...)` writes
            (empty: the family writes its own one).
    """

    keras_file: str
    tokenizer_files: tuple
    auto_class: str
    read_tokenizer: typing.Callable
    probe: typing.Callable
    model_types: tuple = ()


@dataclasses.dataclass(frozen=True)
class Pretraining:
    """One objective of `keras-attn pretrain --objective NAME`, as its family builds it.

    Attributes:
        model_cls: the pre-training model's class.
        sentence_pairs: the sentence-pair task the examples carry (`"nsp"`, `"sop"`,
            or `"none"`: single segments).
        examples: `(sampler, masker) -> (anchor, seed) -> example`, the tf.data
            example function (`keras_attn.data`'s, imported when called).
        build: `(settings, tokenizer, seed, piece_counts) -> (model, backbone)`, from
            the run's `model:` settings (`preset` size, `sequence_length`, `dropout`,
            ...); `piece_counts`: how often each vocabulary id occurs in the training
            documents (ELECTRA's diagnostics read the most frequent ones).
        masking: `(mask_token_rate, random_token_rate)` of the selected tokens (BERT:
            80% `[MASK]`, 10% a random token; ELECTRA: 85% `[MASK]`, none random).
        sampler_options: `(settings, tokenizer) -> dict` of `SentencePairSampler`
            keyword arguments (ERNIE: its `linker`), or `None`; an option with a
            `save_assets(folder)` method writes its files beside the trained model.
    """

    model_cls: type
    sentence_pairs: str
    examples: typing.Callable
    build: typing.Callable
    masking: tuple = (0.8, 0.1)
    sampler_options: typing.Optional[typing.Callable] = None


def next_token_targets(windows, pad_id):
    """A batch of token windows `(batch, length + 1)` -> `(inputs, next tokens,
    weights)`: each position predicts the next token, padding weighted 0 (GPT's and
    Transformer-XL's targets; runs in the tf.data graph)."""
    import tensorflow as tf

    labels = windows[:, 1:]
    return windows[:, :-1], labels, tf.cast(labels != pad_id, tf.float32)


def _sequence_length(settings):
    return settings.sequence_length


def decoder_arguments(settings, tokenizer):
    """The constructor arguments every Transformer decoder of `keras-attn lm` takes from
    the run's `model:` settings and its tokenizer (GPT's and Transformer-XL's builders)."""
    return dict(
        num_layers=settings.num_layers,
        num_heads=settings.num_heads,
        hidden_dim=settings.hidden_dim,
        intermediate_dim=settings.intermediate_dim,
        dropout=settings.dropout,
        norm_first=settings.norm_first,
        pad_token_id=tokenizer.pad_id,
    )


@dataclasses.dataclass(frozen=True)
class LanguageModel:
    """How `keras-attn lm --architecture NAME` builds, feeds and saves one kind of
    language model. A family declares its own (`Family.language_models`); code outside
    the package adds one with `register_language_model`.

    Attributes:
        name: the `--architecture` name.
        build: `(settings, tokenizer) -> model`, from the run's `model:` settings (a
            `keras_attn.training.task_configs.LanguageModelConfig`) and its WordPiece
            tokenizer (learned from the corpus).
        window: `settings -> tokens per training example` (default: `sequence_length`;
            Transformer-XL: its segments, the memory carried between them).
        targets: `(windows, pad_id) -> (x, y[, sample weights])`, a batch of token
            windows `(batch, window + 1)` as the model trains on them, in the tf.data
            graph (default: `next_token_targets`).
        generates: whether it samples text (`generate`: the run's samples in
            TensorBoard).
        features: whether its layers serve feature-based heads (`keras-attn finetune
            --feature-based` reads it): saved as `backbone.keras` too.
    """

    name: str
    build: typing.Callable
    window: typing.Callable = _sequence_length
    targets: typing.Callable = next_token_targets
    generates: bool = True
    features: bool = False


@dataclasses.dataclass(frozen=True)
class KerasHubTwin:
    """How a family's models move to and from keras-hub's (its presets, in and out:
    `keras_attn.models.keras_hub_presets`). Each function refuses, with a `ValueError`
    naming the difference, a model the other side would compute differently.

    Attributes:
        backbone_classes: the keras-hub backbone class names it reads.
        to_ours: `keras-hub backbone -> ours`, weights copied.
        to_hub: `our backbone -> keras-hub's`, weights copied.
        parameters: `keras-hub backbone config dict -> int`, the weights it claims
            (checked against the weights file before keras-hub builds anything).
        tokenizer_to_ours: `(keras-hub tokenizer, sequence_length, lowercase,
            truncate) -> ours` (`lowercase=None`: as the keras-hub tokenizer does), or
            `None` (keras-hub has no tokenizer of the family: XLNet's).
        tokenizer_to_hub: `our tokenizer -> keras-hub's`, or `None`.
        classifier_to_hub: `(our classifier, keras-hub backbone, keras-hub tokenizer,
            sequence_length, our tokenizer) -> keras-hub's classifier` with its
            preprocessor, or `None`
            (keras-hub has no classifier of the family).
        classifier_head: `(keras-hub classifier, our classifier) -> None`: its head's
            weights copied into ours, or `None`.
        causal_lm_to_hub: `(our language model, keras-hub backbone, keras-hub
            tokenizer, sequence_length) -> keras-hub's causal LM` with its
            preprocessor, or `None`.
        adopt_tokenizer: `(our backbone, our tokenizer) -> our backbone`, what the
            backbone takes from the preset's tokenizer (GPT-2: its padding id), or `None`.
    """

    backbone_classes: tuple
    to_ours: typing.Callable
    to_hub: typing.Callable
    parameters: typing.Callable
    tokenizer_to_ours: typing.Optional[typing.Callable] = None
    tokenizer_to_hub: typing.Optional[typing.Callable] = None
    classifier_to_hub: typing.Optional[typing.Callable] = None
    classifier_head: typing.Optional[typing.Callable] = None
    causal_lm_to_hub: typing.Optional[typing.Callable] = None
    adopt_tokenizer: typing.Optional[typing.Callable] = None


def data_examples(name):
    """`Pretraining.examples` for `keras_attn.data.pretraining_examples`' function `name`,
    imported when first called (it needs TensorFlow; the models do not)."""

    def examples(sampler, masker):
        from keras_attn.data import pretraining_examples

        return getattr(pretraining_examples, name)(sampler, masker)

    return examples


@dataclasses.dataclass(frozen=True)
class Family:
    """One model family's entry.

    Attributes:
        name: its folder's name (`"bert"`, `"gpt"`, ...).
        backbone_cls: the class its tasks stand on (a language model is its own).
        heads: fine-tuning task (`"classification"`, `"tagging"`, `"span_qa"`) ->
            `build(backbone, num_classes, dropout, pooling, **options)` of its head model.
        head_options: task -> the names of the keyword options its head takes beyond
            those four (GPT-1's classifier: `("lm_weight",)`); none by default.
        pretrainers: pre-training objective -> its `Pretraining`.
        model_types: the Hugging Face `model_type`s its checkpoint code reads.
        twin: a `HuggingFaceTwin`, when the family has one.
        signatures: model class -> the kind of serving signatures it exports with
            (`keras_attn.export.signatures`: `"encoder"`, `"classifier"`, `"tagger"`,
            `"span_qa"`, `"multiple_choice"`, `"language_model"`, `"seq2seq"`).
        attention_maps: whether its backbone draws `attention_maps` (pictures, the
            exported `attention` signature).
        classes: its model classes that neither `signatures` nor `pretrainers` names
            (so that `family_of` finds them too).
        tokenizer: its `TokenizerFiles` (default: WordPiece in a `vocab.txt`).
        adapt: `(backbone, tokenizer) -> (backbone, tokenizer)`, what fine-tuning does
            to a pre-trained backbone and its tokenizer before a head goes on (GPT:
            GPT-1's start, delimiter and extract tokens added to both), or `None`.
        classification_batch: `(inputs, labels, pad_id) -> (x, y)`, its classification
            head's batch from the tokenizer's packed inputs, in the tf.data graph
            (GPT-1: the token ids; the labels and the auxiliary language model's next
            tokens), or `None`: `(inputs, labels)`.
        language_models: the `LanguageModel`s `keras-attn lm` trains from it.
        keras_hub: a `KerasHubTwin`, when keras-hub has the family too.
        masked_lm: `backbone -> model`, its masked-LM pre-training model (what
            `MaskedLM.from_preset` builds and `fit(strings)` pre-trains), or `None`.

    The GGUF architectures a family reads are records of their own
    (`keras_attn.models.gguf.add_gguf_architecture`).
    """

    name: str
    backbone_cls: type
    heads: dict = dataclasses.field(default_factory=dict)
    head_options: dict = dataclasses.field(default_factory=dict)
    pretrainers: dict = dataclasses.field(default_factory=dict)
    model_types: tuple = ()
    twin: typing.Optional[HuggingFaceTwin] = None
    signatures: dict = dataclasses.field(default_factory=dict)
    attention_maps: bool = False
    classes: tuple = ()
    tokenizer: TokenizerFiles = WORDPIECE
    adapt: typing.Optional[typing.Callable] = None
    classification_batch: typing.Optional[typing.Callable] = None
    language_models: tuple = ()
    keras_hub: typing.Optional[KerasHubTwin] = None
    masked_lm: typing.Optional[typing.Callable] = None

    def head(self, task, backbone, num_classes=None, dropout=0.1, pooling="cls", **options):
        """The family's head model for fine-tuning `task` on `backbone`; `options`
        (e.g. `lm_weight`) go to a head that takes them (`head_options`)."""
        if task not in self.heads:
            raise UserInputError(
                f"Expected a task in {sorted(self.heads)} for a {self.backbone_cls.__name__}. "
                f"Received: task={task!r}"
            )
        taken = self.head_options.get(task, ())
        options = {name: value for name, value in options.items() if name in taken}
        return self.heads[task](backbone, num_classes, dropout, pooling, **options)

    def backbone_is(self, model):
        """Whether `model` is the family's backbone (a language model is its own), not
        one of its heads or pre-training models."""
        return issubclass(type(model), self.backbone_cls)

    def model_classes(self):
        """The backbone, pre-training, served and other classes of the family."""
        pretrainers = (recipe.model_cls for recipe in self.pretrainers.values())
        found = (self.backbone_cls, *pretrainers, *self.signatures, *self.classes)
        return tuple(dict.fromkeys(found))  # each once, in that order


_FAMILIES = {}  # name -> Family, in registration order


_LANGUAGE_MODELS = {}  # name -> LanguageModel


def register(family):
    """Adds `family` and its language models (a second family of the same name is a
    mistake: ValueError)."""
    if family.name in _FAMILIES and _FAMILIES[family.name] != family:
        raise ValueError(f"Model family registered twice: {family.name!r}")
    _FAMILIES[family.name] = family
    for entry in family.language_models:
        register_language_model(entry)
    return family


def register_language_model(entry):
    """Adds a `LanguageModel` that `keras-attn lm --architecture NAME` then trains
    (another entry under a taken name is a ValueError); returns it.

    Example (`tests/training/test_language_model_registry.py` trains one through the
    command line):

    >>> from keras_attn.models import registry
    >>> sorted(registry.language_models())  # what the package's families register
    ['elmo', 'gpt', 'llama', 'transformer_xl']
    """
    if not isinstance(entry, LanguageModel):
        raise TypeError(f"Expected a registry.LanguageModel. Received: {entry!r}")
    if _LANGUAGE_MODELS.get(entry.name, entry) != entry:
        raise ValueError(f"Language model registered twice: {entry.name!r}")
    _LANGUAGE_MODELS[entry.name] = entry
    return entry


def language_models():
    """`{name: LanguageModel}` of every registered language model (the families'
    first, then any registered since)."""
    discover()
    return dict(_LANGUAGE_MODELS)


def language_model(name):
    """The `LanguageModel` called `name`, or a ValueError listing the names."""
    found = language_models()
    if name not in found:
        raise ValueError(
            f"Expected a language model architecture in {sorted(found)}. Received: {name!r}"
        )
    return found[name]


def families():
    """Every registered `Family` (importing `keras_attn.models` registers ours)."""
    return list(_FAMILIES.values())


def discover():
    """Imports every family folder under `keras_attn/models/` (a sub-package), so that
    each registers itself: a new family needs its folder and nothing else. Returns the
    names of the sub-packages imported."""
    import importlib
    import pkgutil

    folder = pathlib.Path(__file__).parent  # keras_attn/models/
    names = sorted(info.name for info in pkgutil.iter_modules([str(folder)]) if info.ispkg)
    for name in names:
        importlib.import_module(f"{__package__}.{name}")
    return names


def add_head(name, task, build):
    """Gives family `name` the head `build` for `task`: how a family whose head also reads
    another family's backbone says so from its own folder (ERNIE's entity typing on a
    `BertBackbone`, the text-only control). A task the family has a head for already is
    refused."""
    entry = family(name)
    if task in entry.heads:
        raise ValueError(f"Expected a task the {name} family has no head for. Received: {task!r}")
    entry.heads[task] = build


def family(name):
    """The `Family` called `name`, or a ValueError listing the names."""
    if name not in _FAMILIES:
        raise ValueError(f"Expected a model family in {sorted(_FAMILIES)}. Received: {name!r}")
    return _FAMILIES[name]


def pretraining(objective):
    """The `Pretraining` of `objective`, from the family that registers it."""
    for entry in _FAMILIES.values():
        if objective in entry.pretrainers:
            return entry.pretrainers[objective]
    known = sorted(o for entry in _FAMILIES.values() for o in entry.pretrainers)
    raise UserInputError(f"Expected an objective in {known}. Received: objective={objective!r}")


def lookup(model, table, default=None):
    """`table[cls]` for the first class of `type(model)`'s MRO that `table` has (the
    nearest registered base), else `default`."""
    for cls in type(model).__mro__:
        if cls in table:
            return table[cls]
    return default


def family_of(model):
    """The `Family` of `model` (a backbone, head, pre-training or language model), or
    `None` for a model of no registered family."""
    table = {cls: entry for entry in _FAMILIES.values() for cls in entry.model_classes()}
    return lookup(model, table)


def tokenizer_files(model):
    """The `TokenizerFiles` a model is trained and served with: its backbone's family's
    (a `BertClassifier` on a `RobertaBackbone` tokenizes as RoBERTa does)."""
    entry = family_of(getattr(model, "backbone", None)) or family_of(model)
    return entry.tokenizer if entry is not None else WORDPIECE


def family_of_tokenizer(tokenizer):
    """The `Family` whose `TokenizerFiles` load `tokenizer`'s class (the nearest class of
    its MRO any family names; a family that names it first wins: WordPiece is BERT's),
    or `None`."""
    discover()
    for cls in type(tokenizer).__mro__:
        for entry in _FAMILIES.values():
            if any(cls.__name__ in files.classes for files in entry.tokenizer.chain()):
                return entry
    return None


def objectives():
    """The `keras-attn pretrain --objective` names every family registers, sorted."""
    discover()
    return sorted(o for entry in _FAMILIES.values() for o in entry.pretrainers)


def for_model_type(model_type):
    """The `Family` that reads Hugging Face checkpoints of `model_type`."""
    for entry in _FAMILIES.values():
        if model_type in entry.model_types:
            return entry
    known = sorted(t for entry in _FAMILIES.values() for t in entry.model_types)
    raise UserInputError(f"Expected model_type in {known}. Received: model_type={model_type!r}")


def checkpoint_model_type(folder):
    """The `model_type` of a checkpoint folder's configuration (`bert` for a TF1 BERT
    folder or a configuration without one), `None` when it cannot be read (the
    family's reader then names what is wrong)."""
    folder = pathlib.Path(folder)
    if not (folder / "config.json").is_file():
        return "bert" if (folder / "bert_config.json").is_file() else None
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        return config.get("model_type", "bert")
    except (OSError, ValueError, AttributeError):
        return None


def encoder_probe(backbone):
    """Two rows of a sentence pair, the second half-padded: inputs on which a written
    and a reloaded encoder must agree."""
    positions = getattr(backbone, "max_sequence_length", None) or 16
    rng, half = np.random.default_rng(0), min(8, positions // 2)
    return {
        "token_ids": rng.integers(0, backbone.vocabulary_size, (2, 2 * half)).astype("int32"),
        "segment_ids": np.repeat([[0] * half + [1] * half], 2, axis=0).astype("int32"),
        "padding_mask": np.array([[1] * 2 * half, [1] * half + [0] * half], "int32"),
    }


def token_probe(model):
    """Two rows of 8 token ids: the inputs of a language model's check."""
    return np.random.default_rng(0).integers(0, model.vocabulary_size, (2, 8)).astype("int32")
