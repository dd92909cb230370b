"""What a computation costs, counted rather than timed: the tour's cost claims are
asserted on these counts, which do not depend on the machine or its load.

``count_ops(fn)`` runs ``fn()`` once under a dispatch mode and adds up, for every ATen
operation it runs: FLOPs of the matrix products, convolutions and fused attention
(2 per multiply-add, PyTorch's ``flop_counter`` formulas; the CPU's fused attention
kernel, which that table lacks, counted as its two matrix products), and the elements
written by every other operation that is not a view (additions, tanh, softmax, ...).

Recurrent layers: ``aten.gru``, ``aten.lstm``, ``aten.rnn_tanh``, ``aten.rnn_relu`` (their
``.input`` and packed ``.data`` overloads, and the ``*_cell`` ops) never reach the dispatch
mode: they are composite and arrive as their pieces, one ``addmm``/``mm`` for the input
products of all steps and one per step for the hidden products, counted like any product,
their gates' nonlinearities and elementwise products counted as elements. The one fused
kernel that does arrive on the CPU is oneDNN's ``mkldnn_rnn_layer``, which ``nn.LSTM`` runs
for float32 and bfloat16 without ``proj_size`` (one call per layer and direction; with
``proj_size``, in float64 or float16 it runs the composite pieces), and its backward.
Like the fused attention, it is counted as its matrix products only: per row of its input
(a step of a batch row) ``2 * 4H * (I + H)`` for the input and hidden products of the four
gates (``2 * (w_ih.numel() + w_hh.numel())``, I the layer's input width: K*H above the
first layer), twice that for the backward (the gradients of the inputs, the hidden states
and the weights); its bias additions, gates and elementwise products are hidden inside the
kernel and counted neither as FLOPs nor as elements, so ``flops`` equals the composite
path's and ``elementwise`` is lower.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import flop_registry

__all__ = ["OpCount", "count_ops"]

aten = torch.ops.aten


def _sdpa_cpu_flops(query, key, value, *args: Any, out_val=None, **kwargs: Any) -> int:
    """softmax(Q Kᵀ) V as two batched matrix products: (B, H, Q, D), (B, H, K, D), (B, H, K, Dv)."""
    *batch, q, d = query.shape
    k, dv = key.shape[-2], value.shape[-1]
    b = 1
    for n in batch:
        b *= n
    return 2 * b * q * k * d + 2 * b * q * k * dv


def _rnn_layer_flops(x, w_ih, w_hh, *args: Any, out_val=None, **kwargs: Any) -> int:
    """One layer, one direction: input ``x`` (T, B, I) or packed (rows, I), ``w_ih`` (G*H, I),
    ``w_hh`` (G*H, H): ``x @ w_ihᵀ`` and ``h @ w_hhᵀ`` on every row."""
    rows = x.numel() // x.shape[-1]
    return 2 * rows * (w_ih.numel() + w_hh.numel())


def _rnn_layer_backward_flops(*args: Any, out_val=None, **kwargs: Any) -> int:
    """Gradients of the input and hidden state and of both weights: twice the forward."""
    return 2 * _rnn_layer_flops(*args)


_FLOPS = dict(flop_registry)
_FLOPS[aten._scaled_dot_product_flash_attention_for_cpu] = _sdpa_cpu_flops
_FLOPS[aten.mkldnn_rnn_layer] = _rnn_layer_flops
_FLOPS[aten.mkldnn_rnn_layer_backward] = _rnn_layer_backward_flops
_FREE = {aten._unsafe_view, aten.detach, aten.lift_fresh}  # no arithmetic


@dataclass(frozen=True)
class OpCount:
    """FLOPs of the products, elements written by the other operations, calls made."""

    flops: int
    elementwise: int
    calls: int

    @property
    def total(self) -> int:
        return self.flops + self.elementwise


class _Counter(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.flops = self.elementwise = self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        packet = func._overloadpacket
        self.calls += 1
        if packet in _FLOPS:
            self.flops += int(_FLOPS[packet](*args, **kwargs, out_val=out))
        elif not func.is_view and packet not in _FREE:
            self.elementwise += sum(
                t.numel() for t in tree_leaves(out) if isinstance(t, torch.Tensor)
            )
        return out


def count_ops(fn: Callable[[], Any]) -> OpCount:
    """Run ``fn()`` once (without gradients) and count its operations (see the module)."""
    if not callable(fn):
        raise TypeError(f"fn must be callable, got {type(fn).__name__}")
    counter = _Counter()
    with torch.no_grad(), counter:
        fn()
    return OpCount(counter.flops, counter.elementwise, counter.calls)
