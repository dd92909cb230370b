"""Exercise 8.6.3 of d2l 0.17 (1.0's 9.6.2): the autoregressive model of section 8.1
(the noisy sine) with an RNN in place of the MLP."""

from __future__ import annotations

import torch
from torch import nn

from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, topic
from attnkit.tour.recurrent import autoregressive, fit_window_net

__all__ = ["rnn_autoregressive"]


class _SineRNN(nn.Module):
    """nn.RNN over the last tau values (one feature per step), a Linear on the last state."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.rnn = nn.RNN(1, hidden)
        self.out = nn.Linear(hidden, 1)

    def forward(self, window: torch.Tensor) -> torch.Tensor:  # (N, tau) -> (N, 1)
        Y, _ = self.rnn(window.T.unsqueeze(-1))  # (tau, N, H)
        return self.out(Y[-1])


@topic
def rnn_autoregressive(*, small: bool = False, seed: int = 0) -> TopicResult:
    """The tour's data (sin(0.01 t) + N(0, 0.2²), 1,000 points, the first 600 windows to
    train, τ = 4) and training (Adam lr 0.01, batch 16, 5/10 epochs), with an RNN of 16
    hidden units reading the window; k-step-ahead MSE next to the tour's MLP."""
    from attnkit.viz import plot_curves

    mlp = autoregressive(small=small, seed=seed).values
    g = torch.Generator().manual_seed(seed)
    T, tau, n_train = 1000, 4, 600
    time_ = torch.arange(1, T + 1, dtype=torch.float32)
    x = torch.sin(0.01 * time_) + torch.normal(0.0, 0.2, (T,), generator=g)  # the tour's draw
    features = torch.stack([x[i : T - tau + i] for i in range(tau)], 1)  # (T - tau, tau)
    labels = x[tau:].reshape(-1, 1)
    torch.manual_seed(seed)
    net = _SineRNN(16)
    fit_window_net(net, features, labels, n_train, 5 if small else 10, g)
    steps = (1, 4, 16, 64)
    n = T - tau - steps[-1] + 1
    cols = [x[i : i + n] for i in range(tau)]
    with torch.no_grad():
        for i in range(tau, tau + steps[-1]):
            cols.append(net(torch.stack(cols[i - tau : i], 1)).reshape(-1))
    mse = {f"k{k}": float(((cols[tau + k - 1] - x[tau + k - 1 : tau + k - 1 + n]) ** 2).mean())
           for k in steps}  # fmt: skip
    mlp_mse = {f"k{k}": v for k, v in mlp["k_step_mse"].items()}
    fig = plot_curves({"RNN": list(mse.values()), gettext("MLP (tour)"): list(mlp_mse.values())},
                      "k", gettext("k-step-ahead MSE"), x=list(steps), logy=True,
                      title=gettext("noisy sine, τ = 4"))  # fmt: skip
    values = {"rnn_k_step_mse": mse, "mlp_k_step_mse": mlp_mse, "noise_variance": 0.04,
              "rnn_1_step": mse["k1"], "rnn_64_over_1": mse["k64"] / mse["k1"],
              "rnn_minus_mlp": {k: mse[k] - mlp_mse[k] for k in mse}}  # fmt: skip
    finding = (
        "k-step-ahead MSE, RNN (16 hidden) / the tour's MLP: "
        + ", ".join(f"{k}: {mse[k]:.3f} / {mlp_mse[k]:.3f}" for k in mse)
        + " (noise variance 0.04)."
    )
    return TopicResult("rnn_sine_rnn_autoregressive", finding, values, {"k_step": fig})
