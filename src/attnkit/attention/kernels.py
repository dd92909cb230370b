"""Which kernel computes softmax(q kᵀ / sqrt(Dh) + mask) v when no weights are asked for.

Shape legend: Q queries, K keys, Dh head width, Dv value width.

Two kernels give the same function:

- ``"sdpa"``: PyTorch's fused ``F.scaled_dot_product_attention`` (flash or memory-efficient
  attention where the backend has them);
- ``"matmul"``: explicit matrix products, ``softmax(q kᵀ · scale, masked) v``: two batched
  matmuls and a softmax, the form of the book and of most peers' "eager" attention.

Which is faster depends on the device, the dtype and the lengths, so the choice is made
per call from measurements (``benchmarks/kernels/attention_kernels.py`` measures both on the
machine at hand, forward and backward; its table is in docs/benchmarks.md): on the CPU in
bfloat16 or float16 at up to ``MATMUL_MAX_KEYS`` keys, the explicit products win (2-5x at
16-128 keys, 1.2x at 512, measured 2026-11-25 on 2 cores); everywhere else, and always in
float32 (where the fused kernel wins at every length, and the precision the tests pin
values in), the fused kernel, except for one query per row over many rows (a decoding step
of a large batch or beam: from ``ONE_QUERY_MATMUL_MIN_ROWS`` batch x head rows), where the
explicit products win (measured 2026-12-07, 2 threads, AVX-512 EPYC, cross-attention over
40 contiguous keys, heads of 64, explicit / fused speed: 0.86x at 128 rows, 1.1-1.2x at
512, 2.0-2.3x at 2,048). ``set_attention_kernel("sdpa" | "matmul" | "auto")`` or the environment
variable ``ATTNKIT_ATTENTION_KERNEL`` overrides the choice for the whole process.
"""

from __future__ import annotations

import math
import os

import torch
from torch import Tensor

from attnkit._validate import one_of
from attnkit.attention.dropout import dropout as _dropout
from attnkit.attention.masking import causal_mask, masked_softmax

__all__ = [
    "KERNELS",
    "MATMUL_MAX_KEYS",
    "ONE_QUERY_MATMUL_MIN_ROWS",
    "attention_kernel",
    "choose_kernel",
    "explicit_attention",
    "explicit_products",
    "set_attention_kernel",
]

KERNELS = ("auto", "sdpa", "matmul")
_HALF = (torch.bfloat16, torch.float16)
# the longest keys at which explicit products beat the fused CPU kernel in half precision
# (benchmarks/kernels/attention_kernels.py: 1.17-1.24x at 512 keys, 0.74-0.91x at 1024)
MATMUL_MAX_KEYS = 512
# batch x head rows from which one query per row runs as explicit products on the CPU
ONE_QUERY_MATMUL_MIN_ROWS = 512

_kernel = one_of(
    "ATTNKIT_ATTENTION_KERNEL", os.environ.get("ATTNKIT_ATTENTION_KERNEL", "auto"), KERNELS
)


def set_attention_kernel(name: str) -> str:
    """Use ``name`` ("sdpa", "matmul", or "auto": by measurement) from now on, in every
    attention layer of this process; returns the previous setting."""
    global _kernel
    previous, _kernel = _kernel, one_of("kernel", name, KERNELS)
    return previous


def attention_kernel() -> str:
    """The process-wide setting: "auto" (the default), "sdpa" or "matmul"."""
    return _kernel


def choose_kernel(q: Tensor, num_keys: int) -> str:
    """The kernel for queries ``q`` (their device and dtype) over ``num_keys`` keys."""
    if _kernel != "auto":
        return _kernel
    if q.device.type == "cpu" and q.dtype in _HALF and num_keys <= MATMUL_MAX_KEYS:
        return "matmul"
    if (
        q.device.type == "cpu"
        and q.shape[-2] == 1
        and q.numel() >= ONE_QUERY_MATMUL_MIN_ROWS * q.shape[-1]
    ):
        return "matmul"
    return "sdpa"


def explicit_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
) -> Tensor:
    """softmax(q kᵀ / sqrt(Dh)) v by explicit products, ``F.scaled_dot_product_attention``'s
    function (and its arguments) with attnkit's mask convention.

    Args:
        q: (..., Q, Dh); k: (..., K, Dh); v: (..., K, Dv).
        mask: bool, broadcastable to (..., Q, K), True = attend; or None.
        dropout_p: dropout on the weights (0.0 in eval mode).
        is_causal: query i (the i-th of the last Q positions) attends keys j <= i + K - Q.

    Returns:
        (..., Q, Dv); a row with no key to attend is zero.
    """
    if is_causal:
        causal = causal_mask(q.shape[-2], k.shape[-2], device=q.device)  # (Q, K)
        mask = causal if mask is None else mask & causal
    return explicit_products(q, k, v, mask, dropout_p)[0]


def explicit_products(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout_p: float = 0.0
) -> tuple[Tensor, Tensor]:
    """The explicit computation, with its weights: q (..., Q, Dh), k (..., K, Dh), v
    (..., K, Dv), a bool mask broadcastable to (..., Q, K) (True = attend) -> output
    (..., Q, Dv) and the weights before dropout (..., Q, K); masked keys weigh exactly 0 and
    a row with no key to attend is zero."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (..., Q, K)
    weights = masked_softmax(scores, mask)  # (..., Q, K)
    dropped = _dropout(weights, dropout_p) if dropout_p > 0 else weights
    return dropped @ v, weights  # (..., Q, Dv), (..., Q, K)
