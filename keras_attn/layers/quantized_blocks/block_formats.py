"""GGUF's quantized block formats, and their weights as floats in `keras.ops` (every
backend): the arithmetic of ggml's `dequantize_row_*`, written from the formats' layouts
and checked against `gguf.quants.dequantize` (tests/layers/test_quantized_blocks.py)."""

import dataclasses

from keras import ops


@dataclasses.dataclass(frozen=True)
class BlockFormat:
    """One GGUF block format: `code` (GGUF's tensor type number), `weights` per block
    and the block's `bytes`."""

    name: str
    code: int
    weights: int
    bytes: int
    by_eights: bool = False  # rows repacked by eights (`repack`)

    def row_bytes(self, columns):
        """The bytes of one row of `columns` weights; a `ValueError` when the columns do
        not fill whole blocks."""
        if columns % self.weights:
            raise ValueError(
                f"Expected a row length divisible by {self.name}'s block of {self.weights} "
                f"weights. Received: {columns} columns"
            )
        return columns // self.weights * self.bytes


FORMATS = {
    f.name: f
    for f in (
        BlockFormat("Q4_0", 2, 32, 18),
        BlockFormat("Q4_1", 3, 32, 20),
        BlockFormat("Q5_0", 6, 32, 22),
        BlockFormat("Q5_1", 7, 32, 24),
        BlockFormat("Q8_0", 8, 32, 34),
        BlockFormat("Q4_K", 12, 256, 144),
        BlockFormat("Q6_K", 14, 256, 210),
        BlockFormat("Q4_0x8", 2, 32, 18, by_eights=True),
        BlockFormat("Q4_1x8", 3, 32, 20, by_eights=True),
    )
}


def block_format(name):
    """The `BlockFormat` named `name` (`"Q4_1"`); a `ValueError` lists the ones we read."""
    if name not in FORMATS:
        raise ValueError(f"Expected a block format in {sorted(FORMATS)}. Received: {name!r}")
    return FORMATS[name]


def _half(low, high):
    """IEEE half-precision numbers from their two bytes (int32 tensors, little-endian)."""
    bits = low + high * 256
    exponent = ops.bitwise_and(ops.right_shift(bits, 10), 31)
    mantissa = ops.cast(ops.bitwise_and(bits, 1023), "float32")
    power = ops.power(2.0, ops.cast(exponent, "float32") - 25.0)
    value = ops.where(exponent == 0, mantissa * 2.0**-24, (1024.0 + mantissa) * power)
    value = ops.where(exponent == 31, float("inf"), value)
    return ops.where(bits >= 32768, -value, value)


def _nibbles(q):
    """`(..., 16)` bytes -> `(..., 32)` weights: the low nibbles, then the high ones."""
    return ops.concatenate([ops.bitwise_and(q, 15), ops.right_shift(q, 4)], axis=-1)


def _fifth_bits(qh):
    """`(..., 4)` bytes -> `(..., 32)` bit j of their little-endian 32-bit word, times 16."""
    index = [j // 8 for j in range(32)]
    shift = ops.convert_to_tensor([j % 8 for j in range(32)], "int32")
    bits = ops.bitwise_and(ops.right_shift(ops.take(qh, index, axis=-1), shift), 1)
    return bits * 16


def _k_scales(s):
    """Q4_K's 12 scale bytes `(..., 12)` -> the 8 sub-blocks' 6-bit scales and minimums."""
    low = [0, 1, 2, 3]
    high = [4, 5, 6, 7]
    scale_low = ops.bitwise_and(ops.take(s, low, axis=-1), 63)
    min_low = ops.bitwise_and(ops.take(s, high, axis=-1), 63)
    tail = ops.take(s, [8, 9, 10, 11], axis=-1)
    scale_high = ops.bitwise_and(tail, 15) + ops.right_shift(ops.take(s, low, axis=-1), 6) * 16
    min_high = ops.right_shift(tail, 4) + ops.right_shift(ops.take(s, high, axis=-1), 6) * 16
    scales = ops.concatenate([scale_low, scale_high], axis=-1)
    minimums = ops.concatenate([min_low, min_high], axis=-1)
    return ops.cast(scales, "float32"), ops.cast(minimums, "float32")


def _signed(q):
    return ops.where(q >= 128, q - 256, q)


def repack(blocks, format_name):
    """GGUF's Q4_0 or Q4_1 rows `(rows, row_bytes)` (NumPy uint8, rows a multiple of 8)
    repacked by eights for the custom call's int8 products (block_product.cc: for each
    block, the 8 rows' scales, then their minimums, then their nibbles 4 bytes of each row
    at a time); returns them and the repacked format's name (`"Q4_1x8"`)."""
    import numpy as np

    f = block_format(format_name)
    if f.name not in ("Q4_0", "Q4_1") or blocks.shape[0] % 8:
        raise ValueError(
            f"Expected Q4_0 or Q4_1 rows by eights. Received: {f.name}, {blocks.shape[0]} rows"
        )
    rows, row_bytes = blocks.shape
    b = blocks.reshape(rows // 8, 8, -1, f.bytes).transpose(0, 2, 1, 3)  # (groups, j, 8, B)
    head = 4 if f.name == "Q4_1" else 2
    scales = [b[..., i : i + 2].reshape(*b.shape[:2], 16) for i in range(0, head, 2)]
    nibbles = b[..., head:].reshape(*b.shape[:2], 8, 4, 4).transpose(0, 1, 3, 2, 4)
    packed = np.concatenate([*scales, nibbles.reshape(*b.shape[:2], 128)], axis=-1)
    return np.ascontiguousarray(packed.reshape(rows, row_bytes)), f.name + "x8"


def _unpack(b, f):
    """`repack`'s inverse in `keras.ops`: `(groups, blocks, 8 * bytes)` -> `(rows, blocks,
    bytes)`."""
    head = 4 if f.name == "Q4_1x8" else 2
    nb = b.shape[1]
    parts = [ops.reshape(b[..., 8 * i : 8 * i + 16], (-1, nb, 8, 2)) for i in range(0, head, 2)]
    nibbles = ops.reshape(b[..., 8 * head :], (-1, nb, 4, 8, 4))
    nibbles = ops.reshape(ops.transpose(nibbles, (0, 1, 3, 2, 4)), (-1, nb, 8, 16))
    rows = ops.concatenate([*parts, nibbles], axis=-1)  # (groups, blocks, 8, bytes)
    return ops.reshape(ops.transpose(rows, (0, 2, 1, 3)), (-1, nb, f.bytes))


def dequantize(blocks, format_name, columns):
    """The float32 weights `(rows, columns)` of `blocks` `(rows, row_bytes)` (uint8: each
    row's blocks as GGUF stores them, or `repack`'s) in the block format `format_name`."""
    f = block_format(format_name)
    nb = columns // f.weights
    if f.by_eights:
        grouped = ops.reshape(ops.cast(blocks, "int32"), (-1, nb, 8 * f.bytes))
        return dequantize(_unpack(grouped, f), f.name[:-2], columns)
    b = ops.reshape(ops.cast(blocks, "int32"), (-1, nb, f.bytes))
    if f.name in ("Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"):
        d = _half(b[..., 0:1], b[..., 1:2])
        if f.name == "Q8_0":
            w = d * ops.cast(_signed(b[..., 2:]), "float32")
        elif f.name == "Q4_0":
            w = d * ops.cast(_nibbles(b[..., 2:]) - 8, "float32")
        elif f.name == "Q5_0":
            w = d * ops.cast(_nibbles(b[..., 6:]) + _fifth_bits(b[..., 2:6]) - 16, "float32")
        else:
            m = _half(b[..., 2:3], b[..., 3:4])
            q = _nibbles(b[..., 4:]) if f.name == "Q4_1" else (
                _nibbles(b[..., 8:]) + _fifth_bits(b[..., 4:8])
            )  # fmt: skip
            w = d * ops.cast(q, "float32") + m
    elif f.name == "Q4_K":
        d, dmin = _half(b[..., 0:1], b[..., 1:2]), _half(b[..., 2:3], b[..., 3:4])
        scales, minimums = _k_scales(b[..., 4:16])
        chunks = ops.reshape(b[..., 16:], (-1, nb, 4, 1, 32))
        q = ops.concatenate([ops.bitwise_and(chunks, 15), ops.right_shift(chunks, 4)], axis=-2)
        q = ops.cast(ops.reshape(q, (-1, nb, 8, 32)), "float32")
        w = d[..., None] * scales[..., None] * q - dmin[..., None] * minimums[..., None]
    else:  # Q6_K
        ql = ops.reshape(b[..., :128], (-1, nb, 2, 1, 2, 32))
        low = ops.concatenate([ops.bitwise_and(ql, 15), ops.right_shift(ql, 4)], axis=-3)
        low = ops.reshape(low, (-1, nb, 2, 4, 32))
        qh = ops.reshape(b[..., 128:192], (-1, nb, 2, 1, 32))
        shifts = ops.reshape(ops.convert_to_tensor([0, 2, 4, 6], "int32"), (4, 1))
        high = ops.bitwise_and(ops.right_shift(qh, shifts), 3)
        q = ops.cast(low + high * 16 - 32, "float32")
        scales = ops.cast(_signed(ops.reshape(b[..., 192:208], (-1, nb, 2, 4, 2, 1))), "float32")
        scales = ops.reshape(ops.repeat(scales, 16, axis=-1), (-1, nb, 2, 4, 32))
        d = _half(b[..., 208:209], b[..., 209:210])
        w = d[..., None, None] * scales * q
    return ops.reshape(w, (-1, columns))


def check_kernel_formats(kernel_formats, names):
    """`kernel_formats` (a layer's argument: sub-layer name -> block format, or `None`)
    checked: a dict whose keys are among `names` and whose values are format names;
    returned as a plain dict (`{}` for `None`)."""
    if kernel_formats is None:
        return {}
    if not isinstance(kernel_formats, dict):
        raise TypeError(
            "Expected `kernel_formats` to be a dict of sub-layer name -> block format. "
            f"Received: {type(kernel_formats).__name__}"
        )
    unknown = sorted(set(kernel_formats) - set(names))
    if unknown:
        raise ValueError(
            f"Expected `kernel_formats` keys among {sorted(names)}. Received: {unknown}"
        )
    return {name: block_format(value).name for name, value in kernel_formats.items()}


# Where each format's half-precision scales sit in its block (byte offsets).
_SCALE_OFFSETS = {"Q4_1": (0, 2), "Q5_1": (0, 2), "Q4_K": (0, 2), "Q6_K": (208,)}
_SCALE_OFFSETS.update({"Q4_1x8": tuple(range(0, 32, 2)), "Q4_0x8": tuple(range(0, 16, 2))})


def non_finite_scales(blocks, format_name):
    """How many half-precision scales of `blocks` (a NumPy uint8 `(rows, row_bytes)`)
    are infinite or NaN: one would make every answer through its row NaN."""
    import numpy as np

    f = block_format(format_name)
    b = np.asarray(blocks).reshape(-1, 8 * f.bytes if f.by_eights else f.bytes)
    count = 0
    for offset in _SCALE_OFFSETS.get(f.name, (0,)):
        count += int(np.count_nonzero((b[:, offset + 1] & 0x7C) == 0x7C))
    return count
