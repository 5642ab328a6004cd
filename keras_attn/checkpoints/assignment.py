"""A family's table applied: checkpoint tensors into variables (all or nothing), and
variables out as checkpoint tensors."""

import warnings

import numpy as np

from keras_attn.errors import UserInputError


def assign(table, tensors, what="backbone weight(s)", model="backbone"):
    """Assigns every table row's variable from checkpoint `tensors`, all or nothing: a
    `UserInputError` names every missing tensor (as `what`), or every shape that does
    not fit `model`, before any variable changes."""
    missing = [name for _, name, _ in table if name not in tensors]
    if missing:
        raise UserInputError(f"Checkpoint lacks {len(missing)} {what}: {missing}")
    problems, values = [], []
    for variable, name, transform in table:
        shape = tuple(variable.shape)
        if str(variable.dtype) == "uint8":  # GGUF's blocks (`BlockDense`): taken as stored
            value = np.asarray(tensors[name])
            if value.dtype != np.uint8 or value.shape != shape:
                problems.append(
                    f"{name} {value.dtype} {value.shape} vs {variable.path} blocks {shape}"
                )
            else:
                values.append(value)
            continue
        value = np.asarray(tensors[name], "float32")
        if value.shape != transform.theirs_shape(shape):
            problems.append(f"{name} {value.shape} vs {variable.path} {shape}")
        else:
            values.append(transform.to_ours(value, shape))
    if problems:
        shown = "; ".join(problems[:6]) + (
            f"; ... ({len(problems)} in all)" if len(problems) > 6 else ""
        )
        raise UserInputError(
            f"Checkpoint shapes do not fit the {model} its configuration describes: " + shown
        )
    for (variable, _, _), value in zip(table, values, strict=True):
        variable.assign(value)


def exported_tensors(table, prefix=""):
    """Checkpoint name (`prefix` + the table's) -> float32 NumPy array in torch's layout
    (a `ValueError` for weights kept in GGUF's blocks, which have no float form here)."""
    import keras

    kept = [variable.path for variable, _, _ in table if str(variable.dtype) == "uint8"]
    if kept:
        raise ValueError(
            "Expected float weights; these are kept in GGUF's blocks (a model from "
            f"`from_gguf(..., keep_blocks=True)`): {kept[:4]}. Load the file without "
            "keep_blocks to write it out."
        )

    return {
        prefix + name: transform.to_theirs(keras.ops.convert_to_numpy(variable).astype("float32"))
        for variable, name, transform in table
    }


def warn_unused(cls, unused):
    """Lists checkpoint variables the model `cls` does not use in a warning (the first
    12, and how many in all), pointing at the caller of `from_pretrained`."""
    if unused:
        shown = ", ".join(unused[:12]) + (
            f", ... ({len(unused)} in all)" if len(unused) > 12 else ""
        )
        warnings.warn(f"Checkpoint variables not used by {cls.__name__}: {shown}", stacklevel=4)
