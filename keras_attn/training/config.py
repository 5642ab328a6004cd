"""Run configurations: small YAML files with documented defaults, checked before training.

A run's configuration has three sections, each a dataclass whose fields carry their
default and a one-line help text: `model` and `data` (defined by each task) and
`training` (`TrainingConfig`, shared by every task). Shipped presets live in
`keras_attn/training/configs/*.yaml`; a user's own YAML file works the same way.
Values are taken in this order: dataclass defaults < the YAML file < command-line
overrides. Anything unknown or of the wrong type is refused with the key named, so a
typo never silently falls back to a default.
"""

import dataclasses
import pathlib
import re
import types
import typing

import yaml

from keras_attn.api_export import keras_attn_export
from keras_attn.errors import UserInputError

CONFIG_DIR = pathlib.Path(__file__).parent / "configs"
PRECISIONS = ("float32", "mixed_float16", "mixed_bfloat16")
SCHEDULES = ("linear", "transformer", "constant")
STRATEGIES = ("auto", "default", "mirrored", "multi_worker", "tpu", "parameter_server")


def option(default, help, choices=None, bounds=None):
    """A dataclass field with its help text (and allowed values) in the metadata.

    `choices`: the allowed values, or a function giving them (a registry's names: called
    when a configuration is checked, so `--help` imports no model code).
    `bounds`: the interval a number must lie in, written as in mathematics (`"[0, 1)"`,
    `"(0, inf)"`, `"[1, inf)"`): checked when the configuration loads, before any data
    is read or model built."""
    if bounds is not None:
        parse_bounds(bounds)  # a typo in a bound fails at import, not on a user's run
    metadata = {"help": help, "choices": choices, "bounds": bounds}
    return dataclasses.field(default=default, metadata=metadata)


def parse_bounds(bounds):
    """`"[0, 1)"` -> `(0.0, True, 1.0, False)`: (low, low included, high, high included)."""
    match = re.fullmatch(r"([\[(])\s*(-?inf|[-\d.e]+)\s*,\s*(inf|[-\d.e]+)\s*([\])])", bounds)
    if not match:
        raise ValueError(f"Expected bounds such as '[0, 1)'. Received: {bounds!r}")
    return float(match[2]), match[1] == "[", float(match[3]), match[4] == "]"


def _in_bounds(value, bounds):
    low, low_in, high, high_in = parse_bounds(bounds)
    return (value > low or (low_in and value == low)) and (
        value < high or (high_in and value == high)
    )


# The peak learning rates a run gets unless told otherwise: every weight trained, and LoRA.
FULL_LEARNING_RATE, LORA_LEARNING_RATE = 1e-4, 5e-3


@keras_attn_export("keras_attn.training.TrainingConfig", serializable=False)
@dataclasses.dataclass
class TrainingConfig:
    """The `training:` section shared by every task.

    Args:
        batch_size: the global batch: split evenly across the replicas.
        steps: optimizer steps in all.
        steps_per_epoch: steps between validations and epoch-level logs.
        learning_rate: peak learning rate; `None` (default): `FULL_LEARNING_RATE`
            (1e-4) when every weight trains, `LORA_LEARNING_RATE` (5e-3) with
            `lora_rank` (adapters start at zero and need larger steps: MiniLM's LoRA
            on Rotten Tomatoes scored 50% at 1e-4 after 30 steps, 61% at 2e-3, 78% at
            5e-3; after 600 steps 81.5% at 2e-3 and 81.7% at 5e-3; docs/results.md).
        schedule: `"linear"` (BERT), `"transformer"` (Vaswani et al.) or `"constant"`.
        warmup: fraction of `steps` spent warming up.
        weight_decay: AdamW decoupled weight decay (never applied to LayerNorm or biases).
        clipnorm: clip gradients to this global norm (`None`: no clipping).
        precision: `"float32"`, `"mixed_float16"` (with loss scaling) or `"mixed_bfloat16"`.
        jit_compile: compile the train step with XLA (always on the JAX backend, whose
            uncompiled steps run op by op).
        strategy: the `tf.distribute` strategy, see `keras_attn.training.resolve_strategy`;
            on the JAX backend `keras.distribution` data parallelism, see
            `keras_attn.training.resolve_data_parallel`.
        peer_timeout: seconds a multi-worker start (or a JAX process) waits for every
            worker (process) to join.
        model_parallel: on JAX, the devices each weight is split over (a `(batch,
            model)` mesh of `devices / model_parallel` replicas; see
            `keras_attn.models.layout_maps`); 1: data parallel only.
        seed: seeds weights, data order, masks and dropout.
        checkpoint_every: steps between checkpoints (also one at every epoch end).
        keep_checkpoints: most recent checkpoints kept (the best one is kept apart).
        validation_steps: batches per validation (`None`: all).
        histogram_every: epochs between weight histograms (0: none).
        attention_every: steps between attention-map images (0: none).
        samples_every: steps between generated text samples (0: none).
        profile_steps: `"first,last"` steps to profile, e.g. `"10,15"` (`None`: off).
        lora_rank: fine-tune rank-`r` LoRA adapters with the rest frozen (a task
            model's new head trains too; `None`: every weight trains). The run folder
            keeps `adapters.lora.h5`; `model.keras` holds the adapters merged in.
        lora_targets: comma-separated names of the projections LoRA adapts.

    Call arguments:
        None: a plain record; `load_config` fills it from YAML and flags.

    Example:

    >>> from keras_attn.training import TrainingConfig
    >>> TrainingConfig(batch_size=64).batch_size
    64
    >>> TrainingConfig().learning_rate, TrainingConfig(lora_rank=8).learning_rate
    (0.0001, 0.005)
    """

    batch_size: int = option(32, "global batch size, split across replicas", bounds="[1, inf)")
    steps: int = option(1000, "optimizer steps in all", bounds="[1, inf)")
    steps_per_epoch: int = option(
        100, "steps between validations and epoch logs", bounds="[1, inf)"
    )
    learning_rate: typing.Optional[float] = option(
        None, "peak learning rate (null: 1e-4, or 5e-3 with --lora-rank)", bounds="(0, inf)"
    )
    schedule: str = option(
        "linear",
        "linear: warm-up then linear decay (BERT); transformer: "
        "d_model^-0.5 * min(step^-0.5, step * warmup^-1.5); constant",
        SCHEDULES,
    )
    warmup: float = option(0.1, "fraction of the steps spent warming up", bounds="[0, 1)")
    weight_decay: float = option(
        0.01, "AdamW weight decay (not on LayerNorm or biases)", bounds="[0, inf)"
    )
    clipnorm: typing.Optional[float] = option(
        1.0, "clip gradients to this global norm (null: off)", bounds="(0, inf)"
    )
    precision: str = option(
        "float32", "float32, mixed_float16 (loss scaling) or mixed_bfloat16", PRECISIONS
    )
    jit_compile: bool = option(False, "compile the train step with XLA (always on JAX)")
    strategy: str = option(
        "auto",
        "auto picks TPU > multi-worker (TF_CONFIG) > mirrored (>1 GPU) > default",
        STRATEGIES,
    )
    peer_timeout: int = option(
        120,
        "multi_worker, JAX processes: seconds to wait for every worker to join",
        bounds="[1, inf)",
    )
    model_parallel: int = option(
        1,
        "JAX: devices each weight is split over (a batch x model mesh); 1: data parallel",
        bounds="[1, inf)",
    )
    seed: int = option(0, "seeds weights, data order, masks and dropout")
    checkpoint_every: int = option(
        100, "steps between checkpoints (and one at each epoch end)", bounds="[1, inf)"
    )
    keep_checkpoints: int = option(
        3, "recent checkpoints kept; the best is kept apart", bounds="[1, inf)"
    )
    validation_steps: typing.Optional[int] = option(
        None, "batches per validation (null: all)", bounds="[1, inf)"
    )
    histogram_every: int = option(
        1, "epochs between weight histograms (0: none)", bounds="[0, inf)"
    )
    attention_every: int = option(
        100, "steps between attention-map images (0: none)", bounds="[0, inf)"
    )
    samples_every: int = option(
        100, "steps between generated text samples, lm and seq2seq (0: none)", bounds="[0, inf)"
    )
    profile_steps: typing.Optional[str] = option(None, "steps to profile, 'first,last' (null: off)")
    lora_rank: typing.Optional[int] = option(
        None, "train rank-r LoRA adapters, the rest frozen (null: full training)", bounds="[1, inf)"
    )
    lora_targets: str = option("query,value", "comma-separated projections LoRA adapts")

    def __post_init__(self):
        if self.learning_rate is None:  # per method: what our measurements found works
            self.learning_rate = LORA_LEARNING_RATE if self.lora_rank else FULL_LEARNING_RATE
        if self.profile_steps is not None:
            parts = self.profile_steps.split(",")
            if len(parts) != 2 or not all(p.strip().isdigit() for p in parts):
                raise ConfigError(
                    "training.profile_steps", f"'first,last', got {self.profile_steps!r}"
                )


class ConfigError(UserInputError):
    """A configuration value that cannot be used; names the key and what was expected."""

    def __init__(self, key, expected):
        super().__init__(f"Invalid configuration `{key}`: expected {expected}.")
        self.key = key


@keras_attn_export("keras_attn.training.load_config")
def load_config(sections, config=None, overrides=None):
    """Builds a run configuration from defaults, a YAML file and overrides.

    Args:
        sections: dict of section name -> dataclass type, e.g.
            `{"model": ..., "data": ..., "training": TrainingConfig}`.
        config: `None` (defaults only), the name of a shipped preset
            (`keras_attn/training/configs/NAME.yaml`) or a path to a YAML file.
        overrides: dict of `"section.key"` -> value (already parsed, or strings
            as typed on a command line); applied last.

    Returns:
        A `types.SimpleNamespace` with one dataclass instance per section.

    Raises:
        ValueError: unknown section or key, a value of the wrong type, or a
            missing file, with the key or file named.

    Example:

    >>> from keras_attn.training import TrainingConfig, load_config
    >>> run = load_config({"training": TrainingConfig}, overrides={"training.steps": "50"})
    >>> run.training.steps
    50
    >>> overrides = {"training.step": 5}  # a typo: `steps`
    >>> load_config({"training": TrainingConfig}, overrides=overrides)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    keras_attn.training.config.ConfigError: Invalid configuration `training.step`: expected ...
    """
    values = {name: {} for name in sections}
    source = None
    if config is not None:
        source = resolve_config_path(config)
        try:
            loaded = yaml.safe_load(source.read_text(encoding="utf-8")) or {}
        except (UnicodeDecodeError, yaml.YAMLError) as error:
            raise ConfigError(
                str(source), f"a UTF-8 YAML file ({str(error).splitlines()[0]})"
            ) from None
        if not isinstance(loaded, dict):
            raise ConfigError(str(source), "a mapping of sections (model:, data:, training:)")
        for section, entries in loaded.items():
            if section not in sections:
                raise ConfigError(f"{section}", f"one of {sorted(sections)} (in {source})")
            if not isinstance(entries, dict):
                raise ConfigError(f"{section}", f"a mapping of keys (in {source})")
            values[section].update(entries)
    for dotted, value in (overrides or {}).items():
        section, _, key = dotted.partition(".")
        if section not in sections or not key:
            raise ConfigError(dotted, f"'section.key' with a section in {sorted(sections)}")
        values[section][key] = value
    run = types.SimpleNamespace(source=source)
    for section, cls in sections.items():
        fields = {f.name: f for f in dataclasses.fields(cls)}
        checked = {}
        for key, value in values[section].items():
            if key not in fields:
                raise ConfigError(f"{section}.{key}", _unknown_key_hint(fields))
            checked[key] = _coerce(f"{section}.{key}", value, fields[key])
        setattr(run, section, cls(**checked))
    return run


def _unknown_key_hint(fields):
    return f"one of {sorted(fields)}"


def resolve_config_path(config):
    """A preset name or a YAML path -> an existing path; `ValueError` naming it if missing."""
    path = pathlib.Path(config)
    if path.suffix not in (".yaml", ".yml"):
        preset = CONFIG_DIR / f"{config}.yaml"
        if preset.exists():
            return preset
    if not path.is_file():
        presets = sorted(p.stem for p in CONFIG_DIR.glob("*.yaml"))
        raise ConfigError(
            "--config",
            f"a YAML file or one of the presets {presets}; {str(config)!r} does not exist",
        )
    return path


def _coerce(key, value, field):
    """`value` as the field's type (strings from a command line are parsed as YAML)."""
    kind, optional = _field_type(field.type)
    if isinstance(value, str) and kind is not str:
        value = yaml.safe_load(value) if value.strip() else None
    if value is None:
        if optional:
            return None
        raise ConfigError(key, f"a {kind.__name__}, got null")
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is float and isinstance(value, str):
        # PyYAML reads `1e-3` (no dot) as a string (YAML 1.1); Python reads it as a float.
        try:
            value = float(value)
        except ValueError:
            pass
    if kind is bool and isinstance(value, str):
        raise ConfigError(key, f"true or false, got {value!r}")
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise ConfigError(key, f"a {kind.__name__}, got {type(value).__name__} {value!r}")
    choices = field.metadata.get("choices")
    if callable(choices):  # a registry's names, read when a run is configured
        choices = sorted(choices())
    if choices and value not in choices:
        raise ConfigError(key, f"one of {list(choices)}, got {value!r}")
    bounds = field.metadata.get("bounds")
    if bounds and not _in_bounds(value, bounds):
        raise ConfigError(key, f"a value in {bounds}, got {value!r}")
    return value


def _field_type(annotation):
    """(base type, optional?) of `int`, `typing.Optional[int]` or `"int"`."""
    if isinstance(annotation, str):
        annotation = eval(annotation, {"typing": typing})  # dataclasses may keep strings
    args = typing.get_args(annotation)
    if args and type(None) in args:
        (inner,) = [a for a in args if a is not type(None)]
        return inner, True
    return annotation, False


# `--help` groups the `training:` options by what they are for (the common ones of each
# command come first, in a group of their own: `add_arguments(common=...)`).
TRAINING_TOPICS = {
    "steps, optimizer and schedule": (
        "batch_size", "steps", "steps_per_epoch", "learning_rate", "schedule", "warmup",
        "weight_decay", "clipnorm", "seed", "lora_rank", "lora_targets",
    ),
    "checkpoints, validation and TensorBoard": (
        "checkpoint_every", "keep_checkpoints", "validation_steps", "histogram_every",
        "attention_every", "samples_every", "profile_steps",
    ),
    "devices and precision": (
        "precision", "jit_compile", "strategy", "peer_timeout", "model_parallel",
    ),
}  # fmt: skip


def add_arguments(parser, sections, common=(), common_group=None):
    """Adds one `--section-key`-free flag per field (`--batch-size`, `--text-column`)
    with its help text, in groups: first the `common` fields (`"section.key"` names,
    in that order; into `common_group` if given), then each section's others
    (`training:` by `TRAINING_TOPICS`); returns {flag dest: "section.key"} for
    `overrides_from`."""
    fields, seen = {}, {}
    for section, cls in sections.items():
        for field in dataclasses.fields(cls):
            flag = "--" + field.name.replace("_", "-")
            if flag in seen:  # a programming error in a task's sections, not a user's
                raise ValueError(
                    f"{flag} would set both {seen[flag]}.{field.name} and {section}.{field.name}"
                )
            seen[flag] = section
            fields[f"{section}.{field.name}"] = field
    unknown = [key for key in common if key not in fields]
    if unknown:
        raise ValueError(f"`common` names no option: {unknown}")
    destinations = {}

    def add(group, keys):
        for key in keys:
            destinations[_add_flag(group, key, fields[key])] = key

    if common:
        add(common_group or parser.add_argument_group("the common options"), common)
    groups = []
    for section in sections:
        keys = [k for k in fields if k.startswith(f"{section}.") and k not in common]
        if section != "training":
            groups.append((f"{section} (the `{section}:` section of the config)", keys))
            continue
        for topic, names in TRAINING_TOPICS.items():
            topic_keys = [f"training.{n}" for n in names]
            groups.append((f"training: {topic}", [k for k in topic_keys if k in keys]))
        topics = {f"training.{n}" for names in TRAINING_TOPICS.values() for n in names}
        groups.append(("training: other", [k for k in keys if k not in topics]))
    for title, keys in groups:
        if keys:
            add(parser.add_argument_group(title), keys)
    return destinations


def _add_flag(group, key, field):
    kind, _ = _field_type(field.type)
    help_text = field.metadata.get("help", "")
    choices = field.metadata.get("choices")
    if choices and not callable(choices):  # a registry's: named in the help text
        help_text += f" {{{', '.join(map(str, choices))}}}"
    help_text = (help_text + f" (default: {field.default})").replace("%", "%%")  # argparse's
    dest = key.replace(".", "__")
    flag = "--" + key.partition(".")[2].replace("_", "-")
    group.add_argument(flag, dest=dest, default=None, metavar=kind.__name__.upper(), help=help_text)
    return dest


def overrides_from(args, destinations):
    """The flags that were given on the command line, as `{"section.key": string}`."""
    return {
        key: getattr(args, dest)
        for dest, key in destinations.items()
        if getattr(args, dest) is not None
    }


def to_dict(run):
    """A configuration as plain nested dicts (for logs, HParams and `config.yaml`)."""
    return {
        name: dataclasses.asdict(value)
        for name, value in vars(run).items()
        if dataclasses.is_dataclass(value)
    }
