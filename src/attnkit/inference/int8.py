"""int8 linear layers for serving on the CPU: 8-bit weights, inputs quantized per call.

Shape legend: N rows (every leading dimension of the input), D_in, D_out the widths.

``Int8Linear`` holds a linear layer's weight as int8, each output row w_o rounded to
``round(w_o / s_o)`` in [-127, 127] with its own scale ``s_o = max|w_o| / 127``. At each
call the input is quantized to uint8 with one scale and zero point for the whole call
(from its minimum and maximum, 0 included), and oneDNN's int8 product
(``torch.ops.onednn.qlinear_pointwise``, the operator PyTorch's compiler uses for x86
int8 models) returns float32 with the bias added. Embeddings, LayerNorms and attention's
own products stay float32. Outputs change slightly: the tests bound each layer's error
and count changed translations; ``benchmarks/peers.py decode --int8`` measures speed,
changed outputs and BLEU on a trained model.

Measured 2026-11-25 on the 2-core test machine (the recipe's 256 x 4000 output layer,
float32 with the weight prepacked against int8): 1 row 50 -> 90 us (quantizing the input
costs more than it saves), 16 rows 174 -> 132 us, 64 rows 626 -> 270 us, 256 rows
2,354 -> 781 us: int8 pays for beam search and full batches, not for single rows.

Because one input scale serves a whole call, a row's result can depend on the other rows
of its batch (as in other dynamic-int8 engines); float32 decoding does not.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

__all__ = ["Int8Linear", "available", "quantize_int8"]

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


class Int8Linear(nn.Module):
    """A linear layer with int8 weights (one scale per output row) for CPU inference.

    ``weight`` is the dequantized float32 weight (D_out, D_in), ``weight_int8 * scale``:
    what the int8 product multiplies by, for code that slices a layer's weight rows
    (``MultiHeadAttention`` projects a query with the first rows of its fused weight).
    """

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__()
        if not isinstance(linear, nn.Linear):
            raise TypeError(f"linear must be a torch.nn.Linear, got {type(linear).__name__}")
        w = linear.weight.detach().to("cpu", torch.float32)  # (D_out, D_in)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        scale = w.abs().amax(dim=1).clamp_min(torch.finfo(torch.float32).tiny) / 127  # (D_out,)
        q = torch.round(w / scale[:, None]).clamp_(-127, 127).to(torch.int8)  # (D_out, D_in)
        self.register_buffer("weight_int8", q)
        self.register_buffer("scale", scale)
        self.register_buffer("weight", q.float() * scale[:, None], persistent=False)
        bias = None if linear.bias is None else linear.bias.detach().to("cpu", torch.float32)
        self.register_buffer("bias", bias)
        self._packed = torch.ops.onednn.qlinear_prepack(q, None)  # oneDNN's int8 layout
        self._zero_points = torch.zeros(self.out_features, dtype=torch.long)

    def forward(self, input: Tensor) -> Tensor:  # (..., D_in) float32 -> (..., D_out) float32
        if input.dtype != torch.float32 or input.device.type != "cpu":
            raise ValueError(
                f"Int8Linear takes float32 CPU inputs, got {input.dtype} on {input.device}"
            )
        if input.shape[-1] != self.in_features:
            raise ValueError(f"input must be (..., {self.in_features}), got {tuple(input.shape)}")
        x = input.reshape(-1, self.in_features)  # (N, D_in)
        if x.shape[0] == 0:
            return input.new_zeros(*input.shape[:-1], self.out_features)
        low, high = torch.aminmax(x)
        low, high = low.clamp(max=0.0), high.clamp(min=0.0)  # 0 exactly representable
        step = ((high - low) / 255).clamp_min(torch.finfo(torch.float32).tiny)  # ()
        zero = torch.round(-low / step)  # ()
        qx = torch.clamp(torch.round(x / step) + zero, 0, 255).to(torch.uint8)  # (N, D_in)
        out = torch.ops.onednn.qlinear_pointwise.tensor(
            qx, step, zero.to(torch.long), self._packed, self.scale, self._zero_points,
            self.bias, 1.0, 0, torch.float32, "none", [], "",
        )  # fmt: skip
        return out.reshape(*input.shape[:-1], self.out_features)  # (..., D_out)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)  # oneDNN's packed weight is made again on loading
        state["_packed"] = None
        return state

    def __setstate__(self, state: dict) -> None:
        super().__setstate__(state)
        self._packed = torch.ops.onednn.qlinear_prepack(self.weight_int8, None)


def quantize_int8(model: nn.Module) -> int:
    """Replace every ``nn.Linear`` inside ``model`` (``PrepackedLinear`` included) by an
    :class:`Int8Linear`, in place, and put the model in eval mode; returns how many were
    replaced. Inference only: the int8 weights take no gradient.

    Raises:
        TypeError: ``model`` is not an ``nn.Module``.
        RuntimeError: this PyTorch has no oneDNN int8 operators, or the model has
            parameters off the CPU.
    """
    if not isinstance(model, nn.Module):
        raise TypeError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    if not available():
        raise RuntimeError(
            "int8 needs PyTorch's oneDNN int8 operators (torch.ops.onednn.qlinear_pointwise), "
            "which this build lacks"
        )
    devices = {p.device.type for p in model.parameters()}
    if devices - {"cpu"}:
        raise RuntimeError(f"int8 runs on the CPU; the model has parameters on {devices}")
    replaced = 0
    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if isinstance(child, nn.Linear) and not isinstance(child, nn.LazyLinear):
                setattr(parent, name, Int8Linear(child))
                replaced += 1
    model.eval()
    return replaced
