"""Exercise 9.2.5 of d2l 0.17 (1.0's 10.1.5): an LSTM for the book's noisy sine series
(section 8.1), against the book's MLP on the last four values (the tour's
``autoregressive`` topic) and an MLP given the same sixteen values the LSTM reads, on
the same data, over seeds: one-step and k-step-ahead errors, what the longer window
adds and what the state adds beyond it."""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnkit.tour.base import TopicResult, describe_seeds, seed_summary, topic

__all__ = ["LSTMForecaster", "lstm_time_series"]

T_SERIES, N_TRAIN, W, TAU = 1000, 600, 16, 4
STEPS = (1, 4, 16, 64)
SHORT = 4  # the comparisons average the k-step errors over k = 1..SHORT


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


def _mlp(width: int) -> nn.Module:
    return nn.Sequential(nn.Linear(width, 10), nn.ReLU(), nn.Linear(10, 1))


def _errors(x: Tensor, models: dict, starts: Tensor) -> dict[str, list[float]]:
    """k-step-ahead squared error against the data, k = 1..64 (index k - 1), per model:
    an MLP slides its window over its own predictions; the LSTM reads W values, then
    feeds each prediction back with its state carried."""
    out: dict[str, list[float]] = {}
    with torch.no_grad():
        for name, model in models.items():
            errs = []
            if name == "lstm":
                pred, state = model(torch.stack([x[s - W : s] for s in starts]))  # (S, W)
                p = pred[:, -1]  # the prediction of x[s]
            else:
                width = model[0].in_features
                hist = torch.stack([x[s - width : s] for s in starts])  # (S, width)
            for k in range(1, STEPS[-1] + 1):
                if name != "lstm":
                    p = model(hist)[:, 0]
                    hist = torch.cat([hist[:, 1:], p[:, None]], 1)
                errs.append(float(((p - x[starts + k - 1]) ** 2).mean()))
                if name == "lstm":
                    nxt, state = model(p[:, None], state)  # feed the prediction back
                    p = nxt[:, 0]
            out[name] = errs
    return out


def _one_seed(seed: int, epochs: int) -> dict[str, list[float]]:
    """The series of ``seed``; the three models trained on its first 600 steps (Adam lr
    0.01, batches of 16 windows); their k-step errors on t > 616."""
    g = torch.Generator().manual_seed(seed)
    time_ = torch.arange(1, T_SERIES + 1, dtype=torch.float32)
    x = torch.sin(0.01 * time_) + torch.normal(0.0, 0.2, (T_SERIES,), generator=g)
    torch.manual_seed(seed)
    models = {"mlp 4": _mlp(TAU), "mlp 16": _mlp(W), "lstm": LSTMForecaster()}
    windows = torch.stack([x[i : i + W + 1] for i in range(N_TRAIN - W)])  # (N, W + 1)
    losses = {
        "mlp 4": lambda idx: ((models["mlp 4"](windows[idx, W - TAU : W])[:, 0]
                               - windows[idx, W]) ** 2).mean(),
        "mlp 16": lambda idx: ((models["mlp 16"](windows[idx, :W])[:, 0]
                                - windows[idx, W]) ** 2).mean(),
        "lstm": lambda idx: ((models["lstm"](windows[idx, :W])[0] - windows[idx, 1:]) ** 2).mean(),
    }  # fmt: skip
    for name, model in models.items():
        opt = torch.optim.Adam(model.parameters(), lr=0.01)
        for _ in range(epochs):
            perm = torch.randperm(len(windows), generator=g)
            for i in range(0, len(perm), 16):
                opt.zero_grad()
                losses[name](perm[i : i + 16]).backward()
                opt.step()
    starts = torch.arange(N_TRAIN + W, T_SERIES - STEPS[-1])  # predict x[s], x[s+1], ...
    return _errors(x, models, starts)


@topic
def lstm_time_series(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.2.5: x_t = sin(0.01 t) + N(0, 0.2²), t = 1..1000, trained on the first 600 steps
    (the book's split), per seed: the LSTM reads the last 16 values, the book's MLP the
    last 4, a second MLP the same 16 as the LSTM; all feed their predictions back for k
    steps; MSE against the data on t > 616. Paired over seeds: the mean error over
    k = 1..4 of the 4-value MLP minus the 16-value MLP's (the window) and of the
    16-value MLP minus the LSTM's (the state, at equal inputs)."""
    n_seeds, epochs = (3, 3) if small else (8, 10)
    runs = [_one_seed(s, epochs) for s in range(seed, seed + n_seeds)]
    names = list(runs[0])
    mse = {n: {k: sum(r[n][k - 1] for r in runs) / n_seeds for k in STEPS} for n in names}

    def short(r: dict, name: str) -> float:  # one seed's mean error over k = 1..SHORT
        return sum(r[name][:SHORT]) / SHORT

    def paired(a: str, b: str) -> dict:
        return seed_summary([short(r, a) - short(r, b) for r in runs])

    values = {
        "noise_variance": 0.04, "steps": list(STEPS), "epochs": epochs, "seeds": n_seeds,
        "lstm_window": W, "mlp_tau": TAU, "short": SHORT,
        "test_starts": T_SERIES - STEPS[-1] - N_TRAIN - W, "mse": mse,
        "mse_64_over_1_min": min(r[n][63] / r[n][0] for r in runs for n in names),
        "window_gain": paired("mlp 4", "mlp 16"),
        "lstm_over_mlp_4": paired("mlp 4", "lstm"),
        "state_gain": paired("mlp 16", "lstm"),
    }  # fmt: skip
    finding = (
        f"MSE against the data on the test part (noise variance 0.04), mean of {n_seeds} "
        "seeds, k steps ahead: "
        + "; ".join(
            f"k = {k}: LSTM {mse['lstm'][k]:.3f}, MLP(4) {mse['mlp 4'][k]:.3f}, MLP(16) "
            f"{mse['mlp 16'][k]:.3f}"
            for k in STEPS
        )
        + f". Mean error over k = 1..{SHORT}, MLP(4) - MLP(16): "
        + describe_seeds(values["window_gain"])
        + "; MLP(16) - LSTM: "
        + describe_seeds(values["state_gain"])
        + "."
    )
    return TopicResult("gated_sine_lstm_time_series", finding, values)
