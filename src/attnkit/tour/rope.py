"""Rotary position embedding (RoPE): the score depends on the offset only, and the rotation
of offset δ is the sinusoidal encoding's linear map M_δ (the positions topic), up to the
order of the dimensions."""

from __future__ import annotations

import torch
from torch import Tensor

from attnkit.i18n import _
from attnkit.tour.base import TopicResult, check_args, topic
from attnkit.tour.positions import offset_matrix

__all__ = ["rope", "rope_matrix", "rope_to_sinusoidal_order"]


def rope_matrix(delta: int, head_dim: int) -> Tensor:
    """The (Dh, Dh) float64 matrix R_δ with ``apply_rope(x, δ) = R_δ x`` (half-split layout),
    read off by rotating the unit vectors."""
    from attnkit.attention.rope import apply_rope, rope_cos_sin

    cos, sin = rope_cos_sin(torch.tensor([delta]), head_dim, dtype=torch.float64)  # (1, Dh)
    eye = torch.eye(head_dim, dtype=torch.float64)  # rows e_i
    return apply_rope(eye, cos, sin).T  # row i of the result is R e_i: transpose


def rope_to_sinusoidal_order(head_dim: int) -> list[int]:
    """perm with ``R[perm][:, perm]`` in the sinusoidal table's order: column 2j of P is
    sin(pω_j), RoPE's second half x_(j+Dh/2); column 2j+1 is cos(pω_j), RoPE's x_j."""
    half = head_dim // 2
    return [j + half if a % 2 == 0 else j for j in range(half) for a in (2 * j, 2 * j + 1)]


@topic
def rope(*, small: bool = False, seed: int = 0) -> TopicResult:
    """The RoPE score against the offset, every pair (m, n); R_δ against M_δ."""
    check_args(small, seed)
    from attnkit.attention import sinusoidal_table
    from attnkit.attention.rope import RotaryEmbedding, apply_rope, rope_cos_sin
    from attnkit.viz import plot_curves

    Dh, L, pairs = 32, (64 if small else 256), 8
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(pairs, 1, Dh, generator=g, dtype=torch.float64)
    k = torch.randn(pairs, 1, Dh, generator=g, dtype=torch.float64)
    pos = torch.arange(L)
    cos, sin = rope_cos_sin(pos, Dh, dtype=torch.float64)  # (L, Dh)
    # the same q at every position m, the same k at every n: S[m, n] = rope(q, m) . rope(k, n)
    Q, K = apply_rope(q.expand(-1, L, -1), cos, sin), apply_rope(k.expand(-1, L, -1), cos, sin)
    S = Q @ K.transpose(-1, -2)  # (pairs, L, L)

    def offset_spread(S: Tensor) -> float:
        """Largest (max - min) of S[m, n] over the pairs with one offset m - n, any offset."""
        spread = 0.0
        for d in range(-(L - 1), L):
            diag = torch.diagonal(S, offset=-d, dim1=-2, dim2=-1)  # m - n = d
            spread = max(spread, float((diag.amax(-1) - diag.amin(-1)).max()))
        return spread

    spread64 = offset_spread(S)
    # q . R_(n-m) k: the score computed from the offset alone (R_m^T R_n = R_(n-m))
    by_offset = torch.stack([(q[:, 0] @ rope_matrix(n - m, Dh) * k[:, 0]).sum(-1)
                             for m, n in ((0, 0), (5, 2), (2, 9), (L - 1, 0))], -1)  # fmt: skip
    direct = torch.stack([S[:, m, n] for m, n in ((0, 0), (5, 2), (2, 9), (L - 1, 0))], -1)
    formula_error = float((by_offset - direct).abs().max())
    # float32, the library's module (its cached cos/sin table)
    rot = RotaryEmbedding(Dh)
    Q32 = rot(q.float().expand(-1, L, -1).unsqueeze(1)).squeeze(1)
    K32 = rot(k.float().expand(-1, L, -1).unsqueeze(1)).squeeze(1)
    spread32 = offset_spread((Q32 @ K32.transpose(-1, -2)).double())
    # the sinusoidal encoding added to q and k (absolute): the score depends on m and n
    P = sinusoidal_table(L, Dh).double()
    S_abs = (q + P) @ (k + P).transpose(-1, -2)
    spread_absolute = offset_spread(S_abs)

    # R_δ is M_δ of the positions topic with the dimensions reordered
    perm = rope_to_sinusoidal_order(Dh)
    deltas = (1, 2, 5, 10, 37)
    matrix_error = {d: float((rope_matrix(d, Dh)[perm][:, perm] - offset_matrix(d, Dh)).abs().max())
                    for d in deltas}  # fmt: skip
    unpermuted_gap = max(float((rope_matrix(d, Dh) - offset_matrix(d, Dh)).abs().max())
                         for d in deltas)  # fmt: skip
    # and it carries the sinusoidal rows: R_δ P[p] = P[p + δ] (rows in RoPE's order)
    P_rope = P[:, torch.argsort(torch.tensor(perm))]  # column perm[i] of P -> RoPE's slot i
    table_error = max(float((P_rope[:-d] @ rope_matrix(d, Dh).T - P_rope[d:]).abs().max())
                      for d in deltas)  # fmt: skip

    starts = (0, L // 8, L // 4, L // 2 - 1)
    span = L // 2
    curves = {f"n = {n0}, m = n + δ": S[0, n0 + torch.arange(span), n0].tolist() for n0 in starts}
    fig = plot_curves(curves, _("offset δ = m - n"), _("score rope(q, m) · rope(k, n)"),
                      x=list(range(span)),
                      title=_("RoPE: the 4 curves coincide (one per start n)"))  # fmt: skip
    values = {
        "offset_only_max_deviation": spread64,
        "offset_only_max_deviation_float32": spread32,
        "absolute_max_deviation": spread_absolute,
        "score_by_offset_error": formula_error,
        "rope_equals_offset_matrix": matrix_error,
        "unpermuted_gap": unpermuted_gap,
        "table_error": table_error,
        "length": L,
        "head_dim": Dh,
        "pairs": pairs,
    }
    finding = _(
        "{pairs} random (q, k), head width {Dh}, every (m, n) with m, n < {L}: the score "
        "rope(q, m)·rope(k, n) takes one value per offset m - n (largest spread over any offset "
        "{spread64:.1e} in float64, {spread32:.1e} in float32 with the library's "
        "RotaryEmbedding), and equals q·R_(n-m) k ({formula_error:.1e}). Adding the sinusoidal "
        "encoding instead, (q + P_m)·(k + P_n) spreads by {spread_absolute:.2f} over one "
        "offset: absolute. RoPE's rotation for δ = {deltas} is exactly the sinusoidal map M_δ "
        "with P_(p+δ) = M_δ P_p (the positions topic) once its half-split dimensions (x_j, "
        "x_(j+Dh/2)) are read as the table's (cos, sin) columns (2j+1, 2j): max error "
        "{matrix_error:.1e} (without reordering {unpermuted_gap:.2f}), and R_δ carries the "
        "table's rows to the rows δ later ({table_error:.1e}). The sinusoidal encoding adds the "
        "vectors this map relates; RoPE applies the map to q and k, so the offset lands in the "
        "score itself."
    ).format(pairs=pairs, Dh=Dh, L=L, spread64=spread64, spread32=spread32,
             formula_error=formula_error, spread_absolute=spread_absolute, deltas=list(deltas),
             matrix_error=max(matrix_error.values()), unpermuted_gap=unpermuted_gap,
             table_error=table_error)  # fmt: skip
    return TopicResult("rope", finding, values, {"score_vs_offset": fig})
