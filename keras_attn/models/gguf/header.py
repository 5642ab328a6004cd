"""A GGUF file's header read in one walk that trusts no size it reads: the metadata's keys
and values, and each tensor's name, shape, type and place in the file.

`gguf`'s own reader builds a NumPy view for every item of every array it parses: 4 s for
SmolLM2's 49,152 tokens, 15 s for Gemma 3's 262,144. This walk reads the same header in
hundredths of a second; `gguf` still dequantises the tensors (`GGUFFile.tensor`).
"""

import collections
import math
import mmap
import os
import pathlib
import struct

import numpy as np

from keras_attn.checkpoints.checkpoint_errors import CheckpointError

MAGIC = b"GGUF"
# A header's magic, version and two counts; the least a key and its value take (an
# empty key, its type and a one-byte value); the least a tensor's description takes.
_HEADER_BYTES = 4 + 4 + 8 + 8
_LEAST_KEY_VALUE = 8 + 4 + 1
_LEAST_TENSOR_INFO = 8 + 4 + 4 + 8
# GGML's most dimensions for a tensor (GGML_MAX_DIMS).
MAX_DIMS = 4
# The most items of an array read into Python (each item an object of 24 bytes or more):
# 64 times Gemma 3's 262,144 tokens, well past any vocabulary or merge list.
MAX_ARRAY_ITEMS = 1 << 24
# GGUF's value types (gguf.GGUFValueType): its scalars' struct formats, a string, an array.
SCALARS = dict(zip((0, 1, 2, 3, 4, 5, 6, 7, 10, 11, 12), "BbHhIif?Qqd", strict=True))
STRING, ARRAY = 8, 9

TensorInfo = collections.namedtuple("TensorInfo", "shape kind offset length")
TensorInfo.__doc__ = """A tensor's place in a GGUF file: `shape` in GGUF's order (innermost
first), `kind` its GGMLQuantizationType's number, `offset` and `length` its data's bytes
from the start of the file."""

Header = collections.namedtuple("Header", "metadata types undecodable tensors order")
Header.__doc__ = """What `read_header` found: `metadata` (key -> a scalar, a string or a
list), `types` (key -> `(value type, item type or None)`, GGUF's numbers), `undecodable`
(key -> the file's bytes, or list of them, where a string was no UTF-8 and `metadata`
holds U+FFFD in its place), `tensors` (name -> `TensorInfo`, in the file's order),
`order` (`"<"` or `">"`: the file's byte order)."""


def read_header(path):
    """Reads a GGUF file's header (version, counts, every key and value, every tensor's
    name, dimensions, type and data range) trusting no size it reads: every count times
    the least size of its items must fit in the bytes left, keys and tensor names must be
    UTF-8 and appear once, arrays of arrays (which llama.cpp refuses) and more than
    `MAX_DIMS` dimensions are refused, and each tensor's data must lie inside the file.

    Returns:
        A `Header`.

    Raises:
        CheckpointError: the first thing the header claims that the file cannot hold,
            with the byte offset and the key or tensor.

    Example:

    >>> from keras_attn.models.gguf.header import read_header
    >>> from keras_attn.models.gguf.reader import packaged_gguf
    >>> header = read_header(packaged_gguf("smollm2"))
    >>> header.metadata["general.architecture"], len(header.metadata["tokenizer.ggml.tokens"])
    ('llama', 49152)
    >>> header.tensors["token_embd.weight"].shape  # GGUF's order: innermost first
    (576, 49152)
    """
    try:
        import gguf  # noqa: F401 (its quantisation types name the tensors' kinds)
    except ImportError as error:
        raise ImportError("Reading GGUF files needs `pip install gguf`") from error

    path = pathlib.Path(path)
    with open(path, "rb") as handle:
        if handle.read(4) != MAGIC:
            raise CheckpointError(f"{path}: not a GGUF file (no 'GGUF' magic)")
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
            metadata, types, undecodable = {}, {}, {}
            for _ in range(kv_count):
                key = walker.string("a key")
                if key in metadata:
                    raise CheckpointError(f"{path}: the key {key!r} appears twice")
                (kind,) = walker.unpack("I", key)
                metadata[key], types[key], raw = walker.value(kind, key)
                if raw is not None:
                    undecodable[key] = raw
            alignment = metadata.get("general.alignment", 32)
            if "general.alignment" in metadata and (
                types["general.alignment"][0] != 4 or alignment < 1 or alignment & (alignment - 1)
            ):
                raise CheckpointError(f"{path}: general.alignment {alignment!r}")
            tensors = _tensors(walker, tensor_count, alignment)
    return Header(metadata, types, undecodable, tensors, order)


def _tensors(walker, count, alignment):
    """The `count` tensor descriptions at the walker: name -> `TensorInfo`, checked."""
    from gguf import GGML_QUANT_SIZES, GGMLQuantizationType

    path = walker.path
    walker.fits(count, _LEAST_TENSOR_INFO, "tensors")
    tensors = {}
    for _ in range(count):
        name = walker.string("a tensor name")
        if name in tensors:
            raise CheckpointError(f"{path}: the tensor {name!r} appears twice")
        (dims,) = walker.unpack("I", name)
        if dims > MAX_DIMS:
            raise CheckpointError(f"{path}: tensor {name} has {dims} dimensions")
        shape = walker.unpack("Q" * dims, name)
        kind, offset = walker.unpack("IQ", name)
        try:
            block, block_bytes = GGML_QUANT_SIZES[GGMLQuantizationType(kind)]
        except (ValueError, KeyError):
            raise CheckpointError(f"{path}: tensor {name} has type {kind}") from None
        if shape and shape[0] % block:
            raise CheckpointError(
                f"{path}: tensor {name} of shape {shape} is not whole blocks of {block}"
            )
        length = math.prod(shape) // block * block_bytes
        tensors[name] = TensorInfo(shape, kind, offset, length)
    start = -(-walker.offset // alignment) * alignment
    for name, (shape, kind, offset, length) in tensors.items():
        if offset % alignment:
            raise CheckpointError(
                f"{path}: tensor {name}'s data at {offset} is not aligned to {alignment}"
            )
        if start + offset + length > walker.size:
            raise CheckpointError(
                f"{path}: tensor {name}'s {length} bytes at {offset} lie past the "
                f"end of the file ({walker.size - start} bytes of tensor data)"
            )
        tensors[name] = TensorInfo(shape, kind, start + offset, length)
    return tensors


def _text(raw):
    """`(text, None)`, or `(text with U+FFFD, raw)` for bytes that are no UTF-8."""
    try:
        return raw.decode("utf-8"), None
    except UnicodeDecodeError:
        return raw.decode("utf-8", errors="replace"), raw


class _HeaderWalker:
    """A cursor over a GGUF header that checks each size it reads against the bytes left."""

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

    def at_most(self, count, key):
        """An array the file holds, refused past `MAX_ARRAY_ITEMS` items."""
        if count > MAX_ARRAY_ITEMS:
            raise CheckpointError(
                f"{self.path}: {key} holds {count} items (we read at most {MAX_ARRAY_ITEMS})"
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

    def value(self, kind, key):
        """One value of `kind`: `(value, (kind, item kind or None), raw bytes or None)`."""
        if kind in SCALARS:
            return self.unpack(SCALARS[kind], key)[0], (kind, None), None
        if kind == STRING:  # U+FFFD for bytes that are no UTF-8, as llama.cpp reads them
            text, raw = _text(self.raw_string(key))
            return text, (kind, None), raw
        if kind != ARRAY:
            raise CheckpointError(f"{self.path}: {key} has value type {kind}")
        item, count = self.unpack("IQ", key)
        if item == ARRAY:
            raise CheckpointError(
                f"{self.path}: {key} is an array of arrays (llama.cpp reads none)"
            )
        if item in SCALARS:
            width = struct.calcsize(SCALARS[item])
            self.fits(count, width, f"items of {key}")
            self.at_most(count, key)
            values = np.frombuffer(
                self.data, self.order + SCALARS[item], count, self.offset
            ).tolist()
            self.offset += count * width
            return values, (kind, item), None
        if item != STRING:
            raise CheckpointError(f"{self.path}: {key} is an array of value type {item}")
        self.fits(count, 8, f"strings of {key}")
        self.at_most(count, key)
        # One loop without calls: a vocabulary holds up to hundreds of thousands.
        offset, size, data, texts, raws = self.offset, self.size, self.data, [], []
        length_at = struct.Struct(self.order + "Q").unpack_from
        for _ in range(count):
            if offset + 8 > size:
                break
            end = offset + 8 + length_at(data, offset)[0]
            if end > size:
                break
            raws.append(data[offset + 8 : end])
            offset = end
        else:
            self.offset = offset
            try:
                texts = [raw.decode("utf-8") for raw in raws]
                raws = None
            except UnicodeDecodeError:
                texts = [raw.decode("utf-8", errors="replace") for raw in raws]
            return texts, (kind, item), raws
        raise CheckpointError(f"{self.path}: the strings of {key} run past the end of the file")
