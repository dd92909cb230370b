"""The weights a view embeds: 8 bits per weight, one scale per map, deflate, base64.

Each (layer, head) map is stored as ``q = round(255 * w / scale)`` (uint8) with ``scale``
its largest weight, so ``w ~ q * scale / 255`` within half a step: ``scale / 510``, at most
1/510 for weights in [0, 1]. The bytes (L, H, Q, K) row-major are deflated (zlib) and
base64-encoded; the browser inflates them with its own ``DecompressionStream``. A 512-token
map of 12 layers x 12 heads is 36 MiB of weights before deflate (float32 would be 4 times
that, JSON of decimals about 8 times).
"""

from __future__ import annotations

import base64
import zlib

import torch
from torch import Tensor

from attnkit.views.inputs import Panel
from attnkit.views.text import shown

__all__ = ["decode_panel", "panel_spec", "quantize"]

LEVELS = 255


def quantize(weights: Tensor) -> tuple[Tensor, Tensor]:
    """(L, H, Q, K) float weights >= 0 -> (uint8 codes (L, H, Q, K), scales (L, H) float32);
    a map of zeros gets scale 1."""
    scales = weights.amax(dim=(2, 3))
    scales = torch.where(scales > 0, scales, torch.ones_like(scales))
    codes = torch.round(weights / scales[..., None, None] * LEVELS).clamp_(0, LEVELS)
    return codes.to(torch.uint8), scales.float()


def panel_spec(panel: Panel) -> dict:
    """What the browser needs to draw ``panel`` (JSON-ready; its title and axis names in
    the language in force)."""
    codes, scales = quantize(panel.weights)
    raw = codes.contiguous().numpy().tobytes()
    level = 6 if len(raw) <= 1 << 22 else 1  # large maps: fast deflate (seconds -> tenths)
    L, H = panel.weights.shape[:2]
    return {
        "key": panel.key,
        "title": shown(panel.title),
        "queries": panel.queries,
        "keys": panel.keys,
        "qname": shown(panel.qname),
        "kname": shown(panel.kname),
        "layers": L,
        "heads": H,
        "scales": [float(s) for s in scales.flatten()],
        "data": base64.b64encode(zlib.compress(raw, level)).decode("ascii"),
    }


def decode_panel(spec: dict) -> Tensor:
    """The weights (L, H, Q, K) float64 a panel's spec holds, as the browser reads them."""
    raw = zlib.decompress(base64.b64decode(spec["data"]))
    shape = (spec["layers"], spec["heads"], len(spec["queries"]), len(spec["keys"]))
    codes = torch.frombuffer(bytearray(raw), dtype=torch.uint8).reshape(shape).double()
    scales = torch.tensor(spec["scales"], dtype=torch.float64).reshape(shape[:2])
    return codes * scales[..., None, None] / LEVELS
