"""attnkit: attention mechanisms and Transformers from Dive into Deep Learning.

The public API is re-exported here; the book's names and signatures live in
``attnkit.d2l`` (``from attnkit import d2l``).
"""

from attnkit.attention import (
    AdditiveAttention,
    DotProductAttention,
    MultiHeadAttention,
    NadarayaWatson,
    NWKernelRegression,
    PositionalEncoding,
    as_mask,
    causal_mask,
    lengths_to_mask,
    masked_softmax,
    scaled_dot_product,
    sequence_mask,
    sinusoidal_table,
)
from attnkit.data.hub import DatasetUnavailableError, download
from attnkit.viz import plot_curves, show_heatmaps

__version__ = "0.1.0"

__all__ = [
    "AdditiveAttention",
    "DatasetUnavailableError",
    "DotProductAttention",
    "MultiHeadAttention",
    "NWKernelRegression",
    "NadarayaWatson",
    "PositionalEncoding",
    "__version__",
    "as_mask",
    "causal_mask",
    "download",
    "lengths_to_mask",
    "masked_softmax",
    "plot_curves",
    "scaled_dot_product",
    "sequence_mask",
    "show_heatmaps",
    "sinusoidal_table",
]
