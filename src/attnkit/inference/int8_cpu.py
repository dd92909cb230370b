"""What this CPU's int8 products can do, for :mod:`attnkit.inference.int8`: whether an 8-bit
product is exact (VNNI or AMX, and the libraries allowed to use them), what runs where it
is not, and whether a decoder's caches of the encoder memory go to bfloat16.
"""

from __future__ import annotations

import functools
import os

import torch

__all__ = ["INT8_WITHOUT_VNNI", "exact_int8_product", "int8_cache_dtype", "int8_without_vnni"]

# without VNNI: FBGEMM with 7-bit inputs rather than the float32 product. Measured
# 2026-12-07 on the AVX-512 VNNI EPYC with every library held to AVX2
# (FBGEMM_ENABLE_INSTRUCTIONS=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 ATEN_CPU_CAPABILITY=avx2, one
# thread): 1.2-1.7x the float32 product at OPUS-MT's layers, the output layer 7.7x at one
# row and 1.07x at 256, 512 x 512 at 1-4 rows 0.85-0.89x; errors about twice the 8-bit
# ones; the 30-minute Tatoeba model's test BLEU within 0.2 of float32's, greedy and beam 4
INT8_WITHOUT_VNNI = True


@functools.cache  # asked on every call: the CPU does not change
def exact_int8_product() -> bool:
    """Whether this CPU multiplies uint8 by int8 exactly (AVX-512 VNNI or AMX), and the
    libraries may use it: ``FBGEMM_ENABLE_INSTRUCTIONS`` and ``ONEDNN_MAX_CPU_ISA`` can
    hold them to older kernels (AVX2 or AVX-512 without VNNI). Those sum pairs of
    products in saturating 16-bit lanes (vpmaddubsw), so a product of 8-bit inputs can be
    off by far more than the rounding bound (measured on a 2026-11-28 AVX2-only EPYC:
    outputs beyond the bound, a trained translator's next tokens 79% unchanged); there
    the inputs are rounded to 7 bits (:func:`int8_without_vnni`)."""
    hardware = _cpu_has("_is_vnni_supported", "_is_amx_tile_supported")
    fbgemm = os.environ.get("FBGEMM_ENABLE_INSTRUCTIONS", "").upper()
    onednn = os.environ.get("ONEDNN_MAX_CPU_ISA", os.environ.get("DNNL_MAX_CPU_ISA", "")).upper()
    held = fbgemm in ("AVX2", "AVX512", "AVX512_256") or onednn not in _ONEDNN_VNNI_ISAS
    return hardware and not held


def int8_cache_dtype() -> torch.dtype | None:
    """The precision ``quantize_int8`` gives a decoder's key/value caches of the encoder
    memory: None (the activations' float32) unless ``ATTNKIT_INT8_CACHE=bfloat16`` asks for
    bfloat16 and the CPU computes in it (AVX-512 BF16 or AMX). A decoding step's
    cross-attention reads every source position of every row once per layer; at a large
    batch or beam that is bound by memory, and its products ran 2-2.3x faster on half the
    bytes (2026-12-07, the AVX-512 EPYC: beam 4 at batch 64 of OPUS-MT's shapes 2-5% faster in
    all, from ``MEMORY_CACHE_DTYPE_MIN_ROWS`` sentences). Off by default: PyTorch's bf16
    products pay a fixed cost per call and lay out a new kernel for every new shape, so on
    the 30-minute Tatoeba model (short sentences, of every length) decoding was slower, the
    first pass over its test sentences 4x. Its rounding (8 significant bits) is finer than
    the int8 products' inputs' (127 steps of a row's range)."""
    if os.environ.get("ATTNKIT_INT8_CACHE", "").strip().lower() not in ("bfloat16", "bf16"):
        return None
    native = _cpu_has("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return torch.bfloat16 if native else None


def _cpu_has(*probes: str) -> bool:
    """Whether any of ``torch.cpu``'s probes (``_is_vnni_supported``, ...) says yes; one
    this PyTorch lacks says no."""
    cpu = getattr(torch, "cpu", None)
    return any(bool(getattr(cpu, name, lambda: False)()) for name in probes)


def int8_without_vnni() -> bool:
    """Whether a CPU without an exact 8-bit product runs FBGEMM's int8 product with 7-bit
    inputs (``reduce_range``: pairs of products stay within 16 bits, so the sums are exact,
    at twice the input rounding step) rather than the float32 product: set by
    ``ATTNKIT_INT8_WITHOUT_VNNI`` (1 or 0), else by :data:`INT8_WITHOUT_VNNI`."""
    value = os.environ.get("ATTNKIT_INT8_WITHOUT_VNNI")
    return INT8_WITHOUT_VNNI if value is None else value.strip() not in ("0", "")


# oneDNN ISA names (ONEDNN_MAX_CPU_ISA) that include the VNNI or AMX int8 instructions
_ONEDNN_VNNI_ISAS = (
    "",
    "ALL",
    "AVX2_VNNI",
    "AVX2_VNNI_2",
    "AVX512_CORE_VNNI",
    "AVX512_CORE_BF16",
    "AVX512_CORE_FP16",
    "AVX10_1_512",
    "AVX512_CORE_AMX",
    "AVX512_CORE_AMX_FP16",
    "AVX10_1_512_AMX",
    "AVX10_1_512_AMX_FP16",
    "AVX10_2_512",
    "AVX10_2_512_AMX_2",
)
