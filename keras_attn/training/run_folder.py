"""A run folder belongs to one run: a different run is refused, never resumed or overwritten.

A run's identity is its resolved configuration (`config.yaml`) plus what its task
learned from the data before training (`identity.json`: the label set of a
classifier, a hash of a learned vocabulary). The same command started again
resumes; a command whose identity differs in anything but `RESUMABLE_KEYS` (the
step budget and how the run is logged, checkpointed or executed) is refused with the
differing keys named. Asked to start afresh (`resume=False`, `--no-resume`), the
trainer first moves the old run's files to a sibling folder
`<folder>.replaced-<time>`, so nothing of it is lost.
"""

import datetime
import hashlib
import json
import os
import pathlib

import yaml

from keras_attn.errors import UserInputError

CONFIG_FILE = "config.yaml"
IDENTITY_FILE = "identity.json"
# What may change between the runs of one folder: the step budget, and settings
# that change how a run is logged, checkpointed or executed, not what it learns.
RESUMABLE_KEYS = frozenset(
    {
        "training.steps",
        "training.checkpoint_every",
        "training.keep_checkpoints",
        "training.validation_steps",
        "training.histogram_every",
        "training.attention_every",
        "training.samples_every",
        "training.profile_steps",
        "training.strategy",
        "training.model_parallel",  # a checkpoint holds whole arrays: any mesh resumes it
        "training.peer_timeout",
        "training.jit_compile",
    }
)


class RunFolderError(UserInputError):
    """An output folder that cannot take this run (a file, or another run's folder)."""


def check_output_dir(path):
    """Refuses an output path that is an existing file (before anything is loaded)."""
    path = pathlib.Path(path)
    if path.exists() and not path.is_dir():
        raise RunFolderError(f"--output {path} is an existing file; expected a folder for the run")
    for parent in path.parents:
        if parent.exists():
            if not parent.is_dir():
                raise RunFolderError(f"--output {path}: {parent} is a file, not a folder")
            break


def vocabulary_hash(vocabulary):
    """A short fingerprint of a vocabulary (a list of tokens), for a task's identity."""
    return hashlib.sha256("\n".join(vocabulary).encode("utf-8")).hexdigest()[:16]


def holds_a_run(path):
    """Whether `path` holds files of an earlier run."""
    path = pathlib.Path(path)
    return (path / CONFIG_FILE).is_file() or any((path / "checkpoints").glob("ckpt-*.npz"))


def differences(path, config, identity=None):
    """`["key: old -> new", ...]`: how `config` (nested dicts) and `identity` differ
    from the run recorded in `path`, ignoring `RESUMABLE_KEYS`; `[]` if they agree or
    no run is recorded there."""
    path = pathlib.Path(path)
    found = []
    if (path / CONFIG_FILE).is_file():
        previous = _flatten(yaml.safe_load((path / CONFIG_FILE).read_text(encoding="utf-8")) or {})
        current = _flatten(config)
        for key in sorted(set(previous) | set(current)):
            if key not in RESUMABLE_KEYS and previous.get(key, "(unset)") != current.get(
                key, "(unset)"
            ):
                found.append(
                    f"{key}: {previous.get(key, '(unset)')!r} -> {current.get(key, '(unset)')!r}"
                )
    if identity is not None and (path / IDENTITY_FILE).is_file():
        previous = json.loads((path / IDENTITY_FILE).read_text(encoding="utf-8"))
        for key in sorted(set(previous) | set(identity)):
            if previous.get(key) != identity.get(key):
                found.append(f"{key}: {_short(previous.get(key))} -> {_short(identity.get(key))}")
    return found


def check_same_run(path, config, identity=None, resume=True):
    """Raises `RunFolderError` if `path` holds a run that `config`/`identity` would
    not continue (only when resuming: a fresh start moves the old run aside)."""
    if not resume:
        return
    found = differences(path, config, identity)
    if found:
        raise RunFolderError(
            f"{path} holds a different run; it differs in {'; '.join(found)}. Resume it with its "
            "own "
            f"configuration (only the step budget and logging may change), start afresh there with "
            f"--no-resume (its files move to {pathlib.Path(path).name}.replaced-<time>), or "
            "choose another --output."
        )


def claim(path, config, identity=None, resume=True):
    """Makes `path` this run's folder: moves an earlier run aside when not resuming,
    then records `config.yaml` and `identity.json`. Returns the folder the old run
    went to, or `None`."""
    path = pathlib.Path(path)
    moved = None
    if not resume and holds_a_run(path):
        stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
        moved = path.with_name(f"{path.name}.replaced-{stamp}")
        suffix = 1
        while moved.exists():
            suffix += 1
            moved = path.with_name(f"{path.name}.replaced-{stamp}-{suffix}")
        os.rename(path, moved)
    path.mkdir(parents=True, exist_ok=True)
    _write(path / CONFIG_FILE, yaml.safe_dump(config, sort_keys=False))
    _write(path / IDENTITY_FILE, json.dumps(identity or {}, indent=2))
    return moved


def _write(path, text):
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def _flatten(config, prefix=""):
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update(_flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _short(value):
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."
