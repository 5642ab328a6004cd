"""`keras_attn.models.gguf.header`: our walk over a GGUF header reads every key, value
type and tensor as `gguf`'s own reader does (the reference), strings that are no UTF-8
kept as their bytes, and refuses what the file cannot hold; `GGUFFile` reads a
big-endian file's float tensors and names the quantised ones it cannot."""

import struct

import numpy as np
import pytest

from keras_attn.checkpoints import CheckpointError
from keras_attn.models.gguf.header import MAX_DIMS, Header, TensorInfo, read_header
from keras_attn.models.gguf.reader import GGUFFile
from tests.models.llama.gguf_files import gguf_header, gguf_string, write_llama_gguf

gguf = pytest.importorskip("gguf")


def _every_value_type(path, endianess=None):
    """A GGUF file with a key of every value type (arrays of each scalar, of strings, one
    string and one array item no UTF-8), an F32, an F16 and a Q8_0 tensor."""
    kinds = gguf.GGUFValueType
    writer = gguf.GGUFWriter(str(path), "llama", endianess=endianess or gguf.GGUFEndian.LITTLE)
    scalars = {
        kinds.UINT8: 250, kinds.INT8: -7, kinds.UINT16: 65_000, kinds.INT16: -30_000,
        kinds.UINT32: 4_000_000_000, kinds.INT32: -2_000_000_000, kinds.FLOAT32: 0.1,
        kinds.BOOL: True, kinds.UINT64: 2**63 + 5, kinds.INT64: -(2**62), kinds.FLOAT64: 1e-300,
    }  # fmt: skip
    for kind, value in scalars.items():
        writer.add_key_value(f"scalar.{kind.name}", value, kind)
        writer.add_key_value(f"array.{kind.name}", [value, value], kinds.ARRAY, kind)
    writer.add_key_value("text", "héllo 🤗", kinds.STRING)
    writer.add_key_value("bytes", b"caf\xe9", kinds.STRING)
    writer.add_key_value("texts", [b"a", b"\xff b", "ü".encode()], kinds.ARRAY, kinds.STRING)
    rng = np.random.default_rng(0)
    writer.add_tensor("f32", rng.standard_normal((3, 64)).astype("float32"))
    writer.add_tensor("f16", rng.standard_normal((2, 32)).astype("float16"))
    q8 = gguf.quants.quantize(
        rng.standard_normal((2, 64)).astype("float32"), gguf.GGMLQuantizationType.Q8_0
    )
    writer.add_tensor("q8", q8, raw_shape=q8.shape, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def test_every_key_value_type_and_tensor_reads_as_gguf_reads_them(tmp_path):
    path = tmp_path / "every.gguf"
    _every_value_type(path)
    header = read_header(path)
    assert isinstance(header, Header) and header.order == "<"
    reference = gguf.GGUFReader(path)
    fields = {k: f for k, f in reference.fields.items() if not k.startswith("GGUF.")}
    assert list(header.metadata) == list(fields)
    for key, field in fields.items():
        item = field.types[-1] if field.types[0] == gguf.GGUFValueType.ARRAY else None
        assert header.types[key] == (field.types[0], item), key
        if gguf.GGUFValueType.STRING in field.types:
            continue  # gguf's `contents` decodes strictly; the strings are checked below
        expected = field.contents()
        assert header.metadata[key] == expected, key
        assert type(header.metadata[key]) is type(expected), key
    assert header.metadata["text"] == "héllo 🤗" and "text" not in header.undecodable
    assert header.metadata["bytes"] == "caf\ufffd" and header.undecodable["bytes"] == b"caf\xe9"
    assert header.metadata["texts"] == ["a", "\ufffd b", "ü"]
    assert header.undecodable["texts"] == [b"a", b"\xff b", "ü".encode()]
    assert header.types["texts"] == (gguf.GGUFValueType.ARRAY, gguf.GGUFValueType.STRING)
    for tensor in reference.tensors:
        info = header.tensors[tensor.name]
        assert isinstance(info, TensorInfo)
        assert info == (tuple(tensor.shape.tolist()), tensor.tensor_type, tensor.data_offset,
                        tensor.n_bytes)  # fmt: skip
        ours = GGUFFile(path).tensor(tensor.name)
        theirs = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
        np.testing.assert_array_equal(ours, theirs.reshape(ours.shape))


def test_a_big_endian_files_float_tensors_read_and_its_quantised_ones_are_named(tmp_path):
    little, big = tmp_path / "little.gguf", tmp_path / "big.gguf"
    _every_value_type(little)
    _every_value_type(big, gguf.GGUFEndian.BIG)
    assert read_header(big).order == ">"
    assert read_header(big).metadata == read_header(little).metadata
    ours, reference = GGUFFile(big), GGUFFile(little)
    for name in ("f32", "f16"):
        np.testing.assert_array_equal(ours.tensor(name), reference.tensor(name))
        assert ours.tensor(name).dtype == np.float32
    with pytest.raises(CheckpointError, match="q8 is stored as Q8_0 in a big-endian file"):
        ours.tensor("q8")


def _tensor_info(name, dims, kind=0, offset=0):
    return gguf_string(name) + struct.pack(f"<I{len(dims)}QIQ", len(dims), *dims, kind, offset)


@pytest.mark.parametrize(
    "data, message",
    [
        (b"GGU", "not a GGUF file"),
        (gguf_header(tensors=2) + _tensor_info("t", [32]) * 2 + bytes(320), "'t' appears twice"),
        (gguf_header(tensors=1) + _tensor_info("t", [1] * (MAX_DIMS + 1)), "has 5 dimensions"),
        (gguf_header(("k", 8, struct.pack("<Q", 9) + b"ab")), "bytes of k"),
        (gguf_header(("k", 13, b"")), "k has value type 13"),
        (gguf_header(("k", 9, struct.pack("<IQ", 13, 1))), "array of value type 13"),
        # Items that the file holds, but that Python would hold in 28 times their bytes.
        (
            gguf_header(("k", 9, struct.pack("<IQ", 0, (1 << 24) + 1))) + bytes((1 << 24) + 1),
            "k holds 16777217 items",
        ),
        (gguf_header(tensors=1) + _tensor_info("t", [32], offset=64) + bytes(160), "past the end"),
    ],
)
def test_what_the_file_cannot_hold_is_refused_by_name(tmp_path, data, message):
    path = tmp_path / "crafted.gguf"
    path.write_bytes(data)
    with pytest.raises(CheckpointError, match=message):
        read_header(path)


def test_a_files_tensors_offsets_are_absolute_and_aligned(tmp_path):
    path = tmp_path / "tiny.gguf"
    stored = write_llama_gguf(path, quantize=True)
    header = read_header(path)
    data = path.read_bytes()
    for name, info in header.tensors.items():
        assert info.offset % 32 == 0 and info.offset + info.length <= len(data)
        values = GGUFFile(path).tensor(name)
        np.testing.assert_array_equal(values.reshape(stored[name].shape), stored[name])
