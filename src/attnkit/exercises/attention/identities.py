"""Numeric checks of the derivations of d2l 1.0's 11.1.2 (the gradient of dot-product
attention pooling with keys = values is the keys' covariance), 11.1.4 (a squeeze-and-
excitation block is attention over channels with sigmoid gates), 11.2.1 (the Parzen-window
class-density difference and the Nadaraya-Watson classifier differ by a positive factor)
and 11.2.3 (on the unit sphere the Gaussian kernel's weights are a dot-product softmax).
All in float64 over random draws.
"""

from __future__ import annotations

import torch
from torch import nn

from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["gradient_covariance", "parzen_sign", "se_as_attention", "sphere_kernel"]


@topic
def gradient_covariance(*, small: bool = False, seed: int = 0) -> TopicResult:
    """11.1.2: d/dq sum_i softmax_i(q·k) k_i = Cov_p[k] = E_p[k kᵀ] - E_p[k] E_p[k]ᵀ."""
    check_args(small, seed)
    g = torch.Generator().manual_seed(seed)
    draws = 20 if small else 200
    err, asym, min_eig = 0.0, 0.0, float("inf")
    for _ in range(draws):
        m, d = (
            int(torch.randint(2, 12, (1,), generator=g)),
            int(torch.randint(1, 8, (1,), generator=g)),
        )
        keys = torch.randn(m, d, generator=g, dtype=torch.float64)  # keys = values, (m, d)
        q = torch.randn(d, generator=g, dtype=torch.float64)

        def pool(q, keys=keys):  # (d,) -> (d,)
            return torch.softmax(keys @ q, 0) @ keys

        jac = torch.autograd.functional.jacobian(pool, q)  # (d, d): d out_a / d q_b
        p = torch.softmax(keys @ q, 0)
        mean = p @ keys
        cov = (keys * p[:, None]).T @ keys - torch.outer(mean, mean)
        err = max(err, float((jac - cov).abs().max()))
        asym = max(asym, float((jac - jac.T).abs().max()))
        min_eig = min(min_eig, float(torch.linalg.eigvalsh(jac).min()))
    values = {"draws": draws, "max_error": err, "max_asymmetry": asym, "min_eigenvalue": min_eig}
    finding = (
        f"Over {draws} random (m, d, keys, query) draws in float64, the autograd Jacobian "
        f"equals the covariance under p to {err:.1e}; it is symmetric to {asym:.1e} and its "
        f"smallest eigenvalue is {min_eig:.1e} (positive semidefinite up to rounding)."
    )
    return TopicResult("attention_identities_gradient_covariance", finding, values, {})


@topic
def parzen_sign(*, small: bool = False, seed: int = 0) -> TopicResult:
    """11.2.1: p̂(x, y=1) - p̂(x, y=-1) = (1/n) sum_i y_i k(x, x_i) = f_NW(x) p̂(x)."""
    check_args(small, seed)
    g = torch.Generator().manual_seed(seed)
    n, d, queries = (40, 2, 200) if small else (200, 3, 2000)
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    noisy = x[:, 0] + 0.5 * torch.randn(n, generator=g, dtype=torch.float64)
    y = torch.where(noisy > 0, 1.0, -1.0).double()  # labels ±1
    xq = 1.5 * torch.randn(queries, d, generator=g, dtype=torch.float64)
    k = torch.exp(-(torch.cdist(xq, x) ** 2) / 2)  # (queries, n) Gaussian kernel
    parzen_diff = (k * (y == 1)).sum(1) / n - (k * (y == -1)).sum(1) / n
    nw = (k @ y) / k.sum(1)  # Nadaraya-Watson estimate of E[y | x]
    density = k.sum(1) / n  # p̂(x) > 0
    values = {
        "n": n,
        "queries": queries,
        "identity_error": float((parzen_diff - nw * density).abs().max()),
        "sign_agreement": float((parzen_diff.sign() == nw.sign()).double().mean()),
        "min_density": float(density.min()),
        "factor_range": [float((parzen_diff / nw).min()), float((parzen_diff / nw).max())],
    }
    finding = (
        f"{queries} random queries, {n} labelled points in {d} dimensions: the Parzen "
        f"difference equals f_NW(x) p̂(x) to {values['identity_error']:.1e}; the signs agree "
        f"at {values['sign_agreement']:.0%} of the queries; the factor p̂(x) ranges over "
        f"{values['factor_range'][0]:.2e}-{values['factor_range'][1]:.2e} (always positive)."
    )
    return TopicResult("attention_identities_parzen_sign", finding, values, {})


@topic
def sphere_kernel(*, small: bool = False, seed: int = 0) -> TopicResult:
    """11.2.3: for unit vectors ||x - x_i||^2 = 2 - 2 xᵀx_i, so the Gaussian kernel's
    weights softmax(-||x - x_i||^2 / (2 s^2)) equal softmax(xᵀx_i / s^2)."""
    check_args(small, seed)
    g = torch.Generator().manual_seed(seed)
    err_dist, err_w, off_sphere = 0.0, 0.0, 0.0
    for d in (2, 8, 64):
        x = torch.nn.functional.normalize(
            torch.randn(30, d, generator=g, dtype=torch.float64), dim=1
        )
        keys = torch.nn.functional.normalize(
            torch.randn(50, d, generator=g, dtype=torch.float64), dim=1
        )
        sq = torch.cdist(x, keys) ** 2
        err_dist = max(err_dist, float((sq - (2 - 2 * x @ keys.T)).abs().max()))
        for s in (0.3, 1.0, 3.0):
            gauss = torch.softmax(-sq / (2 * s * s), 1)
            dot = torch.softmax(x @ keys.T / (s * s), 1)
            err_w = max(err_w, float((gauss - dot).abs().max()))
            # off the sphere the identity fails: keys of different norms
            scaled = keys * (0.5 + torch.rand(50, 1, generator=g, dtype=torch.float64))
            far = torch.softmax(-(torch.cdist(x, scaled) ** 2) / (2 * s * s), 1)
            off_sphere = max(
                off_sphere, float((far - torch.softmax(x @ scaled.T / (s * s), 1)).abs().max())
            )
    values = {
        "distance_error": err_dist,
        "weight_error": err_w,
        "off_sphere_difference": off_sphere,
    }
    finding = (
        f"On the unit sphere (d = 2, 8, 64) ||x - x_i||^2 = 2 - 2 xᵀx_i to {err_dist:.1e} and "
        f"the Gaussian weights equal softmax(xᵀx_i / s^2) to {err_w:.1e}; with keys of norms "
        f"0.5-1.5 the two differ by up to {off_sphere:.2f}."
    )
    return TopicResult("attention_identities_sphere_kernel", finding, values, {})


class SqueezeExcitation(nn.Module):
    """Hu et al.'s block: s = sigmoid(W2 relu(W1 mean_hw(X))), output X * s per channel."""

    def __init__(self, channels: int, reduction: int = 4) -> None:
        super().__init__()
        self.fc1 = nn.Linear(channels, channels // reduction)
        self.fc2 = nn.Linear(channels // reduction, channels)

    def forward(self, X):  # (B, C, H, W)
        s = torch.sigmoid(self.fc2(torch.relu(self.fc1(X.mean((2, 3))))))  # (B, C)
        return X * s[:, :, None, None]


@topic
def se_as_attention(*, small: bool = False, seed: int = 0) -> TopicResult:
    """11.1.4: an SE block read as attention: the query is the pooled descriptor, every
    channel is a value, its score comes from the query alone, gated by a sigmoid."""
    check_args(small, seed)
    torch.manual_seed(seed)
    B, C, H, W = 4, 16, 5, 5
    se = SqueezeExcitation(C).double()
    X = torch.randn(B, C, H, W, dtype=torch.float64)
    with torch.no_grad():
        query = X.mean((2, 3))  # (B, C): squeeze, the query
        scores = se.fc2(torch.relu(se.fc1(query)))  # (B, C): one score per channel (key)
        gates = torch.sigmoid(scores)  # not a softmax: each channel on its own
        values = X.reshape(B, C, H * W)  # each channel's map is a value
        as_attention = (gates[:, :, None] * values).reshape(B, C, H, W)
        err = float((se(X) - as_attention).abs().max())
        sums = gates.sum(1)  # softmax weights would sum to 1
    v = {
        "se_vs_attention": err,
        "gate_sum_range": [float(sums.min()), float(sums.max())],
        "channels": C,
    }
    finding = (
        f"An SE block ({C} channels) equals sigmoid gating of each channel by a score "
        f"computed from the pooled query, to {err:.1e}; the gates sum to "
        f"{v['gate_sum_range'][0]:.2f}-{v['gate_sum_range'][1]:.2f} over the channels, not to 1."
    )
    return TopicResult("attention_identities_se_as_attention", finding, v, {})
