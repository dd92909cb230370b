"""Exercise 8.7.1 of d2l 0.17 (1.0's 9.7.1): powers of a symmetric matrix, the power
iteration's alignment with the top eigenvector, and what it means for RNN gradients."""

from __future__ import annotations

import math

import torch

from attnkit.tour.base import TopicResult, topic

__all__ = ["power_alignment"]


@topic
def power_alignment(*, small: bool = False, seed: int = 0) -> TopicResult:
    """Random symmetric 8 x 8 matrices (float64): the eigenvalues of M^k against λ_i^k;
    for random Gaussian x, tan of the angle between M^k x and v_1 against the bound
    |λ_2/λ_1|^k tan θ_0; the chance that a random x starts within a small |cos θ_0|;
    and ||M^k|| = |λ_1|^k for the product of k equal Jacobians."""
    n, n_mats, n_x, K = 8, (50 if small else 300), 200, 30
    g = torch.Generator().manual_seed(seed)
    eig_err, bound_ok, slopes, total = 0.0, 0, [], 0
    norm_err = 0.0
    for _ in range(n_mats):
        A = torch.randn(n, n, generator=g, dtype=torch.float64)
        M = (A + A.T) / 2
        lam, V = torch.linalg.eigh(M)
        order = lam.abs().argsort(descending=True)
        lam, V = lam[order], V[:, order]
        k = 6
        Mk = torch.linalg.matrix_power(M, k)
        lam_k = torch.linalg.eigvalsh(Mk).sort().values
        eig_err = max(
            eig_err, float(((lam_k - (lam**k).sort().values).abs() / lam[0].abs() ** k).max())
        )
        norm_err = max(
            norm_err, abs(float(torch.linalg.matrix_norm(Mk, 2)) / float(lam[0].abs() ** k) - 1)
        )
        ratio = float(lam[1].abs() / lam[0].abs())
        x = torch.randn(n, n_x, generator=g, dtype=torch.float64)  # columns: random vectors
        c = V.T @ x  # coordinates in the eigenbasis, (n, n_x)
        tan0 = c[1:].norm(dim=0) / c[0].abs()
        logs = []
        for step in range(1, K + 1):
            ck = c * (lam[:, None] ** step)
            tan_k = ck[1:].norm(dim=0) / ck[0].abs()
            bound_ok += int((tan_k <= ratio**step * tan0 * (1 + 1e-9)).sum())
            total += n_x
            logs.append(tan_k.log().median())
        if ratio < 0.9:  # fit the rate where it is measurable in K steps
            slope = float(logs[-1] - logs[9]) / (K - 10)
            slopes.append(slope / math.log(ratio))
    # P(|cos θ_0| < ε) for x uniform on the sphere: small ε, small chance
    x = torch.randn(n, 100000, generator=g, dtype=torch.float64)
    cos0 = (x[0] / x.norm(dim=0)).abs()
    eps = 0.05
    values = {
        "n": n, "matrices": n_mats, "vectors": n_x, "k_max": K,
        "eig_power_rel_error": eig_err, "norm_power_rel_error": norm_err,
        "bound_holds_fraction": bound_ok / total,
        "rate_over_log_ratio_median": sorted(slopes)[len(slopes) // 2],
        "rate_matrices": len(slopes),
        "eps": eps, "p_cos_below_eps": float((cos0 < eps).double().mean()),
        # density of cos θ_0 at 0 is Γ(n/2) / (√π Γ((n-1)/2)); times 2ε for small ε
        "p_cos_below_eps_approx": 2 * eps * math.exp(math.lgamma(n / 2) - math.lgamma((n - 1) / 2))
        / math.sqrt(math.pi),
    }  # fmt: skip
    finding = (
        f"{n_mats} random symmetric {n} x {n} matrices: eig(M^6) = λ^6 within "
        f"{eig_err:.1e} (relative); ||M^6|| = |λ_1|^6 within {norm_err:.1e}; tan∠(M^k x, v_1) "
        f"<= |λ_2/λ_1|^k tan θ_0 for {values['bound_holds_fraction']:.3f} of "
        f"{total} (matrix, x, k); the measured rate / log|λ_2/λ_1|: median "
        f"{values['rate_over_log_ratio_median']:.3f} over {len(slopes)} matrices; "
        f"P(|cos θ_0| < {eps}) = {values['p_cos_below_eps']:.4f} "
        f"(≈ 2ε Γ(n/2) / (√π Γ((n-1)/2)) = {values['p_cos_below_eps_approx']:.4f})."
    )
    return TopicResult("rnn_power_power_alignment", finding, values, {})
