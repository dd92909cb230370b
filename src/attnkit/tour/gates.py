"""GRU and LSTM gates (d2l 9.1-9.2): each gate forced to its extremes, and what each
GRU gate is for, measured by taking it away.

``gate_ablation`` trains three GRUs over several seeds on two tasks: a long-range one
(report the first input after T steps) and a short-range one (the running sum of the
inputs since the last marker, which must be dropped at every marker). "no update"
fixes Z = 0 (H = H~), "no reset" fixes R = 1. Every (task, variant, seed) is one model
of a batch, so the seeds cost about as much as one.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attnkit._validate import positive_int
from attnkit.i18n import N_, _
from attnkit.tour.base import TopicResult, check_args, describe_seeds, seed_summary, topic
from attnkit.tour.stats import supports

__all__ = ["BIG", "VARIANTS", "gate_ablation", "gates", "gru_steps"]

BIG = 30.0  # a gate bias this large drives the sigmoid to 1 (or 0 with -BIG) to ~1e-13
VARIANTS = (N_("full"), N_("no update"), N_("no reset"))  # shown translated in the figure
TASKS = (N_("long"), N_("short"))


def gru_steps(X: Tensor, H: Tensor, W_x: Tensor, W_h: Tensor, b: Tensor,
              z_on: Tensor, r_on: Tensor) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """M GRUs at once (the scratch GRU's equations): X (M, B, T, D), H (M, B, H),
    W_x (M, D, 3H), W_h (M, H, 3H), b (M, 1, 3H) in gate order z, r, h; ``z_on``/
    ``r_on`` (M, 1, 1): 0 fixes that model's Z to 0 / R to 1. -> outputs (M, B, T, H),
    the update and reset gates (M, B, T, H) each."""
    n = H.shape[-1]
    XW = torch.einsum("mbtd,mdg->mbtg", X, W_x) + b[:, :, None]
    outs, zs, rs = [], [], []
    for t in range(X.shape[2]):
        zr = torch.sigmoid(XW[:, :, t, : 2 * n] + torch.bmm(H, W_h[:, :, : 2 * n]))
        Z = zr[..., :n] * z_on
        R = 1 - (1 - zr[..., n:]) * r_on
        H_tilde = torch.tanh(XW[:, :, t, 2 * n :] + torch.bmm(R * H, W_h[:, :, 2 * n :]))
        H = Z * H + (1 - Z) * H_tilde
        outs.append(H), zs.append(Z), rs.append(R)
    return torch.stack(outs, 2), torch.stack(zs, 2), torch.stack(rs, 2)


def _tasks(g: torch.Generator, B: int, T: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Inputs (B, T, 2): a value and a marker (0 for the long task); the targets."""
    x = torch.randn(B, T, generator=g)
    marker = (torch.rand(B, T, generator=g) < 1 / 3).float()
    marker[:, 0] = 1
    running, acc = [], torch.zeros(B)
    for t in range(T):  # the sum since the last marker, the marker's own input included
        acc = torch.where(marker[:, t] > 0, x[:, t], acc + x[:, t])
        running.append(acc)
    long_in = torch.stack([x, torch.zeros_like(x)], -1)
    return long_in, torch.stack([x, marker], -1), x[:, 0], torch.stack(running, 1)


def gate_ablation(
    *,
    seeds: int,
    steps: int,
    T: int = 12,
    hidden: int = 16,
    lr: float = 0.03,
    z_bias: float = 1.0,
    seed: int = 0,
) -> dict:
    """Train every (task, variant, seed) with Adam (batches of 32) for ``steps`` steps,
    the update gate's bias started at ``z_bias`` (the same for every variant; it has no
    effect without the gate; with 0 the gated GRUs learn the long task in 120 steps only
    in some seeds); return the held-out loss / Var(target) per task and variant (one per seed),
    and the full GRU's learned gates: on the long task the mean Z after the first step,
    on the short task the mean R at marker steps and elsewhere (per seed)."""
    positive_int("seeds", seeds)
    positive_int("steps", steps)
    S, V, n = seeds, len(VARIANTS), hidden
    M = len(TASKS) * V * S  # model m = (task * V + variant) * S + seed
    g = torch.Generator().manual_seed(seed)
    params = [(torch.randn(S, *shape, generator=g) * scale).repeat(len(TASKS) * V, 1, 1)
              .requires_grad_(True)
              for shape, scale in (((2, 3 * n), 1 / math.sqrt(2)), ((n, 3 * n), 1 / math.sqrt(n)),
                                   ((1, 3 * n), 0.0), ((n, 1), 1 / math.sqrt(n)))]  # fmt: skip
    with torch.no_grad():
        params[2][:, :, :n] = z_bias  # the update gate's bias: Z starts near σ(1) = 0.73
    variant = torch.arange(M) // S % V
    z_on = (variant != 1).float()[:, None, None]
    r_on = (variant != 2).float()[:, None, None]
    long = (torch.arange(M) < V * S)[:, None]  # (M, 1)
    opt = torch.optim.Adam(params, lr=lr)

    def run(B: int, gen: torch.Generator):
        long_in, short_in, y_long, y_short = _tasks(gen, B, T)
        X = torch.where(long[:, :, None, None], long_in, short_in)  # (M, B, T, 2)
        out, Z, R = gru_steps(X, torch.zeros(M, B, n), *params[:3], z_on, r_on)
        y = torch.einsum("mbth,mho->mbt", out, params[3])
        loss = torch.where(long, (y[:, :, -1] - y_long) ** 2, ((y - y_short) ** 2).mean(-1))
        return loss.mean(1), Z, R, short_in[..., 1], y_long, y_short

    data = torch.Generator().manual_seed(seed + 1)
    for _step in range(steps):
        opt.zero_grad()
        run(32, data)[0].sum().backward()
        opt.step()
    with torch.no_grad():
        loss, Z, R, marker, y_long, y_short = run(512, torch.Generator().manual_seed(seed + 2))
    var = torch.where(long[:, 0], y_long.var(), y_short.var())
    table = (loss / var).reshape(len(TASKS), V, S)
    full_long, full_short = slice(0, S), slice(V * S, V * S + S)
    at_marker = marker.bool()[None, :, :, None].expand_as(R[full_short])
    r_short = R[full_short]
    return {
        "loss": {
            t: {v: table[i, j].tolist() for j, v in enumerate(VARIANTS)}
            for i, t in enumerate(TASKS)
        },
        "update_gate_long": Z[full_long, :, 1:].mean((1, 2, 3)).tolist(),
        "reset_at_marker": [float(r_short[s][at_marker[s]].mean()) for s in range(S)],
        "reset_elsewhere": [float(r_short[s][~at_marker[s]].mean()) for s in range(S)],
    }


def _scratch_check(seed: int) -> float:
    """``gru_steps`` with both gates on equals the library's GRUScratchLayer."""
    from attnkit.models.rnn import GRUScratchLayer

    torch.manual_seed(seed)
    layer = GRUScratchLayer(3, 5)
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, 0.5)
        X, H0 = torch.randn(7, 2, 3), torch.randn(2, 5)
        ref, _state = layer(X, (H0,))
        W_x, W_h, b = (layer._cat(k)[None] for k in ("W_x", "W_h", "b_"))
        ours, _z, _r = gru_steps(X.transpose(0, 1)[None], H0[None], W_x, W_h, b[:, None],
                               torch.ones(1, 1, 1), torch.ones(1, 1, 1))  # fmt: skip
    return float((ours[0].transpose(0, 1) - ref).abs().max())


@topic
def gates(*, small: bool = False, seed: int = 0) -> TopicResult:
    """The scratch GRU and LSTM with gate biases forced to ±30; each GRU gate taken away."""
    check_args(small, seed)
    from attnkit.models.rnn import GRUScratchLayer, LSTMScratchLayer, RNNScratchLayer
    from attnkit.viz import plot_curves, show_heatmaps

    torch.manual_seed(seed)
    D, H, T, B = 5, 6, 7, 3
    X = torch.randn(T, B, D)
    H0, H0b = torch.randn(B, H), torch.randn(B, H)

    def gru(b_z: float, b_r: float) -> GRUScratchLayer:
        g = GRUScratchLayer(D, H)
        with torch.no_grad():
            for p in g.parameters():
                p.normal_(0, 0.5)
            g.b_z.fill_(b_z)
            g.b_r.fill_(b_r)
        return g

    v: dict[str, float] = {}
    with torch.no_grad():
        g = gru(-BIG, BIG)  # update 0, reset 1: H = tanh(X W_xh + H W_hh + b_h)
        rnn = RNNScratchLayer(D, H)
        rnn.W_xh.copy_(g.W_xh), rnn.W_hh.copy_(g.W_hh), rnn.b_h.copy_(g.b_h)
        v["gru_reset1_vs_rnn"] = float((g(X, (H0,))[0] - rnn(X, (H0,))[0]).abs().max())
        g = gru(-BIG, -BIG)  # update 0, reset 0: H_t = tanh(X_t W_xh + b_h), an MLP on X_t
        Y, _state = g(X, (H0,))
        v["gru_reset0_vs_mlp"] = float((Y - torch.tanh(X @ g.W_xh + g.b_h)).abs().max())
        v["gru_reset0_state_effect"] = float((Y - g(X, (H0b,))[0]).abs().max())
        g = gru(BIG, 0.0)  # update 1: H_t = H_{t-1}, the state is copied through
        v["gru_update1_copy"] = float((g(X, (H0,))[0] - H0).abs().max())

        def lstm(b_i: float, b_f: float, b_o: float) -> LSTMScratchLayer:
            m = LSTMScratchLayer(D, H)
            for p in m.parameters():
                p.normal_(0, 0.5)
            m.b_i.fill_(b_i), m.b_f.fill_(b_f), m.b_o.fill_(b_o)
            return m

        C0 = torch.randn(B, H)
        m = lstm(-BIG, BIG, 0.0)  # forget 1, input 0: C_t = C_{t-1} = C_0
        _out, (_h, C) = m(X, (H0, C0))
        v["lstm_keep_cell"] = float((C - C0).abs().max())
        m = lstm(0.0, 0.0, -BIG)  # output 0: H_t = 0 * tanh(C_t), the memory is hidden
        Y, (_h, C) = m(X, (H0, C0))
        v["lstm_output0_max_h"] = float(Y.abs().max())
        v["lstm_output0_max_c"] = float(C.abs().max())
    traces = {}
    with torch.no_grad():  # hidden unit 0 of batch row 0 over time, per forced setting
        traces[_("GRU free")] = gru(0.0, 0.0)(X, (H0,))[0][:, 0, 0].tolist()
        traces[_("GRU update≈1 (copy)")] = gru(BIG, 0.0)(X, (H0,))[0][:, 0, 0].tolist()
        traces[_("GRU reset≈0 (MLP on X_t)")] = gru(-BIG, -BIG)(X, (H0,))[0][:, 0, 0].tolist()
        traces[_("LSTM cell, forget=1 input=0")] = (
            lstm(-BIG, BIG, 0.0)(X, (H0, C0))[1][1][0, 0].repeat(T).tolist()
        )
        traces[_("LSTM H, output≈0")] = lstm(0.0, 0.0, -BIG)(X, (H0, C0))[0][:, 0, 0].tolist()
    fig = plot_curves(traces, _("step t"), _("unit 0"), title=_("gates at their extremes"))

    n_seeds, steps, T = (5, 100, 12) if small else (8, 300, 12)  # 5: a sign test's fewest
    ab = gate_ablation(seeds=n_seeds, steps=steps, T=T, seed=seed)
    loss = ab["loss"]
    long_gap = seed_summary([math.log(a / b) for a, b in zip(loss["long"]["no update"],
                                                              loss["long"]["full"])])  # fmt: skip
    short_gap_r = [
        math.log(a / b) for a, b in zip(loss["short"]["no reset"], loss["short"]["full"])
    ]
    short_gap_u = [
        math.log(a / b) for a, b in zip(loss["short"]["no update"], loss["short"]["full"])
    ]
    r_cost = math.exp(sorted(short_gap_r)[n_seeds // 2])  # median loss ratios to the full GRU
    u_cost = math.exp(sorted(short_gap_u)[n_seeds // 2])
    short_gap = seed_summary(short_gap_r)
    # paired per seed: what removing the reset gate costs beyond what removing the update gate does
    reset_over_update = seed_summary([r - u for r, u in zip(short_gap_r, short_gap_u)])
    v["gru_scratch_check"] = _scratch_check(seed)
    v["gate_ablation"] = {**ab, "seeds": n_seeds, "steps": steps, "T": T,
                          "long_no_update_over_full": long_gap,
                          "short_no_reset_over_full": short_gap,
                          "short_reset_over_update": reset_over_update}  # fmt: skip
    med = {t: {k: sorted(x)[len(x) // 2] for k, x in d.items()} for t, d in loss.items()}
    table = torch.tensor([[med[t][k] for k in VARIANTS] for t in TASKS])
    fig_a = show_heatmaps(table.log10()[None, None], _("variant"), _("task"),
                          xticklabels=[_(k) for k in VARIANTS],
                          yticklabels=[_("{task} (log10 loss/Var)").format(task=_(t))
                                       for t in TASKS], cmap="Reds", figsize=(3.0, 1.6))  # fmt: skip
    ws = ", ".join
    # the chapter's reset claim over the seeds: removing the reset gate costs on the short
    # task, and costs more than removing the update gate does
    helps, more = supports(short_gap), supports(reset_over_update)
    finding = _(
        "GRU, reset≈1 (update≈0): equals the plain RNN with the same weights to {reset1:.1e}. "
        "reset≈0: equals tanh(X_t W_xh + b_h), an MLP on X_t ({reset0:.1e}); another initial "
        "state changes the outputs by {state_effect:.1e}. update≈1: every H_t equals H_0 to "
        "{update1:.1e}, the state is copied. LSTM, forget=1, input=0: C_T = C_0 to "
        "{keep_cell:.1e}; output≈0: |H| <= {max_h:.1e} while the cell holds values up to "
        "{max_c:.2f} (kept, but hidden). Each GRU gate taken away ({n_seeds} seeds, {steps} "
        "Adam steps; held-out loss / Var(target), median; the batched GRU equals the scratch GRU "
        "to {scratch:.0e}): reporting the first of {T} inputs at the end, full {long_full:.3f}, "
        "no update gate {long_no_update:.3f}, no reset gate {long_no_reset:.3f}: the update gate "
        "serves the long-range dependency, as the chapter says (no update / full: {long_seeds}). "
        "The running sum since the last marker, reset at every marker: full {short_full:.3f}, no "
        "update {short_no_update:.3f}, no reset {short_no_reset:.3f}: every variant learns this "
        "short-range task, so neither gate is needed for it; taking away the reset gate raises "
        "the loss {r_cost:.1f}x (median; higher in {r_agree}/{n_seeds} seeds), taking away the "
        "update gate {u_cost:.1f}x (higher in {u_agree}/{n_seeds}): "
    ).format(
        reset1=v["gru_reset1_vs_rnn"], reset0=v["gru_reset0_vs_mlp"],
        state_effect=v["gru_reset0_state_effect"], update1=v["gru_update1_copy"],
        keep_cell=v["lstm_keep_cell"], max_h=v["lstm_output0_max_h"],
        max_c=v["lstm_output0_max_c"], n_seeds=n_seeds, steps=steps,
        scratch=v["gru_scratch_check"], T=T, long_full=med["long"]["full"],
        long_no_update=med["long"]["no update"], long_no_reset=med["long"]["no reset"],
        long_seeds=describe_seeds(long_gap, _(" in log ratio")), short_full=med["short"]["full"],
        short_no_update=med["short"]["no update"], short_no_reset=med["short"]["no reset"],
        r_cost=r_cost, r_agree=short_gap["agree"], u_cost=u_cost,
        u_agree=sum(x > 0 for x in short_gap_u),
    ) + (
        _("the reset gate helps with the short-range dependency, more than the update gate does, "
          "as the chapter says (removing the reset gate against removing the update gate, in log "
          "ratio: {seeds}; a small effect, reported, not asserted). ")
        if helps and more
        else _("removing the reset gate raises the short-range loss over the seeds ({short}), as "
               "the chapter says, but not significantly more than removing the update gate does "
               "({seeds}): a small effect, reported, not asserted. ")
        if helps
        else _("the chapter's claim that the reset gate serves short-range dependencies does not "
               "show at this size (removing the reset gate, in log ratio: {short}). ")
    ).format(seeds=describe_seeds(reset_over_update), short=describe_seeds(short_gap)) + _(
        "The full GRU does lower R at markers (mean {at_marker} against {elsewhere} elsewhere, "
        "per seed; not asserted)."
    ).format(at_marker=ws(f"{a:.2f}" for a in ab["reset_at_marker"]),
             elsewhere=ws(f"{b:.2f}" for b in ab["reset_elsewhere"]))  # fmt: skip
    return TopicResult("gates", finding, v, {"traces": fig, "ablation": fig_a})
