"""Exercises of d2l 0.17 sections 9.1-9.4 (1.0's 10.1-10.4) answered on the cells'
equations with forced or copied weights, no training needed except one short run:
gates that use only the input at t' (9.1.1), the LSTM's second tanh (9.2.4), the cost of
RNN, GRU and LSTM counted (9.2.3), two scratch layers stacked against
``nn.RNN(num_layers=2)`` (9.3.1), directions of different widths (9.4.1)."""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F
from torch import nn

from attnkit.models.rnn import GRUScratchLayer, LSTMScratchLayer, RNNScratchLayer, build_lm
from attnkit.tour.base import TopicResult, timed, topic
from attnkit.tour.cost import count_ops
from attnkit.tour.gates import BIG

__all__ = [
    "bidirectional_widths", "counted_cost", "input_at_t_prime", "lstm_second_tanh",
    "two_layer_scratch",
]  # fmt: skip


def _randomized(layer: nn.Module, scale: float = 0.5) -> nn.Module:
    with torch.no_grad():
        for p in layer.parameters():
            p.normal_(0, scale)
    return layer


@topic
def input_at_t_prime(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.1.1: a GRU whose update gate is ≈0 and reset gate ≈0 at t' (H_t' is a function
    of X_t' alone) and whose update gate is ≈1 after t' (the state is copied): the state
    at t depends on X_t' only, checked by gradients; the free GRU for contrast."""
    torch.manual_seed(seed)
    D, H, T, B, t_prime = 3, 4, 8, 2, 3
    free = _randomized(GRUScratchLayer(D, H).double())
    take, keep = copy.deepcopy(free), copy.deepcopy(free)
    with torch.no_grad():
        take.b_z.fill_(-BIG), take.b_r.fill_(-BIG)  # Z ≈ 0, R ≈ 0 at t'
        keep.b_z.fill_(BIG)  # Z ≈ 1 after t'
    X = torch.randn(T, B, D, dtype=torch.float64, requires_grad=True)  # (T, B, D)
    H0 = torch.randn(B, H, dtype=torch.float64, requires_grad=True)
    _, (h,) = free(X[:t_prime], (H0,))  # before t': anything (here the free gates)
    _, (h,) = take(X[t_prime : t_prime + 1], (h,))
    _, (h,) = keep(X[t_prime + 1 :], (h,))  # (B, H), the state at t = T - 1
    mlp = torch.tanh(X[t_prime] @ free.W_xh + free.b_h)  # an MLP on X_t' alone
    gX, gH0 = torch.autograd.grad(h.sum(), (X, H0))
    other = torch.cat([gX[:t_prime], gX[t_prime + 1 :]]).abs().max()
    _, (h_free,) = free(X, (H0,))
    gX_free = torch.autograd.grad(h_free.sum(), X)[0]
    values = {
        "T": T, "t_prime": t_prime,
        "state_vs_mlp_of_x_t_prime": float((h - mlp).detach().abs().max()),
        "grad_at_t_prime": float(gX[t_prime].abs().max()),
        "grad_elsewhere_max": float(max(other, gH0.abs().max())),
        "free_grad_elsewhere_max": float(torch.cat([gX_free[:t_prime],
                                                    gX_free[t_prime + 1 :]]).abs().max()),
    }  # fmt: skip
    finding = (
        f"Z≈0, R≈0 at t'={t_prime}, Z≈1 after: the state at t={T - 1} equals tanh(X_t' W_xh + "
        f"b_h) to {values['state_vs_mlp_of_x_t_prime']:.1e}; its gradient is "
        f"{values['grad_at_t_prime']:.2f} for X_t' and at most "
        f"{values['grad_elsewhere_max']:.1e} for every other input and H_0 (free gates: "
        f"{values['free_grad_elsewhere_max']:.2f})."
    )
    return TopicResult("gated_cells_input_at_t_prime", finding, values)


@topic
def lstm_second_tanh(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.2.4: the memory cell adds up candidates in (-1, 1), so it is not bounded by 1:
    forget ≈ 1, input ≈ 1 and a candidate ≈ 1 make C_t = C_0 + t; tanh(C_t) keeps H in
    (-1, 1), O ⊙ C_t would not. Also a trained-size free LSTM on long random input."""
    torch.manual_seed(seed)
    D, H, T, B = 3, 4, 50, 2
    cell = _randomized(LSTMScratchLayer(D, H).double())
    with torch.no_grad():
        cell.b_f.fill_(BIG), cell.b_i.fill_(BIG), cell.b_c.fill_(BIG)  # F, I, C~ ≈ 1
    X = torch.randn(T, B, D, dtype=torch.float64)
    zeros = torch.zeros(B, H, dtype=torch.float64)
    cells, hiddens, h, c = [], [], zeros, zeros
    with torch.no_grad():
        for t in range(T):  # one step at a time to see every C_t
            _, (h, c) = cell(X[t : t + 1], (h, c))
            cells.append(c), hiddens.append(h)
        C = torch.stack(cells)  # (T, B, H)
        steps = torch.arange(1, T + 1, dtype=torch.float64)[:, None, None]
        out_gate = torch.sigmoid(X @ cell.W_xo + cell.b_o)  # approximate: H_(t-1) enters O too
        free = _randomized(LSTMScratchLayer(D, H).double(), 1.0)
        Xl = torch.randn(400, B, D, dtype=torch.float64) * 2
        Yf, _ = free(Xl, (zeros, zeros))
        Cf = []
        hf, cf = zeros, zeros
        for t in range(400):
            _, (hf, cf) = free(Xl[t : t + 1], (hf, cf))
            Cf.append(cf)
        Cf = torch.stack(Cf)
    values = {
        "T": T,
        "cell_minus_t": float((C - steps).abs().max()),
        "max_abs_cell": float(C.abs().max()),
        "max_abs_hidden": float(torch.stack(hiddens).abs().max()),
        "without_tanh_max": float((out_gate * C).abs().max()),
        "free_max_abs_cell": float(Cf.abs().max()),
        "free_max_abs_hidden": float(Yf.abs().max()),
    }
    finding = (
        f"F≈I≈C~≈1: C_t = t to {values['cell_minus_t']:.1e}, |C| reaches "
        f"{values['max_abs_cell']:.0f}, H = O⊙tanh(C) stays <= {values['max_abs_hidden']:.3f}; "
        f"O⊙C would reach {values['without_tanh_max']:.1f}. A free LSTM (weights N(0,1), 400 "
        f"steps): |C| up to {values['free_max_abs_cell']:.2f}, |H| up to "
        f"{values['free_max_abs_hidden']:.3f}."
    )
    return TopicResult("gated_cells_lstm_second_tanh", finding, values)


@topic
def counted_cost(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.2.3: FLOPs of one minibatch of a character LM (scratch layers, the book's
    equations) for RNN, GRU and LSTM at the same hidden size: inference (forward) and
    training (forward + backward, torch's FlopCounterMode), parameters; the forward FLOPs
    of torch.nn's layers of the same shape counted too; seconds beside."""
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(seed)
    V, B, T = 28, 32, (10 if small else 35)
    sizes = (64,) if small else (64, 256)
    X = torch.randint(V, (B, T))
    Y = torch.randint(V, (B, T))
    table: dict[str, dict] = {}
    for h in sizes:
        for cell in ("rnn", "gru", "lstm"):
            model = build_lm(cell, V, h, scratch=True)
            infer = count_ops(lambda m=model: m(X))
            fused = build_lm(cell, V, h)  # torch.nn's layer (a fused kernel for the LSTM)
            with FlopCounterMode(display=False) as counter:
                logits, _ = model(X)
                F.cross_entropy(logits, Y.T.reshape(-1)).backward()
            out_layer = 2 * B * T * h * V  # the shared Linear(H, V)
            table[f"{cell} h={h}"] = {
                "inference_flops": infer.flops, "inference_ops": infer.total,
                "fused_inference_flops": count_ops(lambda m=fused: m(X)).flops,
                "training_flops": int(counter.get_total_flops()),
                "recurrent_flops": infer.flops - out_layer,
                "params": sum(p.numel() for p in model.rnn.parameters()),
                "seconds_forward": timed(lambda m=model: m(X), repeat=1) if not small else 0.0,
            }  # fmt: skip
    for h in sizes:
        base = table[f"rnn h={h}"]
        for cell in ("gru", "lstm"):
            r = table[f"{cell} h={h}"]
            r["recurrent_over_rnn"] = r["recurrent_flops"] / base["recurrent_flops"]
            r["params_over_rnn"] = r["params"] / base["params"]
    ratio = {k: r["training_flops"] / r["inference_flops"] for k, r in table.items()}
    values = {"V": V, "B": B, "T": T, "sizes": list(sizes), "table": table,
              "training_over_inference": ratio}  # fmt: skip
    finding = "; ".join(
        f"{k}: inference {r['inference_flops'] / 1e6:.1f} MFLOPs, training "
        f"{r['training_flops'] / 1e6:.1f}, params {r['params']}"
        for k, r in table.items()
    )
    return TopicResult("gated_cells_counted_cost", finding, values)


class TwoLayerScratchLM(nn.Module):
    """One-hot input -> two ``RNNScratchLayer`` stacked by hand -> Linear (9.3.1):
    ``forward(inputs (B, T), state (2, B, H) or None)`` -> ``(logits (T*B, V), state)``."""

    def __init__(self, vocab_size: int, num_hiddens: int) -> None:
        super().__init__()
        self.vocab_size, self.num_hiddens = vocab_size, num_hiddens
        self.layer1 = RNNScratchLayer(vocab_size, num_hiddens)
        self.layer2 = RNNScratchLayer(num_hiddens, num_hiddens)
        self.linear = nn.Linear(num_hiddens, vocab_size)

    def forward(self, inputs, state=None):
        X = F.one_hot(inputs.T.long(), self.vocab_size).float()  # (T, B, V)
        if state is None:
            state = X.new_zeros(2, X.shape[1], self.num_hiddens)
        Y1, (h1,) = self.layer1(X, (state[0],))  # (T, B, H): the first layer's outputs
        Y2, (h2,) = self.layer2(Y1, (state[1],))  # ... are the second layer's inputs
        return self.linear(Y2.reshape(-1, self.num_hiddens)), torch.stack([h1, h2])


@topic
def two_layer_scratch(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.3.1: two scratch RNN layers stacked equal ``nn.RNN(num_layers=2)`` with the same
    weights (outputs, final states, gradients); the stack trains as a character LM."""
    from attnkit.exercises.gated.lm import lm_size, train_lm
    from attnkit.exercises.rnn.lm import char_data, evaluate_perplexity

    torch.manual_seed(seed)
    V, H, T, B = 7, 5, 6, 3
    ref = nn.RNN(V, H, num_layers=2).double()
    mine = TwoLayerScratchLM(V, H).double()
    with torch.no_grad():
        for k, layer in enumerate((mine.layer1, mine.layer2)):
            layer.W_xh.copy_(getattr(ref, f"weight_ih_l{k}").T)
            layer.W_hh.copy_(getattr(ref, f"weight_hh_l{k}").T)
            layer.b_h.copy_(getattr(ref, f"bias_ih_l{k}") + getattr(ref, f"bias_hh_l{k}"))
    inputs = torch.randint(V, (B, T))
    H0 = torch.randn(2, B, H, dtype=torch.float64)
    X = F.one_hot(inputs.T, V).double()  # (T, B, V)
    Y_ref, h_ref = ref(X, H0)
    Y1, (h1,) = mine.layer1(X, (H0[0],))
    Y2, (h2,) = mine.layer2(Y1, (H0[1],))
    Y2.sum().backward()
    Y_ref.sum().backward()
    grad_diff = float((mine.layer1.W_hh.grad - ref.weight_hh_l0.grad.T).abs().max())
    size = lm_size(small)
    name, train, held, vocab = char_data(small, size["max_tokens"])
    torch.manual_seed(seed)
    lm = TwoLayerScratchLM(len(vocab), size["num_hiddens"])
    before = evaluate_perplexity(lm, held)
    losses = train_lm(lm, train, steps=size["steps"], lr=size["lr"],
                      num_steps=size["num_steps"], seed=seed)  # fmt: skip
    values = {
        "output_max_diff": float((Y2 - Y_ref).detach().abs().max()),
        "state_max_diff": float((torch.stack([h1, h2]) - h_ref).detach().abs().max()),
        "grad_max_diff": grad_diff,
        "data": name, "steps": size["steps"], "vocab_size": len(vocab),
        "ppl_before": before, "ppl_after": evaluate_perplexity(lm, held),
        "first_loss": losses[0], "last_loss": sum(losses[-5:]) / 5,
    }  # fmt: skip
    finding = (
        f"two stacked scratch layers vs nn.RNN(num_layers=2), same weights: outputs differ by "
        f"{values['output_max_diff']:.1e}, final states {values['state_max_diff']:.1e}, the "
        f"gradient of W_hh (layer 1) {grad_diff:.1e}. Trained {size['steps']} steps on {name}: "
        f"held-out perplexity {before:.1f} -> {values['ppl_after']:.2f}."
    )
    return TopicResult("gated_cells_two_layer_scratch", finding, values)


@topic
def bidirectional_widths(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.4.1: a forward GRU of width 3 and a backward GRU of width 5, run by hand: H_t is
    their concatenation (width 8); at t = 0 the forward half depends on X_0 only, the
    backward half on every input (gradients). nn.GRU(bidirectional=True) has one width."""
    torch.manual_seed(seed)
    D, T, B, h_f, h_b = 4, 6, 2, 3, 5
    fwd, bwd = nn.GRU(D, h_f), nn.GRU(D, h_b)
    X = torch.randn(T, B, D, requires_grad=True)  # (T, B, D)
    Yf, _ = fwd(X)  # (T, B, h_f)
    Yb, _ = bwd(X.flip(0))  # the reversed sequence ...
    Hcat = torch.cat([Yf, Yb.flip(0)], -1)  # ... flipped back: (T, B, h_f + h_b)
    gf = torch.autograd.grad(Hcat[0, :, :h_f].sum(), X, retain_graph=True)[0]
    gb = torch.autograd.grad(Hcat[0, :, h_f:].sum(), X)[0]
    output_layer = nn.Linear(h_f + h_b, 10)  # the output layer's weight: (q, h_f + h_b)
    same = nn.GRU(D, 4, bidirectional=True)
    values = {
        "h_f": h_f, "h_b": h_b, "H_shape": list(Hcat.shape),
        "output_weight_shape": list(output_layer.weight.shape),
        "forward_half_grad_later_inputs": float(gf[1:].abs().max()),
        "backward_half_grad_last_input": float(gb[-1].abs().max()),
        "torch_bidirectional_shape": list(same(X.detach())[0].shape),
    }  # fmt: skip
    finding = (
        f"h_f = {h_f}, h_b = {h_b}: H has shape {values['H_shape']} (T, B, h_f + h_b); the "
        f"output layer's weight {values['output_weight_shape']}. At t = 0 the forward half's "
        f"gradient w.r.t. later inputs is {values['forward_half_grad_later_inputs']:.1e}, the "
        f"backward half's w.r.t. the last input {values['backward_half_grad_last_input']:.2f}."
    )
    return TopicResult("gated_cells_bidirectional_widths", finding, values)
