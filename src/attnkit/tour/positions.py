"""Sinusoidal positional encoding (d2l 10.6.3): relative positions are rotations,
positions are unique, and the columns behave like the bits of a binary counter."""

from __future__ import annotations

import torch
from torch import Tensor

from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["offset_matrix", "positions"]


def offset_matrix(delta: int, num_hiddens: int) -> Tensor:
    """The (D, D) block-diagonal rotation M_δ with P[i + δ] = M_δ P[i] for every i.

    Block j acts on (P[i, 2j], P[i, 2j+1]) = (sin iω_j, cos iω_j):
    [[cos δω_j, sin δω_j], [-sin δω_j, cos δω_j]]. It depends on δ only, never on i.
    """
    if isinstance(delta, bool) or not isinstance(delta, int):
        raise TypeError(f"delta must be an int, got {delta!r}")
    if isinstance(num_hiddens, bool) or not isinstance(num_hiddens, int) or num_hiddens < 2:
        raise ValueError(f"num_hiddens must be an int >= 2, got {num_hiddens!r}")
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

    bits = torch.tensor([[(i >> b) & 1 for b in range(2, -1, -1)] for i in range(8)]).float()
    omega = 1.0 / torch.pow(10000.0, torch.arange(0, D, 2, dtype=torch.float64) / D)
    sign_changes = [int((torch.diff(torch.sign(P[:, c])) != 0).sum()) for c in range(0, D, 2)]
    fig_b = show_heatmaps(bits, "bit (high to low)", "number 0-7", cmap="Blues", figsize=(2, 3))
    fig_p = show_heatmaps(P.float(), "encoding dimension", "position", cmap="Blues",
                          figsize=(3.5, 4))  # fmt: skip
    fig_f = plot_curves({"ω_j = 1/10000^(2j/d)": omega.tolist()}, "j (column pair)", "frequency",
                        logy=True, title="frequency falls along the encoding dimension")  # fmt: skip
    values = {
        "rotation_error": errors,
        "fit_gap": fit_gap,
        "min_pairwise_distance": min_dist,
        "unique_rows": unique,
        "max_len": max_len,
        "omega": omega.tolist(),
        "sign_changes": sign_changes,
        "binary": ["".join(str(int(b)) for b in row) for row in bits],
    }
    finding = (
        f"For δ = {list(errors)} one block-rotation M_δ maps P_i to P_(i+δ) for every i "
        f"(max error {max(errors.values()):.1e}); least-squares fits on i < n/2 and i >= n/2 "
        f"both recover M_δ (gap {max(fit_gap.values()):.1e}): it depends on δ only. All "
        f"{max_len} positions are distinct ({unique} unique rows, smallest pairwise distance "
        f"{min_dist:.3f}). As in binary 000..111 ({' '.join(values['binary'])}), lower columns "
        f"flip faster: sign changes over {n} positions per sin column "
        f"{sign_changes[:6]}..., frequency {omega[0]:.2f} -> {float(omega[-1]):.1e}."
    )
    figs = {"binary": fig_b, "table": fig_p, "frequency": fig_f}
    return TopicResult("positions", finding, values, figs)
