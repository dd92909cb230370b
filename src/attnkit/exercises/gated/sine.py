"""Exercise 9.2.5 of d2l 0.17 (1.0's 10.1.5): an LSTM for the book's noisy sine series
(section 8.1), against the book's MLP on the last four values (the tour's
``autoregressive`` topic), on the same data: one-step and k-step-ahead errors."""

from __future__ import annotations

import torch
from torch import nn

from attnkit.tour.base import TopicResult, topic

__all__ = ["lstm_time_series"]


class LSTMForecaster(nn.Module):
    """x_1..x_t -> a prediction of x_{t+1} at every t: ``forward(x (B, T), state)`` ->
    ``(predictions (B, T), state)``."""

    def __init__(self, hidden: int = 16) -> None:
        super().__init__()
        self.lstm = nn.LSTM(1, hidden, batch_first=True)
        self.out = nn.Linear(hidden, 1)

    def forward(self, x, state=None):
        Y, state = self.lstm(x[..., None], state)  # (B, T, hidden)
        return self.out(Y)[..., 0], state


@topic
def lstm_time_series(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.2.5: x_t = sin(0.01 t) + N(0, 0.2²), t = 1..1000, trained on the first 600 steps
    (the book's split); the LSTM reads the last W = 16 values, the MLP the last 4; both
    then feed their predictions back for k steps; MSE against the data on t > 604."""
    g = torch.Generator().manual_seed(seed)
    T, tau, W, n_train = 1000, 4, 16, 600
    time_ = torch.arange(1, T + 1, dtype=torch.float32)
    x = torch.sin(0.01 * time_) + torch.normal(0.0, 0.2, (T,), generator=g)
    epochs = 3 if small else 10
    torch.manual_seed(seed)
    mlp = nn.Sequential(nn.Linear(tau, 10), nn.ReLU(), nn.Linear(10, 1))
    lstm = LSTMForecaster()
    windows = torch.stack([x[i : i + W + 1] for i in range(n_train - W)])  # (N, W + 1)
    feats = windows[:, W - tau : W]  # the MLP's input: the last tau values, (N, tau)
    for model, loss_fn in (
        (mlp, lambda idx: ((mlp(feats[idx])[:, 0] - windows[idx, W]) ** 2).mean()),
        (lstm, lambda idx: ((lstm(windows[idx, :W])[0] - windows[idx, 1:]) ** 2).mean()),
    ):
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(epochs):
            perm = torch.randperm(len(windows), generator=g)
            for i in range(0, len(perm), 16):
                opt.zero_grad()
                loss_fn(perm[i : i + 16]).backward()
                opt.step()
    steps = (1, 4, 16, 64)
    starts = torch.arange(n_train + tau, T - steps[-1])  # predict x[s], x[s+1], ... (0-based)
    mse: dict[str, dict[int, float]] = {"mlp": {}, "lstm": {}}
    with torch.no_grad():
        hist_m = torch.stack([x[s - tau : s] for s in starts])  # (S, tau)
        pred, state = lstm(torch.stack([x[s - W : s] for s in starts]))  # read W values
        p_l = pred[:, -1]  # (S,): the prediction of x[s]
        for k in range(1, steps[-1] + 1):
            p_m = mlp(hist_m)[:, 0]
            target = x[starts + k - 1]
            if k in steps:
                mse["mlp"][k] = float(((p_m - target) ** 2).mean())
                mse["lstm"][k] = float(((p_l - target) ** 2).mean())
            hist_m = torch.cat([hist_m[:, 1:], p_m[:, None]], 1)
            nxt, state = lstm(p_l[:, None], state)  # feed the prediction back
            p_l = nxt[:, 0]
    values = {"noise_variance": 0.04, "steps": list(steps), "mse": mse, "epochs": epochs,
              "lstm_window": W, "mlp_tau": tau, "test_starts": len(starts),
              "lstm_over_mlp": {k: mse["lstm"][k] / mse["mlp"][k] for k in steps}}  # fmt: skip
    finding = (
        "MSE against the data on the test part (noise variance 0.04), k steps ahead: "
        + "; ".join(f"k = {k}: LSTM {mse['lstm'][k]:.3f}, MLP {mse['mlp'][k]:.3f}" for k in steps)
    )
    return TopicResult("gated_sine_lstm_time_series", finding, values)
