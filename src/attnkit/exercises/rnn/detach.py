"""Exercise 8.5.5 of d2l 0.17 (dropped in 1.0): sequential partitioning without
detaching the carried hidden state from the computational graph: what it costs, and
what it does to the gradient and to held-out perplexity."""

from __future__ import annotations

import math
import random
import re

import torch
import torch.nn.functional as F

from attnkit.data.lm import seq_data_iter_sequential
from attnkit.exercises.rnn.lm import char_data, reference_size
from attnkit.tour.base import TopicResult, seed_summary, topic
from attnkit.tour.cost import count_ops
from attnkit.tour.stats import sign_test

__all__ = ["undetached_state"]

Params = dict[str, torch.Tensor]


def _init(vocab_size: int, hidden: int, seed: int) -> Params:
    g = torch.Generator().manual_seed(seed)
    shapes = {"W_xh": (vocab_size, hidden), "W_hh": (hidden, hidden), "W_hq": (hidden, vocab_size)}
    params = {k: torch.randn(*s, generator=g) * 0.01 for k, s in shapes.items()}
    params |= {"b_h": torch.zeros(hidden), "b_q": torch.zeros(vocab_size)}
    return {k: v.requires_grad_(True) for k, v in params.items()}


def _leaves(params: Params) -> Params:
    return {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}


def _loss(params, X, Y, h):
    """The book's scratch RNN on one minibatch: X, Y (B, T) indices, h (B, H)."""
    outputs = []
    for x in F.one_hot(X.T, params["W_xh"].shape[0]).float():  # x: (B, V)
        h = torch.tanh(x @ params["W_xh"] + h @ params["W_hh"] + params["b_h"])
        outputs.append(h @ params["W_hq"] + params["b_q"])
    return F.cross_entropy(torch.cat(outputs), Y.T.reshape(-1)), h


def _graph_nodes(t: torch.Tensor) -> int:
    """Autograd nodes reachable from ``t``: what a backward pass walks and keeps alive."""
    seen, stack = set(), [t.grad_fn]
    while stack:
        node = stack.pop()
        if node is None or node in seen:
            continue
        seen.add(node)
        stack.extend(n for n, _ in node.next_functions)
    return len(seen)


def _book_error(params, batches, h0, retain: bool) -> str:
    """Run two minibatches the book's way (in-place SGD) without detaching; return the
    error PyTorch raises ('' if none)."""
    p = _leaves(params)
    h = h0
    try:
        for X, Y in batches[:2]:
            loss, h = _loss(p, X, Y, h)
            loss.backward(retain_graph=retain)
            with torch.no_grad():
                for v in p.values():
                    v -= 1.0 * v.grad
                    v.grad.zero_()
    except RuntimeError as err:
        return re.split(r"[:(]", str(err))[0].strip()
    return ""


class _Stepper:
    """One minibatch of the scratch RNN with the carried state detached or not. Not
    detached, the state still points into the graphs of the earlier minibatches of the
    epoch, built with the parameters of their time (``earlier``: one set of leaves per
    step, since each update makes new tensors); the gradient of the update is what the
    book's ``loss.backward()`` would leave in its parameters if the in-place update did
    not invalidate those graphs: the current minibatch's part (``within``) plus what
    reaches the earlier steps' parameters through the state (``before``)."""

    def __init__(self, detach: bool) -> None:
        self.detach = detach
        self.earlier: list[Params] = []

    def grad(self, p: Params, X, Y, h) -> tuple[float, Params, Params, torch.Tensor]:
        if self.detach:
            h, self.earlier = h.detach(), []
        loss, h = _loss(p, X, Y, h)
        loss.backward(retain_graph=not self.detach)
        within = {k: v.grad for k, v in p.items()}
        before = {k: torch.zeros_like(v) for k, v in p.items()}
        for q in self.earlier:
            for k, v in q.items():
                if v.grad is not None:
                    before[k] += v.grad
                    v.grad = None
        for v in p.values():
            v.grad = None
        self.earlier.append(p)
        return float(loss.detach()), within, before, h


def _norm(g: Params) -> float:
    return math.sqrt(sum(float((v**2).sum()) for v in g.values()))


def _train(params0: Params, train, held, *, detach: bool, steps: int, B: int, T: int,
           seed: int, lr: float = 1.0, clip: float = 1.0) -> dict:  # fmt: skip
    """``steps`` SGD steps (lr, clipping θ) of the book's sequential partitioning, the
    state reset at each epoch as the book's ``train_epoch_ch8`` does; held-out perplexity
    at the end and, per step, ‖before‖ / ‖within‖ and cos(within, within + before)."""
    rng = random.Random(seed)
    p = _leaves(params0)
    share, cosine, norms = [], [], []
    while len(norms) < steps:
        h, stepper = torch.zeros(B, params0["W_hh"].shape[0]), _Stepper(detach)
        for X, Y in seq_data_iter_sequential(train, B, T, rng):
            _, within, before, h = stepper.grad(p, X, Y, h)
            total = {k: within[k] + before[k] for k in p}
            n_within, n_total = _norm(within), _norm(total)
            share.append(_norm(before) / n_within)
            cosine.append(
                sum(float((within[k] * total[k]).sum()) for k in p) / (n_within * n_total)
            )
            norms.append(n_total)
            scale = min(1.0, clip / (n_total + 1e-6))
            p = {k: (v - lr * scale * total[k]).detach().requires_grad_(True) for k, v in p.items()}
            if len(norms) == steps:
                break
    rows = 8
    L = (len(held) - 1) // rows
    with torch.no_grad():
        X, Y = held[: rows * L].reshape(rows, L), held[1 : rows * L + 1].reshape(rows, L)
        loss, _ = _loss(p, X, Y, torch.zeros(rows, params0["W_hh"].shape[0]))
    return {"perplexity": math.exp(float(loss)), "share": share, "cosine": cosine,
            "clipped_steps": sum(n > clip for n in norms)}  # fmt: skip


def _full_bptt_gap(params0: Params, batches, h0) -> float:
    """With the parameters held fixed (no update), the undetached gradient of the last
    minibatch's loss summed over the earlier steps' leaves against plain backpropagation
    through every minibatch with one set of parameters: the two must agree."""
    stepper, h = _Stepper(detach=False), h0
    for X, Y in batches:
        _, within, before, h = stepper.grad(_leaves(params0), X, Y, h)
    summed = {k: within[k] + before[k] for k in within}
    q, h = _leaves(params0), h0
    for X, Y in batches:
        loss, h = _loss(q, X, Y, h)
    direct = torch.autograd.grad(loss, list(q.values()))
    return max(float((d - summed[k]).abs().max()) for d, k in zip(direct, q))


@topic
def undetached_state(*, small: bool = False, seed: int = 0) -> TopicResult:
    """The book's scratch RNN (hidden 64, 20 time steps, batch 32, like the other 8.5
    experiments; initialised N(0, 0.01²) as the book does), the state carried on without
    ``detach``: the errors PyTorch raises on the book's code; the autograd nodes and the
    counted backward operations of consecutive minibatches against the detached run; and
    training, paired over seeds (same initialisation and batches), with and without the
    detach: held-out perplexity, and how much gradient crosses the minibatch boundary."""
    size = reference_size(small)
    H, T, B = size["num_hiddens"], size["num_steps"], size["batch_size"]
    n_batches, steps, n_seeds = (6, 40, 2) if small else (16, 120, 5)
    name, train, held, vocab = char_data(small, 30000)
    per_row = len(train) // B
    rows = train[: B * per_row].reshape(B, per_row)  # row b continues itself across batches
    batches = [(rows[:, i * T : (i + 1) * T], rows[:, i * T + 1 : (i + 1) * T + 1])
               for i in range(n_batches)]  # fmt: skip
    params0 = _init(len(vocab), H, seed)
    h0 = torch.zeros(B, H)
    second_backward = _book_error(params0, batches, h0, retain=False)
    inplace = _book_error(params0, batches, h0, retain=True)

    cost: dict[str, dict[str, list]] = {}
    for mode in ("detached", "not detached"):
        p, h, nodes, ops = _leaves(params0), h0, [], []
        for X, Y in batches:
            if mode == "detached":
                h = h.detach()
            loss, h_next = _loss(p, X, Y, h)
            nodes.append(_graph_nodes(loss))
            # .backward() as the book calls it: the whole graph the loss reaches is walked
            ops.append(count_ops(lambda loss=loss: loss.backward(retain_graph=True)).total)
            p = {k: v.detach().requires_grad_(True) for k, v in p.items()}
            h = h_next
        cost[mode] = {"nodes": nodes, "backward_ops": ops}
    d, u = cost["detached"], cost["not detached"]

    # training: the first 8,000 characters (12 minibatches an epoch, so the undetached
    # graph, which grows through each epoch, stays affordable); held-out: 3,000 characters
    text, held = train[:8000], held[:3000]
    runs: dict[str, list[dict]] = {"detached": [], "not detached": []}
    for s in range(seed, seed + n_seeds):
        p0 = _init(len(vocab), H, s)
        for mode, out in runs.items():
            out.append(_train(p0, text, held, detach=mode == "detached", steps=steps,
                              B=B, T=T, seed=s))  # fmt: skip
    ppl_d = [r["perplexity"] for r in runs["detached"]]
    ppl_u = [r["perplexity"] for r in runs["not detached"]]
    change = seed_summary([b - a for a, b in zip(ppl_d, ppl_u)])  # > 0: not detaching is worse
    share = [x for r in runs["not detached"] for x in r["share"]]
    cosine = [x for r in runs["not detached"] for x in r["cosine"]]
    values = {
        "data": name, "minibatches": n_batches, "num_hiddens": H, "num_steps": T,
        "batch_size": B, "error_without_retain": second_backward, "error_with_retain": inplace,
        "nodes_detached": d["nodes"], "nodes_not_detached": u["nodes"], "nodes_last": u["nodes"][-1],
        "backward_ops_detached": d["backward_ops"], "backward_ops_not_detached": u["backward_ops"],
        "ops_ratio_last": u["backward_ops"][-1] / d["backward_ops"][-1],
        "ops_growth_per_batch": (u["backward_ops"][-1] - u["backward_ops"][0]) / (n_batches - 1),
        "ops_first": d["backward_ops"][0],
        "full_bptt_max_difference": _full_bptt_gap(params0, batches[:4], h0),
        "train_chars": len(text), "steps": steps, "n": n_seeds,
        "epoch_minibatches": (len(text) - 1) // B // T,
        "perplexity_detached": ppl_d, "perplexity_not_detached": ppl_u,
        "perplexity_change": change,
        "not_detached_lower": sum(b < a for a, b in zip(ppl_d, ppl_u)),
        "not_detached_lower_sign_test": sign_test(sum(b < a for a, b in zip(ppl_d, ppl_u)), n_seeds),
        "perplexity_change_relative": max(abs(change["low"]), abs(change["high"]))
        / (sum(ppl_d) / len(ppl_d)),
        "crossing_share_mean": sum(share) / len(share), "crossing_share_max": max(share),
        "cosine_mean": sum(cosine) / len(cosine),
        "clipped_steps": sum(r["clipped_steps"] for rs in runs.values() for r in rs),
    }  # fmt: skip
    finding = (
        f"{name}: without retain_graph PyTorch stops with '{second_backward}'; with it, "
        f"in-place SGD stops with '{inplace}'. Not detached, the backward pass of minibatch "
        f"{n_batches} counts {u['backward_ops'][-1]} operations against "
        f"{d['backward_ops'][-1]} detached (autograd nodes {u['nodes'][-1]} vs "
        f"{d['nodes'][-1]}), growing by {values['ops_growth_per_batch']:.0f} per minibatch. "
        f"Trained {steps} steps, {n_seeds} seeds: held-out perplexity detached "
        + "/".join(f"{x:.3f}" for x in ppl_d)
        + ", not detached "
        + "/".join(f"{x:.3f}" for x in ppl_u)
        + f"; the gradient crossing the minibatch boundary is {values['crossing_share_mean']:.1%}"
        f" of the truncated one on average (at most {values['crossing_share_max']:.1%})."
    )
    return TopicResult("rnn_detach_undetached_state", finding, values, {})
