"""Run checkpoints that resume exactly: weights, optimizer, RNG state and step.

Keras's `BackupAndRestore` saves at epoch ends (or every N batches) but resumes at
the start of the epoch, with the dropout generators' state not saved, so a killed
run does not continue the run it was. `RunCheckpoint` saves every `N` steps and at
every epoch end: every model variable (dropout seed-generator states included) and
every optimizer variable (step count, moments, loss scale), in one `.npz` file
written under a temporary name and renamed into place, so a checkpoint on disk is
always whole (and read back before the rename). `restore_latest` loads the newest
intact one (a damaged newer one is named in a warning) and returns its step; the
trainer then rebuilds the data pipeline at that step (`keras_attn.data.step_batches`).

Sizes: a checkpoint holds what an exact resume needs and no more, the weights and
the optimizer's slots (AdamW: two per weight, so three times the weights in all).
`best.npz` and the final `model.keras` (`save_trained_model`) hold the weights only.
"""

import json
import os
import pathlib
import re
import time
import warnings
import zipfile
import zlib

import keras
import numpy as np

from keras_attn.api_export import keras_attn_export
from keras_attn.errors import UserInputError
from keras_attn.models.model_copies import rebuilt_from_config

_NAME = re.compile(r"^ckpt-(\d+)\.npz$")
BEST = "best.npz"


def _variables(model, include_optimizer=True):
    """The state to save: the model's variables, then the optimizer's, in a fixed order."""
    variables = [("model", v) for v in model.variables]
    return variables + (
        [("optimizer", v) for v in model.optimizer.variables] if include_optimizer else []
    )


def host_array(value):
    """A variable's value as one NumPy array in this process.

    A JAX array split over devices of several processes is put together from this
    process's shards when they cover it (each process holds a whole replica), else
    gathered from every process (`process_allgather`: then every process must ask for
    the same arrays in the same order, as `state_arrays` does)."""
    if keras.backend.backend() == "jax":
        import jax

        if isinstance(value, jax.Array) and not value.is_fully_addressable:
            whole = np.empty(value.shape, value.dtype)
            covered = np.zeros(value.shape, bool)
            for shard in value.addressable_shards:
                whole[shard.index] = np.asarray(shard.data)
                covered[shard.index] = True
            if covered.all():
                return whole
            from jax.experimental import multihost_utils

            return np.asarray(multihost_utils.process_allgather(value, tiled=True))
    return keras.ops.convert_to_numpy(value)


def state_arrays(model, include_optimizer=True):
    """The model's (and optimizer's) state as whole NumPy arrays, keyed as saved:
    a checkpoint written from any mesh of devices loads into any other."""
    return {
        f"{index:05d}/{owner}/{variable.path}": host_array(variable.value)
        for index, (owner, variable) in enumerate(_variables(model, include_optimizer))
    }


def save_state(model, path, metadata, include_optimizer=True, arrays=None):
    """Writes the model (and optimizer) state to `path` atomically (temp file + rename);
    `arrays`: `state_arrays` already gathered (default: gathered here)."""
    path = pathlib.Path(path)
    arrays = dict(state_arrays(model, include_optimizer) if arrays is None else arrays)
    arrays["__metadata__"] = np.frombuffer(json.dumps(metadata).encode(), dtype=np.uint8)
    temporary = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    with open(temporary, "wb") as f:
        np.savez(f, **arrays)
        f.flush()
        os.fsync(f.fileno())
    damage = damaged(temporary)  # read back before it replaces anything
    if damage:
        temporary.unlink(missing_ok=True)
        raise OSError(f"Checkpoint {path} did not read back whole ({damage}); not written")
    os.replace(temporary, path)  # atomic on POSIX: readers see the old file or the new one


def damaged(path):
    """Why the checkpoint file `path` cannot be read whole (cut short, a checksum that
    does not match), or `None` when every member reads back with its CRC."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, EOFError, OSError, zlib.error) as error:
        return f"{type(error).__name__}: {error}"
    return None if bad is None else f"bad checksum in {bad}"


def load_state(model, path):
    """Loads what `save_state` wrote into `model` (built, compiled); returns the metadata.

    A file saved without the optimizer (`best.npz`) loads the model's variables only."""
    if not model.optimizer.built:
        model.optimizer.build(model.trainable_variables)
    with np.load(path) as stored:
        keys = sorted(k for k in stored.files if k != "__metadata__")
        variables = _variables(
            model, include_optimizer=any(k.split("/")[1] == "optimizer" for k in keys)
        )
        if len(keys) != len(variables):
            raise ValueError(
                f"Checkpoint {path} holds {len(keys)} variables; the model and optimizer have "
                f"{len(variables)}. Was it written by a different configuration?"
            )
        for key, (owner, variable) in zip(keys, variables, strict=True):
            stored_owner, stored_path = key.split("/", 2)[1:]
            value = stored[key]
            if stored_owner != owner or tuple(value.shape) != tuple(variable.shape):
                raise ValueError(
                    f"Checkpoint {path}: {key} {value.shape} does not fit {owner} variable "
                    f"{variable.path} {tuple(variable.shape)}."
                )
            variable.assign(value)
        return json.loads(stored["__metadata__"].tobytes().decode())


def checkpoints(directory):
    """The complete checkpoints in `directory`, oldest first, as `(step, path)`."""
    directory = pathlib.Path(directory)
    if not directory.is_dir():
        return []
    found = [
        (int(m.group(1)), directory / m.group(0))
        for m in map(_NAME.match, os.listdir(directory))
        if m
    ]
    return sorted(found)


@keras_attn_export("keras_attn.training.restore_latest")
def restore_latest(model, directory):
    """Loads the newest intact checkpoint of `directory` into `model`; returns its step
    (0 if none). A damaged newer one (cut short, a checksum that does not match) is
    skipped with a warning naming both; only damaged ones is a `UserInputError`.

    Example:

    >>> import tempfile, keras
    >>> from keras_attn.training import restore_latest
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("adam", "mse")
    >>> restore_latest(model, tempfile.mkdtemp())
    0
    """
    skipped = []
    for step, path in reversed(checkpoints(directory)):
        damage = damaged(path)
        if damage:  # a disk that filled up, a copy cut short: an older one will do
            skipped.append(f"{path.name} ({damage})")
            continue
        metadata = load_state(model, path)
        if int(metadata["step"]) != step:
            raise ValueError(
                f"Checkpoint {path} says step {metadata['step']}, its name step {step}."
            )
        if skipped:
            warnings.warn(
                f"Damaged checkpoint(s) skipped: {'; '.join(skipped)}; resuming from "
                f"{path.name} (step {step})",
                stacklevel=2,
            )
        return step
    if skipped:
        raise UserInputError(
            f"Every checkpoint in {directory} is damaged: {'; '.join(skipped)} "
            "(--no-resume starts afresh, moving them aside)"
        )
    return 0


@keras_attn_export("keras_attn.training.RunCheckpoint", serializable=False)
class RunCheckpoint(keras.callbacks.Callback):
    """Saves `ckpt-STEP.npz` every `every` steps and at each epoch end; keeps the last
    `keep`, and the best by `monitor` as `best.npz` (its weights only).

    Only the chief worker writes (under a multi-worker strategy the others hold the
    same values). A write is a temporary file renamed into place: a run killed
    mid-write leaves the previous checkpoints intact and a stray `.tmp` file that
    the next save cleans up.

    Args:
        directory: where the checkpoints go (created if missing).
        every: steps between checkpoints.
        keep: most recent checkpoints kept.
        monitor: the epoch log to rank checkpoints by (e.g. `"val_loss"`), or `None`.
        mode: `"min"` or `"max"`: which direction of `monitor` is better.
        is_chief: whether this process writes (default: true).
        gather_everywhere: every process takes part in putting the state together
            (a JAX run of several processes, whose arrays may span them all); only
            the chief writes it.

    Call arguments:
        None: a Keras callback; pass it to `fit(callbacks=[...])`.

    Example:

    >>> import tempfile, keras, numpy as np
    >>> from keras_attn.training import RunCheckpoint, restore_latest
    >>> model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    >>> model.compile("adam", "mse")
    >>> directory = tempfile.mkdtemp()
    >>> _ = model.fit(np.ones((8, 2)), np.ones(8), batch_size=2, epochs=2, verbose=0,
    ...               callbacks=[RunCheckpoint(directory, every=3, keep=2)])
    >>> sorted(p.name for p in __import__("pathlib").Path(directory).iterdir())
    ['ckpt-00000006.npz', 'ckpt-00000008.npz']
    >>> restore_latest(model, directory)
    8
    """

    def __init__(
        self,
        directory,
        every=100,
        keep=3,
        monitor=None,
        mode="min",
        is_chief=True,
        gather_everywhere=False,
    ):
        super().__init__()
        if mode not in ("min", "max"):
            raise ValueError(f"Expected `mode` in ('min', 'max'). Received: mode={mode!r}")
        self.directory = pathlib.Path(directory)
        self.every, self.keep, self.monitor, self.mode, self.is_chief = (
            every,
            keep,
            monitor,
            mode,
            is_chief,
        )
        self.gather_everywhere = gather_everywhere
        self.best = None
        self.last_saved = None

    def on_train_begin(self, logs=None):
        best = self.directory / BEST
        if self.monitor and self.best is None and best.exists():  # a resumed run keeps its best
            with np.load(best) as stored:
                self.best = json.loads(stored["__metadata__"].tobytes().decode()).get(self.monitor)

    def _step(self):
        return int(keras.ops.convert_to_numpy(self.model.optimizer.iterations))

    def save(self, step, **metadata):
        if not (self.is_chief or self.gather_everywhere) or step == self.last_saved:
            return
        arrays = state_arrays(self.model)
        self.last_saved = step
        if not self.is_chief:
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        for stray in self.directory.glob(".*.tmp-*"):  # left by a run killed mid-write
            stray.unlink(missing_ok=True)
        save_state(
            self.model,
            self.directory / f"ckpt-{step:08d}.npz",
            {"step": step, "time": time.time(), **metadata},
            arrays=arrays,
        )
        for _, old in checkpoints(self.directory)[: -self.keep]:
            old.unlink(missing_ok=True)

    def on_train_batch_end(self, batch, logs=None):
        step = self._step()
        if step % self.every == 0:
            self.save(step)

    def on_epoch_end(self, epoch, logs=None):
        step = self._step()
        self.save(step, epoch=epoch + 1)
        value = (logs or {}).get(self.monitor) if self.monitor else None
        if value is None or not (self.is_chief or self.gather_everywhere):
            return
        better = self.best is None or (
            value < self.best if self.mode == "min" else value > self.best
        )
        if better:
            self.best = float(value)
            arrays = state_arrays(self.model, include_optimizer=False)
            if self.is_chief:
                save_state(
                    self.model,
                    self.directory / BEST,
                    {"step": step, "epoch": epoch + 1, self.monitor: self.best},
                    arrays=arrays,
                )


def save_trained_model(model, path):
    """Writes `model` to the `.keras` file `path` without its optimizer's state.

    A trained model's file is for inference, export and fine-tuning: its AdamW
    slots (twice the weights) belong in the checkpoints, which resume training.
    Keras's `model.save` keeps a compiled model's optimizer, so an uncompiled copy
    (same configuration, same weights) is saved instead, under a temporary name and
    renamed into place. A model with LoRA adapters is saved as its `merged_copy()`
    (the adapters merged into the kernels; the run keeps them in `adapters.lora.h5`).
    """
    path = pathlib.Path(path)
    if getattr(model, "lora_rank", None):
        model = model.merged_copy()
    elif getattr(model, "optimizer", None) is not None:
        config = keras.saving.serialize_keras_object(model)
        config.pop("compile_config", None)  # the copy stays uncompiled: no optimizer to save
        copy = rebuilt_from_config(model, config)
        copy.set_weights(model.get_weights())
        model = copy
    temporary = path.with_name(f".{path.stem}.tmp-{os.getpid()}.keras")
    try:
        model.save(temporary)
        os.replace(temporary, path)
    finally:
        temporary.unlink(missing_ok=True)
    return path
