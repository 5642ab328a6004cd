"""Weights kept in GGUF's quantized block formats: the formats (`FORMATS`,
`dequantize`), the product that reads them (`block_product`, on JAX's CPU backend a
custom call: `native`), and the layers that hold them (`BlockDense`, `BlockEmbedding`)."""

from keras_attn.layers.quantized_blocks.block_formats import FORMATS, BlockFormat, dequantize
from keras_attn.layers.quantized_blocks.block_layers import (
    NATIVE_ROWS,
    BlockDense,
    BlockEmbedding,
    block_product,
)

__all__ = [
    "FORMATS",
    "NATIVE_ROWS",
    "BlockDense",
    "BlockEmbedding",
    "BlockFormat",
    "block_product",
    "dequantize",
]
