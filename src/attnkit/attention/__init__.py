"""Attention building blocks."""

from attnkit.attention.alibi import ALiBi, alibi_bias, alibi_slopes
from attnkit.attention.bilinear import BilinearAttention
from attnkit.attention.dropout import Dropout
from attnkit.attention.kernel_regression import NadarayaWatson, NWKernelRegression
from attnkit.attention.kernels import attention_kernel, set_attention_kernel
from attnkit.attention.key_padding import key_padded_attention
from attnkit.attention.kv_cache import KVCache
from attnkit.attention.lazy import LazyMultiHeadAttention
from attnkit.attention.masking import (
    as_mask,
    attention_mask,
    causal_mask,
    lengths_to_mask,
    masked_softmax,
    sequence_mask,
)
from attnkit.attention.multihead import MultiHeadAttention
from attnkit.attention.positional import (
    POSITIONS,
    LearnedPositions,
    PositionalEncoding,
    SinusoidalPositions,
    input_positions,
    sinusoidal_table,
)
from attnkit.attention.recording import record_attention
from attnkit.attention.rope import RotaryEmbedding, apply_rope, rope_cos_sin, rope_frequencies
from attnkit.attention.single_head import AdditiveAttention, DotProductAttention, scaled_dot_product

__all__ = [
    "POSITIONS",
    "ALiBi",
    "AdditiveAttention",
    "BilinearAttention",
    "DotProductAttention",
    "Dropout",
    "KVCache",
    "LazyMultiHeadAttention",
    "LearnedPositions",
    "MultiHeadAttention",
    "NWKernelRegression",
    "NadarayaWatson",
    "PositionalEncoding",
    "RotaryEmbedding",
    "SinusoidalPositions",
    "alibi_bias",
    "alibi_slopes",
    "apply_rope",
    "as_mask",
    "attention_kernel",
    "attention_mask",
    "causal_mask",
    "input_positions",
    "key_padded_attention",
    "lengths_to_mask",
    "masked_softmax",
    "record_attention",
    "rope_cos_sin",
    "rope_frequencies",
    "scaled_dot_product",
    "sequence_mask",
    "set_attention_kernel",
    "sinusoidal_table",
]
