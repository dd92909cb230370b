"""Attention building blocks."""

from attnkit.attention.bilinear import BilinearAttention
from attnkit.attention.dropout import Dropout
from attnkit.attention.kernel_regression import NadarayaWatson, NWKernelRegression
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
from attnkit.attention.positional import PositionalEncoding, sinusoidal_table
from attnkit.attention.recording import record_attention
from attnkit.attention.single_head import AdditiveAttention, DotProductAttention, scaled_dot_product

__all__ = [
    "AdditiveAttention",
    "BilinearAttention",
    "DotProductAttention",
    "Dropout",
    "KVCache",
    "LazyMultiHeadAttention",
    "MultiHeadAttention",
    "NWKernelRegression",
    "NadarayaWatson",
    "PositionalEncoding",
    "as_mask",
    "attention_mask",
    "causal_mask",
    "key_padded_attention",
    "lengths_to_mask",
    "masked_softmax",
    "record_attention",
    "scaled_dot_product",
    "sequence_mask",
    "sinusoidal_table",
]
