"""int8 linear layers for serving on the CPU: 8-bit weights, inputs quantized per call.

Shape legend: N rows (every leading dimension of the input), D_in, D_out the widths.

``Int8Linear`` holds a linear layer's weight as int8, each output row w_o rounded to
``round(w_o / s_o)`` in [-127, 127] with its own scale ``s_o = max|w_o| / 127``. A call
with enough work (rows x weights >= ``INT8_MIN_WORK``) rounds each input row to 8 bits
with its own scale (its largest value maps to 127; stored as uint8 around 128) and runs
oneDNN's int8 product (``torch.ops.onednn.qlinear_pointwise``, the operator PyTorch's
compiler uses for x86 int8 models), then scales each row back and adds the bias; a call
with fewer rows multiplies by the same rounded weights in float32 (quantizing the input
costs more there than the int8 product saves). Embeddings, LayerNorms and
attention's own products stay float32. Outputs change slightly: the tests bound each layer's error
and count changed next tokens; ``benchmarks/peers/translation.py decode`` measures speed and changed
outputs on a trained model, ``benchmarks/kernels/linear_layout.py`` each layer.

Each row is quantized on its own (a row's large or non-finite values do not reach the
others), but the row count of a call picks the product, so a sentence can come out
differently in batches of other sizes; float32 decoding does not.
"""

from __future__ import annotations

import functools

import torch
from torch import Tensor, nn

from attnkit.i18n import _
from attnkit.inference import prepacked

__all__ = ["INT8_MIN_WORK", "Int8Linear", "available", "exact_int8_product", "quantize_int8"]

_TINY = torch.finfo(torch.float32).tiny

# rows x weights from which the int8 product beats the float32 one of the same (rounded)
# weights, prepacked; measured with benchmarks/kernels/linear_layout.py 2026-11-25: the output
# layer (1 M weights) from 64 rows (639 -> 347 us), 768 x 256 and 1024 x 256 from 256
# rows (477 -> 311, 635 -> 350 us), 256 x 256 never
INT8_MIN_WORK = 1 << 25

_available: bool | None = None


def available() -> bool:
    """Whether this PyTorch has oneDNN's int8 linear operators (checked once)."""
    global _available
    if _available is None:
        try:
            layer = Int8Linear(nn.Linear(8, 4))
            with torch.no_grad():
                layer(torch.randn(2, 8))
            _available = True
        except (AttributeError, RuntimeError, NotImplementedError):
            _available = False
    return _available


@functools.cache  # asked on every large call: the CPU does not change
def exact_int8_product() -> bool:
    """Whether this CPU multiplies uint8 by int8 exactly (VNNI or AMX). Without them
    oneDNN's AVX2 kernel sums pairs of products in saturating 16-bit lanes
    (vpmaddubsw), so a product can be off by far more than the rounding bound (measured
    on a 2026-11-28 AVX2-only EPYC: outputs beyond the bound, a trained translator's next
    tokens 79% unchanged); there the float product of the same int8 weights runs."""
    cpu = getattr(torch, "cpu", None)
    return any(
        bool(getattr(cpu, name, lambda: False)())
        for name in ("_is_vnni_supported", "_is_amx_tile_supported")
    )


class Int8Linear(nn.Module):
    """A linear layer with int8 weights (one scale per output row) for CPU inference.

    ``weight`` is the dequantized float32 weight (D_out, D_in), ``weight_int8 * scale``:
    what the int8 product multiplies by, for code that slices a layer's weight rows
    (``MultiHeadAttention`` projects a query with the first rows of its fused weight).
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        if not isinstance(linear, nn.Linear):
            message = _("linear must be a torch.nn.Linear, got {type}")
            raise TypeError(message.format(type=type(linear).__name__))
        w = linear.weight.detach().to("cpu", torch.float32)  # (D_out, D_in)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        scale = w.abs().amax(dim=1).clamp_min(_TINY) / 127  # (D_out,)
        q = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8)  # (D_out, D_in)
        self.register_buffer("weight_int8", q)
        self.register_buffer("scale", scale)
        self.register_buffer("weight", None, persistent=False)  # set by _pack
        bias = None if linear.bias is None else linear.bias.detach().to("cpu", torch.float32)
        self.register_buffer("bias", bias)
        self._zero_points = torch.zeros(self.out_features, dtype=torch.long)
        self._pack()
        self.register_load_state_dict_post_hook(_after_load)

    def _pack(self) -> None:
        """What follows from ``weight_int8`` and ``scale``: the dequantized weight and
        oneDNN's layouts (int8, and float32 for calls with few rows); after a load too."""
        self.weight = self.weight_int8.float() * self.scale[:, None]  # (D_out, D_in)
        self._packed = torch.ops.onednn.qlinear_prepack(self.weight_int8, None)
        self._float_packed = prepacked.pack_weight(self.weight)  # float32 layout, or None

    def forward(self, input: Tensor) -> Tensor:  # (..., D_in) float32 -> (..., D_out) float32
        if input.dtype != torch.float32 or input.device.type != "cpu":
            message = _("Int8Linear takes float32 CPU inputs, got {dtype} on {device}")
            raise ValueError(message.format(dtype=input.dtype, device=input.device))
        if input.shape[-1] != self.in_features:
            message = _("input must be (..., {in_features}), got {shape}")
            raise ValueError(message.format(in_features=self.in_features, shape=tuple(input.shape)))
        x = input.reshape(-1, self.in_features)  # (N, D_in)
        if x.shape[0] == 0:
            return input.new_zeros(*input.shape[:-1], self.out_features)
        if x.shape[0] * self.weight.numel() < INT8_MIN_WORK or not exact_int8_product():
            # few rows, or a CPU whose int8 product is not exact: the float product
            out = prepacked.linear(x, self.weight, self._float_packed, self.bias)
            return out.reshape(*input.shape[:-1], self.out_features)
        # each row scaled to [-127, 127] by its own largest value, stored around 128
        peak = x.abs().amax(dim=1, keepdim=True).clamp_min(_TINY)  # (N, 1)
        qx = torch.round(x * (127.0 / peak)).add_(128).clamp_(0, 255).to(torch.uint8)
        out = torch.ops.onednn.qlinear_pointwise(
            qx, 1.0 / 127, 128, self._packed, self.scale, self._zero_points,
            None, 1.0, 0, torch.float32, "none", [], "",
        )  # (N, D_out): the product of the scaled rows  # fmt: skip
        out = out.mul_(peak) if self.bias is None else torch.addcmul(self.bias, out, peak)
        return out.reshape(*input.shape[:-1], self.out_features)  # (..., D_out)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)  # oneDNN's packed weights are made again on loading
        state["_packed"] = state["_float_packed"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._pack()


def _after_load(module: Int8Linear, incompatible_keys) -> None:
    module._pack()  # a module-level function: the layer stays picklable


def quantize_int8(model: nn.Module) -> int:
    """Replace every ``nn.Linear`` inside ``model`` (``PrepackedLinear`` included) by an
    :class:`Int8Linear`, in place, and put the model in eval mode; returns how many were
    replaced. Inference only: the int8 weights take no gradient.

    Raises:
        TypeError: ``model`` is not an ``nn.Module``.
        ValueError: the model has parameters off the CPU.
        RuntimeError: this PyTorch has no oneDNN int8 operators.
    """
    if not isinstance(model, nn.Module):
        message = _("model must be a torch.nn.Module, got {type}")
        raise TypeError(message.format(type=type(model).__name__))
    if not available():
        raise RuntimeError(
            _(
                "int8 needs PyTorch's oneDNN int8 operators "
                "(torch.ops.onednn.qlinear_pointwise), which this build lacks"
            )
        )
    devices = {p.device.type for p in model.parameters()}
    if devices - {"cpu"}:
        message = _("model must be on the CPU for int8, got parameters on {devices}")
        raise ValueError(message.format(devices=sorted(devices)))
    replaced = prepacked.replace_linears(model, Int8Linear)
    model.eval()
    return replaced
