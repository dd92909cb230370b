"""Exercise 8.5.5 of d2l 0.17 (dropped in 1.0): sequential partitioning without
detaching the carried hidden state from the computational graph."""

from __future__ import annotations

import re

import torch
import torch.nn.functional as F

from attnkit.exercises.rnn.lm import char_data
from attnkit.tour.base import TopicResult, topic
from attnkit.tour.cost import count_ops

__all__ = ["undetached_state"]


def _init(vocab_size: int, hidden: int, seed: int) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    shapes = {"W_xh": (vocab_size, hidden), "W_hh": (hidden, hidden), "W_hq": (hidden, vocab_size)}
    params = {k: torch.randn(*s, generator=g) * 0.01 for k, s in shapes.items()}
    params |= {"b_h": torch.zeros(hidden), "b_q": torch.zeros(vocab_size)}
    return {k: v.requires_grad_(True) for k, v in params.items()}


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
    p = {k: v.detach().clone().requires_grad_(True) for k, v in params.items()}
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


@topic
def undetached_state(*, small: bool = False, seed: int = 0) -> TopicResult:
    """The book's scratch RNN (hidden 32, 10 time steps, batch 8) over consecutive
    minibatches of sequential partitioning, the state carried on without ``detach``:
    the errors PyTorch raises on the book's code, and, with ``retain_graph`` and
    out-of-place updates (new parameter tensors each step), the autograd nodes and the
    counted backward operations of each step against the detached run, and whether the
    gradient of the current parameters differs."""
    n_batches = 12 if small else 24
    name, train, _, vocab = char_data(small, 30000)
    B, T, H = 8, 10, 32
    per_row = len(train) // B
    rows = train[: B * per_row].reshape(B, per_row)  # row b continues itself across batches
    batches = [(rows[:, i * T : (i + 1) * T], rows[:, i * T + 1 : (i + 1) * T + 1])
               for i in range(n_batches)]  # fmt: skip
    params0 = _init(len(vocab), H, seed)
    h0 = torch.zeros(B, H)
    second_backward = _book_error(params0, batches, h0, retain=False)
    inplace = _book_error(params0, batches, h0, retain=True)

    curves: dict[str, dict[str, list]] = {}
    grad_gap = 0.0
    for mode in ("detached", "not detached"):
        p = {k: v.detach().clone().requires_grad_(True) for k, v in params0.items()}
        h, nodes, ops, losses, grads = h0, [], [], [], []
        for X, Y in batches:
            if mode == "detached":
                h = h.detach()
            loss, h = _loss(p, X, Y, h)
            nodes.append(_graph_nodes(loss))
            # .backward() as the book calls it: every leaf the graph reaches gets a gradient
            ops.append(count_ops(lambda loss=loss: loss.backward(retain_graph=True)).total)
            grads.append({k: v.grad.clone() for k, v in p.items()})
            losses.append(float(loss.detach()))
            p = {k: (v - 1.0 * v.grad).detach().requires_grad_(True) for k, v in p.items()}
        curves[mode] = {"nodes": nodes, "backward_ops": ops, "losses": losses, "grads": grads}
    d, u = curves["detached"], curves["not detached"]
    grad_gap = max(
        float((a[k] - b[k]).abs().max()) for a, b in zip(d["grads"], u["grads"]) for k in a
    )
    values = {
        "data": name, "minibatches": n_batches,
        "error_without_retain": second_backward, "error_with_retain": inplace,
        "nodes_detached": d["nodes"], "nodes_not_detached": u["nodes"], "nodes_last": u["nodes"][-1],
        "backward_ops_detached": d["backward_ops"], "backward_ops_not_detached": u["backward_ops"],
        "ops_ratio_last": u["backward_ops"][-1] / d["backward_ops"][-1],
        "ops_growth_per_batch": (u["backward_ops"][-1] - u["backward_ops"][0]) / (n_batches - 1),
        "ops_first": d["backward_ops"][0],
        "current_grad_max_difference": grad_gap,
        "loss_max_difference": max(abs(a - b) for a, b in zip(d["losses"], u["losses"])),
    }  # fmt: skip
    finding = (
        f"{name}: without retain_graph PyTorch stops with '{second_backward}'; with it, "
        f"in-place SGD stops with '{inplace}'. With new parameter tensors each step, the "
        f"backward pass of minibatch {n_batches} counts {u['backward_ops'][-1]} operations "
        f"not detached against {d['backward_ops'][-1]} detached (autograd nodes "
        f"{u['nodes'][-1]} vs {d['nodes'][-1]}), growing by "
        f"{values['ops_growth_per_batch']:.0f} per minibatch; the gradient of the current "
        f"parameters differs by at most {grad_gap:.1e} and the losses by "
        f"{values['loss_max_difference']:.1e}."
    )
    return TopicResult("rnn_detach_undetached_state", finding, values, {})
