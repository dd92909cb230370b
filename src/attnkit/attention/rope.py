"""Rotary position embedding (RoPE; Su et al., 2021): positions as rotations of q and k.

Shape legend: B batch, H heads, T positions, Dh head width (even), Dh/2 rotated pairs.

A head's Dh dimensions form Dh/2 pairs (x_j, x_{j + Dh/2}) (the half-split layout of
GPT-NeoX and LLaMA); at absolute position p, pair j turns by the angle p·θ_j with
θ_j = base^(-2j/Dh):

    rope(x, p)_j          = x_j cos(p θ_j) - x_{j+Dh/2} sin(p θ_j)
    rope(x, p)_{j+Dh/2}   = x_j sin(p θ_j) + x_{j+Dh/2} cos(p θ_j)

That is x ↦ R(p) x with R(p) orthogonal and R(p)ᵀ R(s) = R(s - p), so the score

    rope(q, p) · rope(k, s) = q · R(s - p) k

depends on the two positions only through their offset s - p: relative position, exact,
inside the score. (The paper pairs adjacent dimensions (2j, 2j+1); the half split is the
same rotation with the rows of W_q and W_k permuted.) cos(p θ_j) and sin(p θ_j) are the
sinusoidal encoding's entries P[p, 2j+1] and P[p, 2j] at width Dh (``sinusoidal_table``):
where the sinusoidal encoding *adds* the vectors whose offsets are a linear map (the book's
argument), RoPE *multiplies* by them, and the linear map lands in the score itself.

``MultiHeadAttention(..., positions="rope")`` rotates its queries and keys after the
projection, per head, before the key/value cache: cached keys are already rotated for
their own positions, and a new query at position ``len(cache) + i`` meets them at the right
offsets.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit._validate import non_negative_int, positive_int, positive_number
from attnkit.i18n import _

__all__ = ["RotaryEmbedding", "apply_rope", "rope_cos_sin", "rope_frequencies"]


def rope_frequencies(
    head_dim: int, base: float = 10000.0, *, dtype: torch.dtype = torch.float32, device=None
) -> Tensor:
    """θ_j = base^(-2j/Dh) for j = 0 .. Dh/2 - 1: (Dh/2,). ``head_dim`` must be even."""
    head_dim = _even_head_dim(head_dim)
    base = positive_number("base", base)
    exponents = torch.arange(0, head_dim, 2, dtype=torch.float64, device=device) / head_dim
    return (base**-exponents).to(dtype)  # (Dh/2,), computed in float64


def rope_cos_sin(
    positions: Tensor, head_dim: int, base: float = 10000.0, *, dtype: torch.dtype | None = None
) -> tuple[Tensor, Tensor]:
    """cos and sin of p·θ_j for every position p: (*positions.shape, Dh) each, the Dh/2
    angles written twice (for both halves of a pair). Computed in float64 for float64,
    else float32 (``dtype`` overrides)."""
    if not isinstance(positions, Tensor) or positions.is_floating_point():
        got = getattr(positions, "dtype", type(positions).__name__)
        raise TypeError(_("positions must be an integer tensor, got {got}").format(got=got))
    dtype = dtype or torch.float32
    inv_freq = rope_frequencies(head_dim, base, dtype=dtype, device=positions.device)  # (Dh/2,)
    angles = positions.to(dtype).unsqueeze(-1) * inv_freq  # (..., Dh/2)
    angles = torch.cat((angles, angles), dim=-1)  # (..., Dh)
    return angles.cos(), angles.sin()


def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
    """Rotate x (..., T, Dh) by the angles whose cos and sin (broadcastable to x) are given:
    ``x * cos + rotate_half(x) * sin`` with rotate_half(x) = [-x_2, x_1] (x = [x_1, x_2])."""
    for name, t in (("x", x), ("cos", cos), ("sin", sin)):
        if not isinstance(t, Tensor) or not t.is_floating_point():
            message = _("{name} must be a floating-point tensor, got {kind}")
            raise TypeError(message.format(name=name, kind=_kind(t)))
    if x.shape[-1] % 2:
        message = _("x must have an even last dimension Dh, got shape {shape}")
        raise ValueError(message.format(shape=tuple(x.shape)))
    x1, x2 = x.chunk(2, dim=-1)  # (..., T, Dh/2) each
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin  # (..., T, Dh)


class RotaryEmbedding(nn.Module):
    """Rotates (B, H, T, Dh) queries or keys by their absolute positions (no parameters).

    Args:
        head_dim: Dh, even.
        base: θ_j = base^(-2j/Dh) (10000 in the paper).

    The cos/sin table of positions 0..N-1 is kept (float32, not in the state dict) and
    grown as longer sequences come; float64 inputs get float64 angles, computed afresh.
    """

    def __init__(self, head_dim: int, base: float = 10000.0) -> None:
        super().__init__()
        self.head_dim = _even_head_dim(head_dim)
        self.base = positive_number("base", base)
        self.register_buffer("_cos", torch.empty(0, self.head_dim), persistent=False)
        self.register_buffer("_sin", torch.empty(0, self.head_dim), persistent=False)

    def cos_sin(
        self, positions: int | Tensor, length: int, dtype: torch.dtype, device
    ) -> tuple[Tensor, Tensor]:
        """cos, sin for ``length`` positions from the int offset ``positions`` ((T, Dh)), or
        for position ids ``positions`` (T,) / (B, T) ((B, 1, T, Dh): one per row, every
        head), cast to ``dtype``."""
        if isinstance(positions, Tensor):
            ids = positions.to(device)
            wide = torch.float64 if dtype == torch.float64 else torch.float32
            cos, sin = rope_cos_sin(ids, self.head_dim, self.base, dtype=wide)
            if ids.dim() == 2:  # (B, T, Dh) -> (B, 1, T, Dh): the heads axis
                cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
            return cos.to(dtype), sin.to(dtype)
        positions = non_negative_int("positions", positions)  # the offset of the first one
        end = positions + length
        if dtype == torch.float64:  # exact angles for float64 checks (gradcheck, properties)
            ids = torch.arange(positions, end, device=device)
            return rope_cos_sin(ids, self.head_dim, self.base, dtype=torch.float64)
        table = self._cos
        if end > table.shape[0] or table.device != device or table.dtype != torch.float32:
            size = max(64, 1 << (end - 1).bit_length())  # grow to a power of two
            ids = torch.arange(size, device=device)
            self._cos, self._sin = rope_cos_sin(ids, self.head_dim, self.base)  # (N, Dh)
        return self._cos[positions:end].to(dtype), self._sin[positions:end].to(dtype)

    def forward(self, x: Tensor, positions: int | Tensor = 0) -> Tensor:
        """Rotate each vector by the angles of its position.

        Args:
            x: queries or keys, one vector per head and position.
            positions: the position of x's first row (an int offset: positions
                offset .. offset + T - 1, as after ``offset`` cached positions), or the
                position ids of every row: (T,) shared, or (B, T) per batch row.

        Shape:
            x: (B, H, T, Dh); positions: int, (T,) or (B, T).

        Returns:
            The rotated x, (B, H, T, Dh), of x's dtype.
        """
        if not isinstance(x, Tensor) or x.dim() != 4 or x.shape[-1] != self.head_dim:
            message = _("x must be (B, H, T, {head_dim}), got {got}")
            raise ValueError(
                message.format(head_dim=self.head_dim, got=getattr(x, "shape", type(x).__name__))
            )
        cos, sin = self.cos_sin(positions, x.shape[2], x.dtype, x.device)
        return apply_rope(x, cos, sin)

    def extra_repr(self) -> str:
        return f"head_dim={self.head_dim}, base={self.base:g}"


def _even_head_dim(head_dim: int) -> int:
    head_dim = positive_int("head_dim", head_dim)
    if head_dim % 2:
        message = _("head_dim must be even for RoPE (pairs of dimensions rotate), got {head_dim}")
        raise ValueError(message.format(head_dim=head_dim))
    return head_dim


def _kind(t: object) -> str:
    return str(t.dtype) if isinstance(t, Tensor) else type(t).__name__
