"""Attention layers: scoring functions, multi-head attention, positions, blocks."""

from keras_attn.layers import scoring
from keras_attn.layers.activations import gelu_approximate
from keras_attn.layers.disentangled_attention import DisentangledAttention
from keras_attn.layers.dropout import Dropout
from keras_attn.layers.hard_attention import HardAttention, ReinforceBaseline, reinforce_loss
from keras_attn.layers.knowledge_fusion_block import KnowledgeFusionBlock
from keras_attn.layers.learned_position_embedding import LearnedPositionEmbedding
from keras_attn.layers.local_attention import LocalAttention
from keras_attn.layers.mean_pooling import MeanPooling
from keras_attn.layers.multi_head_attention import MultiHeadAttention
from keras_attn.layers.position_bias import AlibiBias, PositionBias, RelativePositionBias
from keras_attn.layers.quantized_blocks import BlockDense, BlockEmbedding
from keras_attn.layers.relative_attention import RelativeMultiHeadAttention, relative_sinusoids
from keras_attn.layers.rotary_embedding import RotaryEmbedding
from keras_attn.layers.scalar_mix import ScalarMix
from keras_attn.layers.scoring import (
    AdditiveScore,
    AttentionScore,
    CosineScore,
    DotScore,
    GeneralScore,
    LocationScore,
    ScaledDotScore,
)
from keras_attn.layers.sinusoidal_position_embedding import SinusoidalPositionEmbedding
from keras_attn.layers.transformer_decoder_block import TransformerDecoderBlock
from keras_attn.layers.transformer_encoder_block import TransformerEncoderBlock
from keras_attn.layers.transformer_xl_block import TransformerXLBlock

__all__ = [
    "AdditiveScore",
    "AlibiBias",
    "AttentionScore",
    "BlockDense",
    "BlockEmbedding",
    "CosineScore",
    "DisentangledAttention",
    "DotScore",
    "Dropout",
    "GeneralScore",
    "HardAttention",
    "LearnedPositionEmbedding",
    "LocalAttention",
    "LocationScore",
    "MeanPooling",
    "MultiHeadAttention",
    "PositionBias",
    "ReinforceBaseline",
    "RelativeMultiHeadAttention",
    "RelativePositionBias",
    "RotaryEmbedding",
    "ScalarMix",
    "ScaledDotScore",
    "SinusoidalPositionEmbedding",
    "TransformerDecoderBlock",
    "TransformerEncoderBlock",
    "KnowledgeFusionBlock",
    "TransformerXLBlock",
    "gelu_approximate",
    "reinforce_loss",
    "relative_sinusoids",
    "scoring",
]
