"""int8 linear layers for serving on the CPU: 8-bit weights, inputs quantized per call.

Shape legend: N rows (every leading dimension of the input), D_in, D_out the widths.

``Int8Linear`` holds a linear layer's weight as int8, each output row w_o rounded to
``round(w_o / s_o)`` in [-127, 127] with its own scale ``s_o = max|w_o| / 127``. Where the
CPU multiplies uint8 by int8 exactly (VNNI or AMX: :func:`exact_int8_product`) every call
runs an int8 product with int32 sums, on one of two packed kernels chosen by the call's
work (rows x weights):

- below ``ONEDNN_MIN_WORK``, FBGEMM's dynamic linear (``torch.ops.quantized.linear_dynamic``,
  PyTorch's own dynamic quantization): one C++ call quantizes the input to uint8, multiplies
  and scales back. It quantizes its whole input with one scale, so each row is first divided
  by its largest |value| (every row then spans at most [-1, 1]: a row's step is at most its
  own largest value / 127.5, a huge row cannot coarsen the others) and the output rows are
  multiplied back (a call of one row goes in as it is: the range is already its own);
- from ``ONEDNN_MIN_WORK`` (the 512 x 59,514 output layer from 36 rows, the encoder's
  FFN from 1,024 rows), oneDNN's int8 product (``torch.ops.onednn.qlinear_pointwise``, the operator
  PyTorch's compiler uses for x86 int8 models), each row rounded to [-127, 127] by its own
  scale (stored as uint8 around 128); its weights are laid out at the first such call.

Measured 2026-12-07 on an AVX-512 VNNI EPYC (``benchmarks/kernels/int8_linear.py``, one
thread, the machine shared): FBGEMM 2.4-8x the float32 product of the same rounded weights
at 1-4 rows and 2.4-4.5x at 64 (the 512 x 59,514 output layer at one row: 2.4 ms against 20),
where oneDNN's call with the quantizing around it reached 0.5-3.3x; oneDNN ahead from about
2^30 rows x weights (the output layer at 64 rows: 35 ms against FBGEMM's 41).

Where the product is not exact (AVX2 or AVX-512 without VNNI: both libraries sum pairs of
products in saturating 16-bit lanes), FBGEMM runs with 7-bit inputs (``reduce_range``: a
pair of products stays within 16 bits, so the sums are exact, each input rounded twice as
coarsely) where :func:`int8_without_vnni` says so, else the float32 product of the same
rounded weights; the float32 product too without FBGEMM below ``_ONEDNN_ALONE_MIN_WORK``.
An output layer's ``EXACT_TOP`` largest logits per row are recomputed in float32 from its
unrounded weight (:meth:`Int8Linear.exact_top`): int8 picks the candidates, float32 decides.
Embeddings, LayerNorms and attention's own products stay float32 (the encoder memory's
caches in bf16 on request: :func:`int8_cache_dtype`). Outputs change slightly: the tests
bound each layer's error and count changed next tokens; ``benchmarks/peers/opus_mt.py``
and ``translation.py decode`` measure speed and changed outputs on whole models.

A row's result depends a little on the other rows of its call (FBGEMM's one range, and the
row count picks the kernel), so a sentence can come out differently in batches of other
sizes; float32 decoding does not.
"""

from __future__ import annotations

import math
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit._validate import integer, output_rows
from attnkit.i18n import _
from attnkit.inference import prepacked
from attnkit.inference.int8_cpu import (
    exact_int8_product,
    int8_cache_dtype,
    int8_without_vnni,
)
from attnkit.inference.row_top import exact_top_unchecked

__all__ = [
    "INT8_MIN_WORK",
    "ONEDNN_MIN_WORK",
    "Int8Linear",
    "Int8WeightLayout",
    "available",
    "exact_int8_product",
    "int8_cache_dtype",
    "int8_without_vnni",
    "quantize_int8",
]

_TINY = torch.finfo(torch.float32).tiny

# an output layer's largest values per row recomputed in float32 (:meth:`Int8Linear.exact_top`):
# OPUS-MT's shapes, random weights, 512 sentences greedy at batch 64 (2026-12-07): ids equal
# to float32's 457 of 512 without, 471 with k = 2, 4 or 8 (471 with the whole layer float32)
EXACT_TOP = 4

# rows x weights from which a call runs an int8 product (where it is exact): every call,
# FBGEMM's being faster than the float32 product at every layer and row count measured
INT8_MIN_WORK = 1
# rows x weights from which oneDNN's int8 product replaces FBGEMM's (2026-12-07, one
# thread: the output layer at 4 rows 7.2 ms oneDNN, 4.6 FBGEMM; at 64 rows 35 against 41;
# 256 rows: 296 against 383; 1024 x 2048 FFN rows 22 against 27 ms)
ONEDNN_MIN_WORK = 1 << 30
# without FBGEMM, rows x weights from which oneDNN's int8 product beats the float32 one
# (2026-11-25: the output layer from 64 rows, 768 x 256 and 1024 x 256 from 256 rows)
_ONEDNN_ALONE_MIN_WORK = 1 << 25
_available: bool | None = None


def available() -> bool:
    """Whether this PyTorch has oneDNN's int8 linear operators (checked once)."""
    global _available
    if _available is None:
        try:
            layer = Int8Linear(nn.Linear(8, 4))
            with torch.no_grad():
                layer._onednn_product(torch.randn(2, 8))
            _available = True
        except (AttributeError, RuntimeError, NotImplementedError):
            _available = False
    return _available


def _fbgemm_pack(weight_int8: Tensor, scale: Tensor):
    """FBGEMM's packed weight (per-row scales, no bias), or None without FBGEMM."""
    if "fbgemm" not in torch.backends.quantized.supported_engines:
        return None
    engine = torch.backends.quantized.engine
    try:
        torch.backends.quantized.engine = "fbgemm"
        with warnings.catch_warnings():  # quantized tensors are deprecated (PyTorch 2.10)
            warnings.simplefilter("ignore")
            zero = torch.zeros(scale.shape[0], dtype=torch.long)
            q = torch._make_per_channel_quantized_tensor(weight_int8, scale.double(), zero, 0)
            return torch.ops.quantized.linear_prepack(q, None)
    except (AttributeError, RuntimeError, NotImplementedError):
        return None
    finally:
        torch.backends.quantized.engine = engine


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
        q, scale = _rounded(linear.weight.detach().to("cpu", torch.float32))
        bias = None if linear.bias is None else linear.bias.detach().to("cpu", torch.float32)
        self._hold(q, scale, bias)

    def _hold(self, weight_int8: Tensor, scale: Tensor, bias: Tensor | None) -> None:
        """Keep int8 weights (D_out, D_in), their scales (D_out,) and a bias (D_out,) or None."""
        self.out_features, self.in_features = weight_int8.shape
        self.register_buffer("weight_int8", weight_int8)
        self.register_buffer("scale", scale)
        self.register_buffer("weight", None, persistent=False)  # set by _pack
        self.register_buffer("bias", bias)
        self._zero_points = torch.zeros(self.out_features, dtype=torch.long)
        self._exact: tuple[Tensor, int] | None = None  # set by exact_top
        self._pack()
        self.register_load_state_dict_post_hook(_after_load)

    @classmethod
    def of_weight(cls, weight: Tensor, bias: Tensor | None = None) -> Int8Linear:
        """The int8 layer of a weight (D_out, D_in) and bias (D_out,) that no ``nn.Linear``
        owns (a tied output layer: an embedding table)."""
        if not isinstance(weight, Tensor) or weight.dim() != 2 or not weight.is_floating_point():
            what = (
                (weight.dtype, tuple(weight.shape))
                if isinstance(weight, Tensor)
                else type(weight).__name__
            )
            raise TypeError(
                _("weight must be a (D_out, D_in) float tensor, got {what}").format(what=what)
            )
        if bias is not None and (
            not isinstance(bias, Tensor) or tuple(bias.shape) != weight.shape[:1]
        ):
            what = tuple(bias.shape) if isinstance(bias, Tensor) else type(bias).__name__
            message = _("bias must be a ({rows},) tensor or None, got {what}")
            raise TypeError(message.format(rows=weight.shape[0], what=what))
        linear = nn.Linear(weight.shape[1], weight.shape[0], bias=bias is not None, device="meta")
        linear.weight = nn.Parameter(weight.detach(), requires_grad=False)
        if bias is not None:
            linear.bias = nn.Parameter(bias.detach(), requires_grad=False)
        return cls(linear)

    def rows(self, ids: Tensor) -> Int8Linear:
        """The layer of the output rows ``ids`` (K,) long, in that order: the same int8
        weights, scales and bias (not rounded again), its kernels packed anew. A vocabulary
        shortlist keeps the output layer's rows of its words."""
        output_rows(ids, self.out_features)
        layer = Int8Linear.__new__(Int8Linear)
        nn.Module.__init__(layer)
        bias = None if self.bias is None else self.bias[ids]
        layer._hold(self.weight_int8[ids], self.scale[ids], bias)
        if self._exact is not None:  # the rows of a checked weight
            layer._exact = (self._exact[0].detach()[ids], self._exact[1])
        return layer

    def exact_top(self, weight: Tensor | None, k: int = EXACT_TOP) -> None:
        """From now on, each output row's ``k`` largest values are recomputed as float32
        products with ``weight`` (D_out, D_in), the layer's weight before rounding, held by
        reference (a tied output layer's is the embedding table, kept anyway; an untied
        one's stays in memory besides the int8 weights); None: no longer. For an output
        layer: the int8 logits pick the candidates, float32 decides among them
        (:func:`~attnkit.inference.row_top.exact_top`).

        Raises:
            TypeError: ``weight`` is not a float32 CPU tensor of the layer's shape.
            ValueError: ``weight`` does not round to this layer's int8 weights and scales.
        """
        if weight is None:
            self._exact = None
            return
        integer("k", k, minimum=1)
        expected = (self.out_features, self.in_features)
        what = type(weight).__name__
        if isinstance(weight, Tensor):
            what = f"{weight.dtype} {tuple(weight.shape)} on {weight.device}"
        if what != f"{torch.float32} {expected} on cpu":
            message = _("weight must be a float32 CPU tensor of shape {expected}, got {what}")
            raise TypeError(message.format(expected=expected, what=what))
        if not self._rounds_to_this(weight):
            message = _("weight must be this layer's weight before rounding; it rounds to "
                        "other int8 weights or scales")  # fmt: skip
            raise ValueError(message)
        self._exact = (weight, k)  # as given: a copy of the model copies one table, not two

    def _rounds_to_this(self, weight: Tensor) -> bool:
        """Whether ``weight`` (D_out, D_in) rounds to this layer's int8 weights and scales."""
        q, scale = _rounded(weight.detach())
        return torch.equal(q, self.weight_int8) and torch.equal(scale, self.scale)

    def _pack(self) -> None:
        """What follows from ``weight_int8`` and ``scale``: the dequantized weight and the
        kernels' layouts (FBGEMM's, float32's; oneDNN's int8 one at its first call)."""
        self.weight = self.weight_int8.float() * self.scale[:, None]  # (D_out, D_in)
        self._fbgemm = _fbgemm_pack(self.weight_int8, self.scale)  # or None
        self._packed = None  # oneDNN's int8 layout, made by _onednn_product
        self._float_packed: Tensor | bool | None = False  # float32 layout: at the first float call
        self._row_blocks: dict[tuple[int, int], Int8Linear] = {}  # made by row_block

    def first_rows(self, rows: int) -> Int8Linear:
        """The layer of the first ``rows`` output rows (:meth:`row_block` from 0): the
        decoder step's cross-attention projects its query by the first D rows of the fused
        W_qkv (``models/transformer_step.py``)."""
        return self.row_block(0, rows)

    def row_block(self, start: int, stop: int) -> Int8Linear:
        """The layer of output rows ``start`` to ``stop`` (the same int8 weights, scales and
        bias), made once per block: ``MultiHeadAttention`` projects a query or a memory by
        a block of rows of its fused W_qkv."""
        layer = self._row_blocks.get((start, stop))
        if layer is None:
            integer("rows", stop, minimum=1, maximum=self.out_features)
            integer("start", start, minimum=0, maximum=stop - 1)
            layer = self._row_blocks[start, stop] = self.rows(torch.arange(start, stop))
        return layer

    def kernel(self, rows: int) -> str:
        """Which product a call with ``rows`` rows runs: "fbgemm", "onednn" (int8 inputs),
        "fbgemm7" (FBGEMM with 7-bit inputs, where the product of 8-bit ones is not exact)
        or "float" (float32, of the same rounded weights)."""
        work = rows * self.weight.numel()
        if work < INT8_MIN_WORK:
            return "float"
        if not exact_int8_product():
            usable = self._fbgemm is not None and int8_without_vnni()
            return "fbgemm7" if usable else "float"
        if self._fbgemm is not None:
            return "fbgemm" if work < ONEDNN_MIN_WORK else "onednn"
        return "onednn" if work >= max(_ONEDNN_ALONE_MIN_WORK, INT8_MIN_WORK) else "float"

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
        kernel = self.kernel(x.shape[0])
        if kernel in ("fbgemm", "fbgemm7"):
            out = self._fbgemm_product(x, seven_bits=kernel == "fbgemm7")
        elif kernel == "onednn":
            out = self._onednn_product(x)
        else:
            if self._float_packed is False:
                self._float_packed = prepacked.pack_weight(self.weight)  # or None
            out = prepacked.linear(x, self.weight, self._float_packed, self.bias)
        if self._exact is not None:
            with torch.no_grad():  # the table may be a Parameter: no graph for inference
                exact_top_unchecked(out, x, self._exact[0], self.bias, self._exact[1])
        return out.reshape(*input.shape[:-1], self.out_features)  # (..., D_out)

    def _fbgemm_product(self, x: Tensor, seven_bits: bool = False) -> Tensor:
        """(N, D_in) -> (N, D_out): each row divided by its largest |value|, FBGEMM's
        product (one uint8 range for the call; ``seven_bits``: 0-127, FBGEMM's
        ``reduce_range``, so no pair of products leaves 16 bits), then multiplied back; a
        non-finite row is zeroed (its output is NaN)."""
        peak = x.abs().amax(dim=1, keepdim=True).clamp_min_(_TINY)  # (N, 1); NaN stays
        if x.shape[0] == 1 and math.isfinite(float(peak)):  # one row: FBGEMM's range is its own
            out = torch.ops.quantized.linear_dynamic(x, self._fbgemm, seven_bits)  # (1, D_out)
            return out if self.bias is None else out.add_(self.bias)
        scaled = x / peak  # (N, D_in) in [-1, 1]
        if not math.isfinite(float(peak.sum())):  # FBGEMM refuses NaN; inf rows -> NaN
            peak = torch.where(torch.isfinite(peak), peak, float("nan"))
            scaled = torch.where(torch.isfinite(peak), scaled, 0.0)
        out = torch.ops.quantized.linear_dynamic(scaled, self._fbgemm, seven_bits)  # (N, D_out)
        if self.bias is None:
            return out.mul_(peak)
        return torch.addcmul(self.bias, out, peak, out=out)  # in place: no new (N, D_out)

    def _onednn_product(self, x: Tensor) -> Tensor:  # (N, D_in) -> (N, D_out)
        """Each row scaled to [-127, 127] by its own largest value, stored around 128, and
        oneDNN's int8 product; then scaled back, the bias added."""
        if self._packed is None:
            self._packed = torch.ops.onednn.qlinear_prepack(self.weight_int8, None)
        peak = x.abs().amax(dim=1, keepdim=True).clamp_min(_TINY)  # (N, 1)
        qx = torch.round(x * (127.0 / peak)).add_(128).clamp_(0, 255).to(torch.uint8)
        out = torch.ops.onednn.qlinear_pointwise(
            qx, 1.0 / 127, 128, self._packed, self.scale, self._zero_points,
            None, 1.0, 0, torch.float32, "none", [], "",
        )  # (N, D_out): the product of the scaled rows  # fmt: skip
        if self.bias is None:
            return out.mul_(peak)
        return torch.addcmul(self.bias, out, peak, out=out)  # in place: no new (N, D_out)

    def extra_repr(self) -> str:
        return (
            f"in_features={self.in_features}, out_features={self.out_features}, "
            f"bias={self.bias is not None}"
        )

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)  # the packed weights are made again on loading
        state["_packed"] = state["_fbgemm"] = None
        state["_float_packed"] = False
        state["_row_blocks"] = {}
        return state

    def __setstate__(self, state: dict) -> None:
        state.setdefault("_exact", None)  # pickled before exact_top existed
        super().__setstate__(state)
        self._pack()


def _rounded(weight: Tensor) -> tuple[Tensor, Tensor]:
    """weight (D_out, D_in) float32 -> its int8 rows (D_out, D_in), their scales (D_out,)."""
    scale = weight.abs().amax(dim=1).clamp_min(_TINY) / 127  # (D_out,)
    q = torch.round(weight / scale[:, None]).clamp_(-127, 127).to(torch.int8)  # (D_out, D_in)
    return q, scale


def _after_load(module: Int8Linear, incompatible_keys) -> None:
    """A module-level function (the layer stays picklable): the derived weights made again;
    an exact top whose float weight no longer rounds to the loaded int8 weights (another
    model's state loaded into an untied layer) dropped rather than mixed with them."""
    module._pack()
    if module._exact is not None and not module._rounds_to_this(module._exact[0]):
        module._exact = None


class Int8WeightLayout:
    """The int8 counterpart of ``prepacked.WeightLayout``: a weight a module multiplies by
    without owning it as an ``nn.Linear`` (``DecoderLM``'s tied logits ``h Eᵀ``), held as an
    :class:`Int8Linear` of it, made at the first inference call and again whenever the weight
    changes. Training runs ``F.linear`` on the float weight."""

    def __init__(self) -> None:
        self._layer: Int8Linear | None = None
        self._key: tuple | None = None  # which weight (and version) the layer was made from

    def linear(
        self, x: Tensor, weight: Tensor, bias: Tensor | None = None, *, training: bool = False
    ) -> Tensor:
        """x (..., D_in) float32 -> (..., D_out) by weight (D_out, D_in), in int8 outside
        training, autograd and autocast; ``F.linear`` otherwise."""
        if (
            training
            or (torch.is_grad_enabled() and (weight.requires_grad or x.requires_grad))
            or torch.is_autocast_enabled("cpu")
            or x.dtype != torch.float32
            or x.device.type != "cpu"
        ):
            return F.linear(x, weight, bias)
        key = (prepacked.weight_key(weight), None if bias is None else prepacked.weight_key(bias))
        if key != self._key:
            self._layer, self._key = Int8Linear.of_weight(weight, bias), key
            if weight.dtype == torch.float32:  # its largest logits exact: the table it rounded
                self._layer._exact = (weight, EXACT_TOP)
        return self._layer(x)

    def __getstate__(self) -> dict:
        return {"_layer": None, "_key": None}  # made again at the next call

    def __repr__(self) -> str:
        return "Int8WeightLayout()"


def quantize_int8(model: nn.Module) -> int:
    """Replace every ``nn.Linear`` inside ``model`` (``PrepackedLinear`` included) by an
    :class:`Int8Linear`, give every module whose class declares ``output_layout`` (a
    tied output layer) an :class:`Int8WeightLayout` and every one that declares
    ``memory_cache_dtype`` (a decoder's caches of the encoder memory)
    :func:`int8_cache_dtype`, in place; put the model in eval mode;
    the output layer (``model.decoder.dense``, the one a shortlist restricts; a tied output
    layout's) keeps its float32 weight to make each row's largest logits exact
    (:meth:`Int8Linear.exact_top`: the embedding table where tied; an untied one's weight
    stays in memory; a state dict loaded later that no longer rounds from it drops it);
    returns how many layers became int8. Inference only: the int8 weights take no gradient.

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
    decoder = getattr(model, "decoder", None)  # the output layer: as a shortlist finds it
    output = getattr(decoder, "dense", None)
    float32 = isinstance(output, nn.Linear) and output.weight.dtype == torch.float32
    output_weight = output.weight if float32 else None  # (V, D)
    replaced = prepacked.replace_linears(model, Int8Linear)
    if output_weight is not None and isinstance(decoder.dense, Int8Linear):
        decoder.dense._exact = (output_weight, EXACT_TOP)  # the weight it was rounded from
    cache_dtype = int8_cache_dtype()
    for module in model.modules():
        if hasattr(type(module), "output_layout"):  # tied output layers (DecoderLM's h Eᵀ)
            module.output_layout = Int8WeightLayout()
            replaced += 1
        if hasattr(type(module), "memory_cache_dtype"):  # decoders: encoder memory caches
            module.memory_cache_dtype = cache_dtype
    model.eval()
    return replaced
