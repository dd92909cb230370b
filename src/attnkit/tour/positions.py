"""Sinusoidal positional encoding (d2l 10.6.3): relative positions are rotations,
positions are unique, the columns behave like the bits of a binary counter, and nearby
positions have more similar encodings than distant ones (on average, not monotonically)."""

from __future__ import annotations

import torch
from torch import Tensor

from attnkit._validate import integer
from attnkit.i18n import _
from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["offset_matrix", "positions"]


def offset_matrix(delta: int, num_hiddens: int) -> Tensor:
    """The (D, D) block-diagonal rotation M_δ with P[i + δ] = M_δ P[i] for every i.

    Block j acts on (P[i, 2j], P[i, 2j+1]) = (sin iω_j, cos iω_j):
    [[cos δω_j, sin δω_j], [-sin δω_j, cos δω_j]]. It depends on δ only, never on i.
    """
    integer("delta", delta)
    integer("num_hiddens", num_hiddens, minimum=2)
    if num_hiddens % 2:
        raise ValueError(f"num_hiddens must be even (sin/cos pairs), got {num_hiddens}")
    omega = 1.0 / torch.pow(
        10000.0, torch.arange(0, num_hiddens, 2, dtype=torch.float64) / num_hiddens
    )
    c, s = torch.cos(delta * omega), torch.sin(delta * omega)
    M = torch.zeros(num_hiddens, num_hiddens, dtype=torch.float64)
    M[0::2, 0::2] = torch.diag(c)
    M[0::2, 1::2] = torch.diag(s)
    M[1::2, 0::2] = torch.diag(-s)
    M[1::2, 1::2] = torch.diag(c)
    return M


@topic
def positions(*, small: bool = False, seed: int = 0) -> TopicResult:
    """Rotations per offset, uniqueness up to max_len, the binary analogy, frequencies."""
    check_args(small, seed)
    from attnkit.attention import sinusoidal_table
    from attnkit.viz import plot_curves, show_heatmaps

    D, n = 32, 60
    P = sinusoidal_table(n, D).double()
    errors, fit_gap = {}, {}
    for delta in (1, 2, 5, 10):
        M = offset_matrix(delta, D)
        errors[delta] = float((P[:-delta] @ M.T - P[delta:]).abs().max())
        # fitted from two disjoint ranges of i: the same matrix (it depends on δ only)
        half = (n - delta) // 2
        fit_a = torch.linalg.lstsq(P[:half], P[delta : delta + half]).solution.T
        fit_b = torch.linalg.lstsq(P[half : n - delta], P[half + delta :]).solution.T
        fit_gap[delta] = float(((fit_a - M) @ P[:half].T).abs().max() + ((fit_b - M) @ P[half:n - delta].T).abs().max())  # fmt: skip
    max_len = 500 if small else 1000
    T = sinusoidal_table(max_len, D).double()
    dist = torch.cdist(T, T) + torch.eye(max_len, dtype=torch.float64) * 1e9
    min_dist = float(dist.min())
    unique = int(torch.unique(T.round(decimals=6), dim=0).shape[0])

    # nearby positions are similar, distant ones less: mean cosine similarity of P_i and
    # P_(i+δ) over a 200-position table, for every offset δ
    L = sinusoidal_table(200, D).double()
    sim = [float(torch.nn.functional.cosine_similarity(L[: 200 - o], L[o:], dim=-1).mean())
           for o in range(51)]  # fmt: skip
    falls_until = next(o for o in range(50) if sim[o + 1] >= sim[o])  # first rise after o
    near, far = sum(sim[1:4]) / 3, sum(sim[20:51]) / 31  # δ = 1..3 against δ = 20..50

    bits = torch.tensor([[(i >> b) & 1 for b in range(2, -1, -1)] for i in range(8)]).float()
    omega = 1.0 / torch.pow(10000.0, torch.arange(0, D, 2, dtype=torch.float64) / D)
    sign_changes = [int((torch.diff(torch.sign(P[:, c])) != 0).sum()) for c in range(0, D, 2)]
    fig_b = show_heatmaps(bits, _("bit (high to low)"), _("number 0-7"), cmap="Blues",
                          figsize=(2, 3))  # fmt: skip
    fig_p = show_heatmaps(P.float(), _("encoding dimension"), _("position"), cmap="Blues",
                          figsize=(3.5, 4))  # fmt: skip
    fig_f = plot_curves({"ω_j = 1/10000^(2j/d)": omega.tolist()}, _("j (column pair)"),
                        _("frequency"), logy=True,
                        title=_("frequency falls along the encoding dimension"))  # fmt: skip
    values = {
        "rotation_error": errors,
        "fit_gap": fit_gap,
        "min_pairwise_distance": min_dist,
        "unique_rows": unique,
        "max_len": max_len,
        "omega": omega.tolist(),
        "sign_changes": sign_changes,
        "similarity_by_offset": sim,
        "similarity_falls_until": falls_until,
        "similarity_near_far": (near, far),
        "similarity_far_max": max(sim[20:]),
        "binary": ["".join(str(int(b)) for b in row) for row in bits],
    }
    finding = _(
        "For δ = {deltas} one block-rotation M_δ maps P_i to P_(i+δ) for every i (max error "
        "{error:.1e}); least-squares fits on i < n/2 and i >= n/2 both recover M_δ (gap "
        "{gap:.1e}): it depends on δ only. All {max_len} positions are distinct ({unique} unique "
        "rows, smallest pairwise distance {min_dist:.3f}). As in binary 000..111 ({binary}), "
        "lower columns flip faster: sign changes over {n} positions per sin column "
        "{sign_changes}..., frequency {omega_first:.2f} -> {omega_last:.1e}. Nearby positions "
        "are more alike: mean cosine similarity of P_i and P_(i+δ) {similarity} for δ = 0..5, "
        "{near:.2f} for δ = 1..3 against {far:.2f} for δ = 20..50 (at most {far_max:.2f} "
        "there); but not monotonically: it falls only up to δ = {falls_until} and then ripples "
        "(δ = {rise_at}: {rise:.3f} > {before_rise:.3f})."
    ).format(
        deltas=list(errors), error=max(errors.values()), gap=max(fit_gap.values()),
        max_len=max_len, unique=unique, min_dist=min_dist, binary=" ".join(values["binary"]),
        n=n, sign_changes=sign_changes[:6], omega_first=omega[0], omega_last=float(omega[-1]),
        similarity=", ".join(f"{sim[o]:.2f}" for o in range(6)), near=near, far=far,
        far_max=max(sim[20:]), falls_until=falls_until, rise_at=falls_until + 1,
        rise=sim[falls_until + 1], before_rise=sim[falls_until],
    )  # fmt: skip
    fig_s = plot_curves({"cos(P_i, P_(i+δ))": sim}, _("offset δ"), _("mean cosine similarity"),
                        x=list(range(51)),
                        title=_("d = {d}: similarity against offset").format(d=D))  # fmt: skip
    figs = {"binary": fig_b, "table": fig_p, "frequency": fig_f, "similarity": fig_s}
    return TopicResult("positions", finding, values, figs)
