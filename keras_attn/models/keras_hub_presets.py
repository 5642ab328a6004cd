"""keras-hub presets in and out: a folder keras-hub's `save_to_preset` wrote (a backbone
alone, or a task with its preprocessor and tokenizer) read into our models, and ours
written as a folder keras-hub's `from_preset` reads.

keras-hub itself reads and writes the folders (it is installed with us): a preset is
loaded as keras-hub's own backbone, tokenizer and task, and each family's
`registry.KerasHubTwin` moves the weights and the tokenizer's settings between its
classes and ours, refusing what the other side cannot hold (a model keras-hub would
compute differently is a `ValueError`, never a silently different model).
"""

import json
import pathlib

from keras_attn.api_export import keras_attn_export


def is_keras_hub_preset(folder):
    """Whether `folder` holds a keras-hub preset (its `metadata.json` names keras-hub)."""
    path = pathlib.Path(folder) / "metadata.json"
    try:
        return "keras_hub_version" in json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, TypeError, AttributeError):
        return False


def _read_json(folder, name):
    try:
        return json.loads((pathlib.Path(folder) / name).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"The keras-hub preset {folder} has no readable {name}: {error}") from None


def _twin(class_name, folder):
    from keras_attn.models import registry

    for family in registry.families():
        twin = family.keras_hub
        if twin is not None and class_name in twin.backbone_classes:
            return family, twin
    known = sorted(
        c for f in registry.families() if f.keras_hub for c in f.keras_hub.backbone_classes
    )
    raise ValueError(f"The keras-hub preset {folder} holds a {class_name}; we read {known}")


# The sizes a keras-hub backbone config may name that allocate before a weight is read
# (an embedding's rows, a table of positions or buckets): each a positive integer no
# larger than the weights file's count of float16 numbers.
_SIZE_KEYS = (
    "vocabulary_size",
    "num_layers",
    "num_heads",
    "num_key_value_heads",
    "hidden_dim",
    "intermediate_dim",
    "embedding_dim",
    "max_sequence_length",
    "num_segments",
    "bucket_size",
    "num_groups",
    "num_inner_repetitions",
)


def _check_class(folder, file_name, serialized, family_of=None):
    """A `ValueError` unless a serialized object's `class_name` is the class Keras would
    deserialize: its `registered_name` (which Keras reads first) is `keras_hub>` (or
    keras-nlp's `keras_nlp>`) and the same name, and its module keras-hub's."""
    if not isinstance(serialized, dict):
        raise ValueError(f"The keras-hub preset {folder}: {file_name} is not an object")
    name = serialized.get("class_name")
    registered = serialized.get("registered_name")
    module = serialized.get("module")
    # keras-hub registers every class under keras_nlp too (presets saved by keras-nlp).
    packages = ("keras_hub", "keras_nlp")
    if (
        registered is not None
        and registered not in [f"{package}>{name}" for package in packages]
        or (module is not None and not str(module).startswith(tuple(f"{p}." for p in packages)))
    ):
        raise ValueError(
            f"The keras-hub preset {folder}: {file_name} names the class {name!r} but "
            f"registers {registered!r} from {module!r}: Keras would build the latter"
        )
    if family_of is not None and name != family_of:
        raise ValueError(
            f"The keras-hub preset {folder}: {file_name} holds a {name!r}, config.json a "
            f"{family_of!r}"
        )


def _checked_sizes(folder, twin, config, load_weights, file_name="config.json"):
    """A ValueError unless the sizes `config` (of `file_name`) claims are numbers its
    weights file can hold (float32 or narrower): keras-hub builds the model from them
    before it reads a weight, so a crafted size would take all the memory first."""
    sizes = config.get("config", {}) if isinstance(config, dict) else {}
    try:
        claimed = twin.parameters(sizes)
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise ValueError(f"The keras-hub preset {folder}: {file_name}'s sizes: {error}") from None
    if claimed <= 0:
        raise ValueError(f"The keras-hub preset {folder}: {file_name} claims {claimed} weights")
    weights = folder / "model.weights.h5"
    if not load_weights:
        return
    if not weights.is_file():
        raise ValueError(f"The keras-hub preset {folder} has no model.weights.h5")
    held = weights.stat().st_size
    if claimed * 4 > 2 * held + (1 << 20):
        raise ValueError(
            f"The keras-hub preset {folder}: {file_name} claims {claimed:,} weights, more "
            f"than model.weights.h5 ({held:,} bytes) holds"
        )
    for key in _SIZE_KEYS:
        value = sizes.get(key)
        if value is not None and (
            not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= held // 2
        ):
            raise ValueError(
                f"The keras-hub preset {folder}: {file_name}'s {key}={value!r:.40}: expected a "
                f"positive integer that model.weights.h5 ({held:,} bytes) can hold"
            )


def _checked_task(folder, twin, backbone_class, load_weights):
    """`task.json` held to `config.json`'s rules: its class and its nested backbone's
    (the same class as `config.json`'s, the same sizes checks), and `num_classes`, a
    positive integer whose head `task.weights.h5` can hold."""
    task = _read_json(folder, "task.json")
    _check_class(folder, "task.json", task)
    config = task.get("config")
    if not isinstance(config, dict):
        raise ValueError(f"The keras-hub preset {folder}: task.json has no config object")
    nested = config.get("backbone")
    if nested is not None:
        _check_class(folder, "task.json's backbone", nested, family_of=backbone_class)
        _checked_sizes(folder, twin, nested, load_weights, "task.json's backbone")
    classes = config.get("num_classes")
    if classes is None:
        return task
    width = (nested or {}).get("config", {}).get("hidden_dim")
    head = folder / "task.weights.h5"
    held = head.stat().st_size if head.is_file() else 0
    if (
        not isinstance(classes, int)
        or isinstance(classes, bool)
        or classes < 1
        or load_weights
        and isinstance(width, int)
        and classes * width * 4 > 2 * held + (1 << 20)
    ):
        raise ValueError(
            f"The keras-hub preset {folder}: task.json's num_classes={classes!r:.40}: expected "
            f"a positive integer whose head task.weights.h5 ({held:,} bytes) can hold"
        )
    return task


def _checked_twin(folder, load_weights, task=False):
    """`(twin, task)`: the family twin of a keras-hub preset folder's backbone, its claimed
    sizes checked, and (with `task`) the folder's `task.json` checked, `None` without one."""
    config = _read_json(folder, "config.json")
    _check_class(folder, "config.json", config)
    _, twin = _twin(config.get("class_name"), folder)
    _checked_sizes(folder, twin, config, load_weights)
    if not task or not (folder / "task.json").is_file():
        return twin, None
    return twin, _checked_task(folder, twin, config.get("class_name"), load_weights)


def _from_preset(folder, load, what):
    """keras-hub's `load()`, a damaged weights file named (h5py's errors name none):
    each of `what` (file names) is opened first, which finds one cut short (HDF5 keeps
    its length in the header), and any error `load()` meets in them is named too."""
    import h5py

    for name in what:
        if (folder / name).is_file():
            try:
                h5py.File(folder / name, "r").close()
            except OSError as error:
                _unreadable(folder, name, error)
    try:
        return load()
    except OSError as error:
        _unreadable(folder, " or ".join(what), error)


def _unreadable(folder, name, error):
    first = (str(error).strip().splitlines() or [""])[0][:200]
    raise ValueError(f"The keras-hub preset {folder}: {name} is not readable ({first})") from None


def load_backbone(folder, load_weights=True):
    """Our backbone of a keras-hub preset folder (its `config.json`), with its weights
    unless `load_weights=False`."""
    import keras_hub

    folder = pathlib.Path(folder)
    twin, _ = _checked_twin(folder, load_weights)
    hub_backbone = _from_preset(
        folder,
        lambda: keras_hub.models.Backbone.from_preset(str(folder), load_weights=load_weights),
        ("model.weights.h5",),
    )
    return twin.to_ours(hub_backbone)


def load_backbone_and_tokenizer(folder, sequence_length=None, lowercase=None, load_weights=True):
    """`(backbone, tokenizer, task)` of a keras-hub preset folder: ours, with its weights
    (unless `load_weights=False`), the tokenizer keras-hub's would be, packing
    `sequence_length` pieces (default: its preprocessor's, else 128); `task` is
    keras-hub's task model when the folder holds one (`task.json`), else `None`."""
    import keras_hub

    from keras_attn.models.tokenizer_checks import check_against_embedding

    folder = pathlib.Path(folder)
    twin, task_config = _checked_twin(folder, load_weights, task=True)
    if not (folder / "tokenizer.json").is_file():
        raise ValueError(
            f"The keras-hub preset {folder} holds a backbone without a tokenizer "
            "(tokenizer.json): load it with the backbone's from_preset"
        )
    if twin.tokenizer_to_ours is None:
        raise ValueError(
            f"keras-hub has no tokenizer of the family of the preset {folder}: load the "
            "backbone with its from_preset"
        )
    task = None
    if task_config is not None:
        name = task_config.get("class_name")
        task_cls = getattr(keras_hub.models, str(name), None)
        if not isinstance(task_cls, type) or not issubclass(task_cls, keras_hub.models.Task):
            raise ValueError(
                f"The keras-hub preset {folder} holds a task keras-hub lacks: {name!r}"
            )
        task = _from_preset(
            folder,
            lambda: task_cls.from_preset(str(folder), load_weights=load_weights),
            ("model.weights.h5", "task.weights.h5"),
        )
        hub_backbone = task.backbone
    else:
        hub_backbone = _from_preset(
            folder,
            lambda: keras_hub.models.Backbone.from_preset(str(folder), load_weights=load_weights),
            ("model.weights.h5",),
        )
    backbone = twin.to_ours(hub_backbone)
    preprocessor = (
        _read_json(folder, "preprocessor.json").get("config", {})
        if (folder / "preprocessor.json").is_file()
        else {}
    )
    if sequence_length is None:
        sequence_length = preprocessor.get("sequence_length") or 128
    hub_tokenizer = keras_hub.models.Tokenizer.from_preset(str(folder))
    # A pair too long is cut as keras-hub's preprocessor cuts it (its default: round robin).
    truncate = preprocessor.get("truncate", "round_robin")
    tokenizer = twin.tokenizer_to_ours(hub_tokenizer, sequence_length, lowercase, truncate)
    check_against_embedding(tokenizer, backbone, f"The keras-hub preset {folder}'s tokenizer")
    if twin.adopt_tokenizer is not None:
        backbone = twin.adopt_tokenizer(backbone, tokenizer)
    return backbone, tokenizer, task


@keras_attn_export("keras_attn.models.save_to_preset")
def save_to_preset(model, folder, tokenizer=None, sequence_length=None):
    """Writes `model` as a keras-hub preset folder: a backbone, or a classifier with its
    preprocessor and tokenizer (`model.preprocessor`'s, or `tokenizer`), which
    `keras_hub.models.Backbone.from_preset(folder)` (or `TextClassifier.from_preset`)
    loads computing what ours computes.

    Args:
        model: a backbone or a classifier of a family keras-hub also has.
        folder: the folder to write: new, or empty (a folder holding files is refused;
            the preset appears whole or not at all).
        tokenizer: the tokenizer to write (default: the model's preprocessor's).
        sequence_length: the preprocessor's packed length (default: the tokenizer's).

    Returns:
        The folder.

    Raises:
        ValueError: a family keras-hub lacks, or a model keras-hub's class would compute
            differently (another activation, pooling, normalisation), named.

    Example:

    >>> import tempfile
    >>> from keras_attn.layers import gelu_approximate
    >>> from keras_attn.models import BertBackbone, save_to_preset
    >>> backbone = BertBackbone(100, 2, 2, 16, 32, activation=gelu_approximate)
    >>> folder = save_to_preset(backbone, tempfile.mkdtemp())
    >>> sorted(p.name for p in folder.iterdir())
    ['config.json', 'metadata.json', 'model.weights.h5']
    """
    from keras_attn.models import registry

    folder = pathlib.Path(folder)
    family = registry.family_of(getattr(model, "backbone", None)) or registry.family_of(model)
    if family is None or family.keras_hub is None:
        raise ValueError(
            f"keras-hub has no twin of a {type(model).__name__} that we write (families: "
            f"{sorted(f.name for f in registry.families() if f.keras_hub)})"
        )
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise ValueError(
            f"Expected a new or empty folder for the preset. Received: {folder}, which holds "
            "files (nothing was written)"
        )
    twin = family.keras_hub
    backbone = getattr(model, "backbone", model)
    hub = twin.to_hub(backbone)
    preprocessor = getattr(model, "preprocessor", None)
    if model is backbone and preprocessor is not None and twin.causal_lm_to_hub is not None:
        # A language model with its preprocessor: keras-hub's causal LM task.
        tokenizer = tokenizer or preprocessor.tokenizer
        hub = twin.causal_lm_to_hub(
            model,
            hub,
            twin.tokenizer_to_hub(tokenizer),
            sequence_length or preprocessor.sequence_length,
        )
    elif model is not backbone:
        tokenizer = tokenizer or (preprocessor.tokenizer if preprocessor is not None else None)
        if tokenizer is None:
            raise ValueError(
                f"Expected a tokenizer to write with the {type(model).__name__} (its "
                "preprocessor's, or tokenizer=): keras-hub's tasks carry theirs"
            )
        if twin.classifier_to_hub is None:
            raise ValueError(
                f"keras-hub has no classifier of the {family.name} family to write a "
                f"{type(model).__name__} as"
            )
        hub_tokenizer = twin.tokenizer_to_hub(tokenizer)
        hub = twin.classifier_to_hub(
            model, hub, hub_tokenizer, sequence_length or tokenizer.sequence_length, tokenizer
        )
    _written_whole(hub, folder)
    return folder


def _written_whole(hub_model, folder):
    """keras-hub's `save_to_preset` into a hidden folder beside `folder`, renamed to it
    when every file is written: an interrupted or failed write leaves no half preset."""
    import shutil
    import tempfile

    folder.parent.mkdir(parents=True, exist_ok=True)
    partial = pathlib.Path(
        tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".partial", dir=folder.parent)
    )
    try:
        hub_model.save_to_preset(str(partial))
        if folder.exists():
            folder.rmdir()  # empty (checked before): another writer's files stop it here
        partial.rename(folder)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise


def adopt_head(source, model):
    """The head of `source` (keras-hub's classifier from a task preset) copied into
    `model` when both classify into as many classes; nothing otherwise (a new head, as
    keras-hub gives for another `num_classes`)."""
    if source is None or getattr(source, "num_classes", None) != getattr(model, "num_classes", -1):
        return
    from keras_attn.models import registry

    head = registry.family_of(model.backbone).keras_hub.classifier_head
    if head is None:
        raise ValueError(
            f"keras-hub's {type(source).__name__} has a head ours cannot take: give another "
            "num_classes for a new head"
        )
    head(source, model)
