"""Linear layers whose weights are laid out once for oneDNN: faster CPU inference.

Shape legend: N rows (every leading dimension of the input), D_in, D_out the widths.

``nn.Linear`` hands its (D_out, D_in) weight to the matrix-multiply library at every call,
which lays it out for its kernel each time. Decoding calls the same layers hundreds of
times with few rows (a decoder step of a batch of sentences is N = B rows, and the last
sentences of a batch decode alone: N = 1..4), where that work is most of the call.
``PrepackedLinear`` keeps the weight in oneDNN's own layout (``torch.ops.mkldnn``'s
``_reorder_linear_weight`` / ``_linear_pointwise``, the pair PyTorch's compiler uses for
CPU linear layers), made at the first call and again whenever the weight changes.

``benchmarks/kernels/linear_layout.py`` measured it 2026-11-25 on the 2-core test machine (fp32,
3 rounds): the recipe's 256 x 4000 output layer 1.75x ``F.linear`` at one row, 2.81x at
four, 1.67x at 64, 1.37x at 256; ``benchmarks/peers/translation.py decode`` times whole translations.
Small layers stay plain (``MIN_WEIGHTS``): oneDNN's call costs more than MKL's there.

A tied output layer multiplies by an embedding's table without an ``nn.Linear`` to
replace (``DecoderLM``'s logits ``h Eᵀ``): :class:`WeightLayout` keeps that weight's layout
for it, an inference-only attribute outside the state dict, given by
:func:`prepack_linears` to every module whose class declares ``output_layout = None``.
Measured 2026-11-28 (``benchmarks/peers/gpt2_generation.py``'s model, 2 threads, 5
interleaved rounds): GPT-2 small generation 1.12x at batch 1, 1.28x at batch 16.
A block of rows of a prepacked layer (the decoder step's cross-attention query, the first
D rows of ``W_qkv``) stays ``F.linear``: packed, 512 x 512 at one row took 159 us against
70, and whole OPUS-MT-size decoding was unchanged at batch 1, 16 and beam 4.

It is ``nn.Linear`` in everything else (a subclass: the same parameters, state dict and
``isinstance``), and it runs the plain ``F.linear`` whenever the packed path does not
apply: training mode, autograd recording, autocast, an input or weight off the CPU, a
dtype other than the weight's, or a PyTorch without the operators. Results equal
``F.linear``'s up to float rounding (another kernel sums in another order).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit._validate import positive_int
from attnkit.i18n import _

__all__ = [
    "MIN_WEIGHTS",
    "PrepackedLinear",
    "WeightLayout",
    "available",
    "pack_weight",
    "prepack_linears",
    "replace_linears",
    "weight_key",
]

_DTYPES = (torch.float32, torch.bfloat16)
_ROWS_HINT = 64  # the row count the layout is tuned for (any count works)
# oneDNN's call costs ~15 us more than MKL's: a 256 x 256 layer was slower packed at
# every row count (1 row: 7 -> 18 us; 64 rows: 54 -> 55 us), a 768 x 256 one faster from
# 4 rows (45 -> 25 us), 1024 x 256 and larger at every count measured (2026-11-25)
MIN_WEIGHTS = 1 << 17
_available: bool | None = None
_LINEAR = None  # torch.ops.mkldnn._linear_pointwise, looked up once it is known to exist


def available() -> bool:
    """Whether this PyTorch has oneDNN and its prepacked linear operators, and they agree
    with ``F.linear`` on a probe (checked once per process)."""
    global _available, _LINEAR
    if _available is None:
        _available = _probe()
        if _available:
            _LINEAR = torch.ops.mkldnn._linear_pointwise
    return _available


_bf16: bool | None = None


def _bf16_packing() -> bool:
    """Whether oneDNN lays out bf16 weights here: it needs avx_ne_convert or AVX-512
    (bw, vl, dq); an AVX2-only CPU refuses with a RuntimeError (checked once)."""
    global _bf16
    if _bf16 is None:
        try:
            torch.ops.mkldnn._reorder_linear_weight(torch.ones(8, 8, dtype=torch.bfloat16), 1)
            _bf16 = True
        except (AttributeError, RuntimeError, NotImplementedError):
            _bf16 = False
    return _bf16


def _probe() -> bool:
    if not torch.backends.mkldnn.is_available():
        return False
    try:
        ops = torch.ops.mkldnn
        generator = torch.Generator().manual_seed(0)
        weight = torch.randn(24, 16, generator=generator)
        bias = torch.randn(24, generator=generator)
        x = torch.randn(3, 5, 16, generator=generator)
        packed = ops._reorder_linear_weight(weight, _ROWS_HINT)
        out = ops._linear_pointwise(x, packed, bias, "none", [], "")
    except (AttributeError, RuntimeError, NotImplementedError):
        return False
    return bool(torch.allclose(out, F.linear(x, weight, bias), rtol=1e-4, atol=1e-4))


def pack_weight(weight: Tensor) -> Tensor | None:
    """oneDNN's layout of a frozen (D_out, D_in) weight, for :func:`linear`; None where
    the plain ``F.linear`` serves better (fewer than ``MIN_WEIGHTS`` weights) or must (no
    operators)."""
    if weight.numel() < MIN_WEIGHTS or not available():
        return None
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), _ROWS_HINT)


def linear(x: Tensor, weight: Tensor, packed: Tensor | None, bias: Tensor | None) -> Tensor:
    """x (..., D_in) -> (..., D_out) by ``packed`` (``pack_weight(weight)``) or, when it
    is None, ``F.linear``."""
    if packed is None:
        return F.linear(x, weight, bias)
    return _LINEAR(x, packed, bias, "none", [], "")


def replace_linears(model: nn.Module, make, select=lambda layer: True) -> int:
    """Replace each ``nn.Linear`` inside ``model`` (subclasses included, lazy ones not yet
    built excluded) that ``select`` accepts by ``make(layer)``, in place; returns how
    many were replaced."""
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if (
                isinstance(child, nn.Linear)
                and not isinstance(child, nn.LazyLinear)
                and select(child)
            ):
                setattr(parent, name, make(child))
                replaced += 1
    return replaced


class PrepackedLinear(nn.Linear):
    """An ``nn.Linear`` (the same parameters) whose forward, in inference on the CPU, runs
    oneDNN with the weight kept in oneDNN's layout; ``F.linear`` otherwise."""

    def __init__(self, linear: nn.Linear) -> None:
        if type(linear) is not nn.Linear:
            message = _("linear must be a torch.nn.Linear, got {type}")
            raise TypeError(message.format(type=type(linear).__name__))
        nn.Module.__init__(self)  # not nn.Linear's: it would allocate new parameters
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight = linear.weight  # (D_out, D_in): the same Parameter objects
        self.bias = linear.bias  # (D_out,) or None
        self.train(linear.training)
        self._packed: Tensor | None = None  # oneDNN's layout of the weight
        self._packed_key: tuple | None = None  # which weight (and version) it was made from

    def forward(self, input: Tensor) -> Tensor:  # (..., D_in) -> (..., D_out)
        weight = self.weight
        if self.training or not _packable(input, weight, self.bias):
            return F.linear(input, weight, self.bias)
        return _LINEAR(input, self._packed_weight(weight), self.bias, "none", [], "")

    def train(self, mode: bool = True) -> PrepackedLinear:
        """Training mode runs ``F.linear``; the packed weight is dropped and made again at
        the next inference call (training may change the weight in ways its version
        does not show: through ``.data``, or a flat buffer the parameter views)."""
        self._packed, self._packed_key = None, None
        return super().train(mode)

    def _packed_weight(self, weight: Tensor) -> Tensor:
        """oneDNN's layout of the weight, made again after a change that shows: an
        in-place update bumps its version (``load_state_dict``, an optimizer step), ``.to``
        gives a new tensor. A write through ``.data`` in eval mode does not show: call
        ``train()``/``eval()`` after one."""
        key = weight_key(weight)
        if key != self._packed_key:
            self._packed = _reorder(weight)
            self._packed_key = key
        return self._packed

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)  # copies and pickles leave oneDNN's tensor behind
        state["_packed"], state["_packed_key"] = None, None  # rebuilt at the next call
        return state


class WeightLayout:
    """oneDNN's layout of a weight a module multiplies by without owning it as an
    ``nn.Linear`` (a tied output layer: ``DecoderLM``'s logits ``h Eᵀ`` by its embedding
    table E (V, D)). Not a module and nothing of the state dict: the owner keeps its
    parameter, ties and state dict as they are. :meth:`linear` runs the packed product
    where ``PrepackedLinear`` would (and the weight has ``min_weights`` weights), made at
    the first call and again whenever the weight changes; ``F.linear`` otherwise."""

    def __init__(self, min_weights: int = MIN_WEIGHTS) -> None:
        self.min_weights = positive_int("min_weights", min_weights)
        self._packed: Tensor | None = None  # oneDNN's layout of the weight
        self._key: tuple | None = None  # which weight (and version) it was made from

    def linear(
        self, x: Tensor, weight: Tensor, bias: Tensor | None = None, *, training: bool = False
    ) -> Tensor:
        """x (..., D_in) -> (..., D_out) by weight (D_out, D_in): the owner's ``training``
        runs ``F.linear`` and drops the layout (made again at the next inference call)."""
        if training or weight.numel() < self.min_weights or not _packable(x, weight, bias):
            if training:
                self._packed, self._key = None, None
            return F.linear(x, weight, bias)
        key = weight_key(weight)
        if key != self._key:
            self._packed, self._key = _reorder(weight), key
        return _LINEAR(x, self._packed, bias, "none", [], "")

    def __getstate__(self) -> dict:
        return {"min_weights": self.min_weights, "_packed": None, "_key": None}

    def __repr__(self) -> str:
        return f"WeightLayout(min_weights={self.min_weights})"


def _packable(input: Tensor, weight: Tensor, bias: Tensor | None) -> bool:
    """Whether oneDNN's packed product may run (the layer in eval mode aside): no autograd
    recording, no autocast, CPU tensors of one packable dtype, the operators present."""
    return not (
        (torch.is_grad_enabled() and (weight.requires_grad or input.requires_grad))
        or torch.is_autocast_enabled("cpu")
        or input.dtype is not weight.dtype
        or weight.dtype not in _DTYPES
        or (weight.dtype is torch.bfloat16 and not _bf16_packing())
        or input.device.type != "cpu"
        or weight.device.type != "cpu"
        or input.dim() < 2
        or (bias is not None and bias.dtype is not weight.dtype)
        or not available()
    )


def weight_key(weight: Tensor) -> tuple:
    """What a layout was made from: the storage, its version (in-place writes bump it;
    tensors made in inference mode have none), dtype and shape."""
    version = None if weight.is_inference() else weight._version
    return (weight.data_ptr(), version, weight.dtype, weight.shape)


def _reorder(weight: Tensor) -> Tensor:  # (D_out, D_in) -> oneDNN's opaque layout
    return torch.ops.mkldnn._reorder_linear_weight(weight.detach(), _ROWS_HINT)


def prepack_linears(model: nn.Module, min_weights: int = MIN_WEIGHTS) -> int:
    """Replace every plain ``nn.Linear`` inside ``model`` with at least ``min_weights``
    weights by a :class:`PrepackedLinear` holding the same parameters (the state dict
    keeps its keys and tensors), and give every module whose class declares
    ``output_layout = None`` (a tied output layer: ``DecoderLM``) a
    :class:`WeightLayout`. Returns how many layers were replaced or given a layout: 0
    when this PyTorch lacks the operators. In place."""
    if not isinstance(model, nn.Module):
        message = _("model must be a torch.nn.Module, got {type}")
        raise TypeError(message.format(type=type(model).__name__))
    min_weights = positive_int("min_weights", min_weights)
    if not available():
        return 0
    replaced = replace_linears(
        model,
        PrepackedLinear,
        lambda layer: type(layer) is nn.Linear and layer.weight.numel() >= min_weights,
    )
    return replaced + _give_output_layouts(model, min_weights)


def _give_output_layouts(model: nn.Module, min_weights: int) -> int:
    """A ``WeightLayout`` for each module whose class declares ``output_layout`` and that
    has none yet; returns how many were given."""
    given = 0
    for module in model.modules():
        if hasattr(type(module), "output_layout") and module.output_layout is None:
            module.output_layout = WeightLayout(min_weights)
            given += 1
    return given
