"""count_ops on torch's recurrent layers: the FLOPs of nn.RNN / nn.GRU / nn.LSTM (fused
oneDNN kernel or composite pieces) against a hand count from the sizes and against the
same layer rebuilt from nn.Linear (and attnkit's ScratchRNN), forward and backward."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from attnkit.models.rnn import ScratchRNN
from attnkit.tour.cost import count_ops

pytestmark = [  # torch's notes on proj_size (no oneDNN kernel) and on oneDNN's flags
    pytest.mark.filterwarnings("ignore:LSTM with projections is not supported"),
    pytest.mark.filterwarnings("ignore:TF32 acceleration on top of oneDNN"),
]

GATES = {"rnn_tanh": 1, "rnn_relu": 1, "gru": 3, "lstm": 4}


def hand_flops(mode, I, H, L, K, T, B, P=0):  # noqa: E741
    """2 FLOPs per multiply-add: per step, batch row, layer and direction, every gate
    multiplies its input (I, then K * out for the layers above) and the previous hidden
    state (out wide: H, or P with proj_size); an LSTM with proj_size adds h @ W_hr (H -> P)."""
    out = P or H
    total = 0
    for layer in range(L):
        width = I if layer == 0 else K * out
        per_row = GATES[mode] * (2 * width * H + 2 * out * H) + (2 * H * P if P else 0)
        total += T * B * K * per_row
    return total


def torch_rnn(mode, I, H, L, bidir, batch_first, bias, P=0):  # noqa: E741
    torch.manual_seed(0)
    kw = {"num_layers": L, "bidirectional": bidir, "batch_first": batch_first, "bias": bias}
    if mode == "gru":
        return nn.GRU(I, H, **kw)
    if mode == "lstm":
        return nn.LSTM(I, H, proj_size=P, **kw)
    return nn.RNN(I, H, nonlinearity=mode[4:], **kw)


class LinearTwin(nn.Module):
    """``rnn`` unfused: per layer and direction an nn.Linear for the input products of all
    gates, one for the hidden products (and the LSTM's projection), weights copied in."""

    def __init__(self, rnn: nn.RNNBase) -> None:
        super().__init__()
        self.rnn, self.K = rnn, 2 if rnn.bidirectional else 1
        self.cells = nn.ModuleList()
        for layer in range(rnn.num_layers):
            for d in range(self.K):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                w_ih, w_hh = getattr(rnn, "weight_ih" + sfx), getattr(rnn, "weight_hh" + sfx)
                cell = nn.ModuleDict({"ih": self._linear(w_ih, rnn, "bias_ih" + sfx),
                                      "hh": self._linear(w_hh, rnn, "bias_hh" + sfx)})  # fmt: skip
                if getattr(rnn, "proj_size", 0):
                    cell["hr"] = self._linear(getattr(rnn, "weight_hr" + sfx), rnn, None)
                self.cells.append(cell)

    @staticmethod
    def _linear(weight, rnn, bias_name) -> nn.Linear:
        has_bias = bool(bias_name) and rnn.bias
        lin = nn.Linear(weight.shape[1], weight.shape[0], bias=has_bias)
        with torch.no_grad():
            lin.weight.copy_(weight)
            if has_bias:
                lin.bias.copy_(getattr(rnn, bias_name))
        return lin

    def _step(self, cell, x, h, c):
        gi, gh = cell["ih"](x), cell["hh"](h)
        mode = self.rnn.mode
        if mode == "RNN_TANH":
            return torch.tanh(gi + gh), c
        if mode == "RNN_RELU":
            return torch.relu(gi + gh), c
        if mode == "GRU":
            (ir, iz, in_), (hr, hz, hn) = gi.chunk(3, -1), gh.chunk(3, -1)
            r, z = torch.sigmoid(ir + hr), torch.sigmoid(iz + hz)
            n = torch.tanh(in_ + r * hn)
            return (1 - z) * n + z * h, c
        i, f, g, o = (gi + gh).chunk(4, -1)
        c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
        h = torch.sigmoid(o) * torch.tanh(c)
        return (cell["hr"](h) if "hr" in cell else h), c

    def forward(self, X, h0, c0=None):  # X as the torch module takes it; h0 (L*K, B, out)
        X = X.transpose(0, 1) if self.rnn.batch_first else X
        for layer in range(self.rnn.num_layers):
            outs = []
            for d in range(self.K):
                i = layer * self.K + d
                h, c, ys = h0[i], None if c0 is None else c0[i], []
                for x in X.flip(0).unbind(0) if d else X.unbind(0):
                    h, c = self._step(self.cells[i], x, h, c)
                    ys.append(h)
                Y = torch.stack(ys)
                outs.append(Y.flip(0) if d else Y)
            X = torch.cat(outs, -1)
        return X.transpose(0, 1) if self.rnn.batch_first else X


# mode, I, H, L, bidirectional, batch_first, bias, proj_size, T, B
CASES = [
    ("lstm", 5, 4, 1, False, False, True, 0, 7, 3),
    ("lstm", 5, 4, 2, True, True, True, 0, 6, 3),
    ("lstm", 5, 4, 2, True, False, False, 0, 4, 2),
    ("lstm", 5, 6, 2, True, True, True, 3, 5, 2),
    ("lstm", 3, 6, 2, False, False, False, 2, 4, 3),
    ("gru", 3, 4, 1, False, False, True, 0, 7, 3),
    ("gru", 5, 4, 2, True, True, True, 0, 6, 3),
    ("gru", 5, 4, 2, True, False, False, 0, 4, 2),
    ("rnn_tanh", 5, 4, 2, True, True, True, 0, 6, 3),
    ("rnn_relu", 5, 4, 2, False, False, False, 0, 5, 2),
]


def _inputs(mode, I, H, L, bidir, batch_first, P, T, B, grad=False):  # noqa: E741
    K = 2 if bidir else 1
    X = torch.randn((B, T, I) if batch_first else (T, B, I), requires_grad=grad)
    h0 = torch.randn(L * K, B, P or H, requires_grad=grad)
    c0 = torch.randn(L * K, B, H, requires_grad=grad) if mode == "lstm" else None
    return X, h0, c0


def _call(module, X, h0, c0):
    return module(X, (h0, c0) if c0 is not None else h0)


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_forward_flops_match_hand_count_and_linear_twin(case):
    mode, I, H, L, bidir, bf, bias, P, T, B = case  # noqa: E741
    rnn = torch_rnn(mode, I, H, L, bidir, bf, bias, P)
    twin = LinearTwin(rnn)
    X, h0, c0 = _inputs(mode, I, H, L, bidir, bf, P, T, B)
    expected = hand_flops(mode, I, H, L, 2 if bidir else 1, T, B, P)
    fused = count_ops(lambda: _call(rnn, X, h0, c0))
    unfused = count_ops(lambda: twin(X, h0, c0))
    assert fused.flops == expected
    assert unfused.flops == expected
    with torch.no_grad():  # the twin is the same function, not only the same sizes
        torch.testing.assert_close(twin(X, h0, c0), _call(rnn, X, h0, c0)[0])


@pytest.mark.parametrize("case", [CASES[1], CASES[2], CASES[3], CASES[6], CASES[8]],
                         ids=lambda c: "-".join(map(str, c)))  # fmt: skip
def test_backward_flops_are_twice_the_forward(case):
    """Gradients of inputs, states and weights: two products per forward product."""
    mode, I, H, L, bidir, bf, bias, P, T, B = case  # noqa: E741
    rnn = torch_rnn(mode, I, H, L, bidir, bf, bias, P)
    twin = LinearTwin(rnn)
    expected = 2 * hand_flops(mode, I, H, L, 2 if bidir else 1, T, B, P)
    X, h0, c0 = _inputs(mode, I, H, L, bidir, bf, P, T, B, grad=True)
    loss = _call(rnn, X, h0, c0)[0].sum()
    assert count_ops(lambda: loss.backward()).flops == expected
    loss = twin(X, h0, c0).sum()
    assert count_ops(lambda: loss.backward()).flops == expected


class _Seen(TorchDispatchMode):
    def __init__(self) -> None:
        super().__init__()
        self.ops: set[str] = set()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops.add(func._overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


@pytest.mark.skipif(not torch.backends.mkldnn.is_available(), reason="no oneDNN in this torch")
def test_fused_lstm_kernel_counts_its_products_only():
    """nn.LSTM runs oneDNN's fused layer here; with oneDNN off it runs the composite pieces:
    the same FLOPs, and the fused kernel's gates are not counted again as elements."""
    rnn = torch_rnn("lstm", 5, 4, 2, True, True, True)
    X = torch.randn(3, 6, 5)
    seen = _Seen()
    with torch.no_grad(), seen:
        rnn(X)
    assert "mkldnn_rnn_layer" in seen.ops and "addmm" not in seen.ops
    fused = count_ops(lambda: rnn(X))
    with torch.backends.mkldnn.flags(enabled=False):
        seen = _Seen()
        with torch.no_grad(), seen:
            rnn(X)
        composite = count_ops(lambda: rnn(X))
    assert "mkldnn_rnn_layer" not in seen.ops and "addmm" in seen.ops
    assert fused.flops == composite.flops == hand_flops("lstm", 5, 4, 2, 2, 6, 3)
    # fused, the elements of the plumbing around the kernel only: the zero initial H and C
    # and the stacked final ones (4 * (L*K, B, H)), the batch-first input made contiguous
    # (T, B, I) and the two directions concatenated after each layer (2 * (T, B, K*H))
    plumbing = 4 * (4 * 3 * 4) + 6 * 3 * 5 + 2 * (6 * 3 * 8)
    assert fused.elementwise == plumbing < composite.elementwise


@pytest.mark.parametrize("mode", ["lstm", "gru"])
def test_packed_and_unbatched_inputs(mode):
    """Packed sequences: one row per real step (the sum of the lengths); (T, I): B = 1."""
    rnn = torch_rnn(mode, 5, 4, 2, True, False, True)
    lengths = torch.tensor([6, 4, 1])
    packed = nn.utils.rnn.pack_padded_sequence(torch.randn(6, 3, 5), lengths)
    per_step = hand_flops(mode, 5, 4, 2, 2, T=1, B=1)
    assert count_ops(lambda: rnn(packed)).flops == int(lengths.sum()) * per_step
    assert count_ops(lambda: rnn(torch.randn(7, 5))).flops == 7 * per_step


@pytest.mark.parametrize("cell", ["lstm", "gru", "rnn"])
def test_attnkit_scratch_layers_count_the_same_products(cell):
    """attnkit's ScratchRNN (addmm per step, gates concatenated) with nn's weights."""
    mode = "rnn_tanh" if cell == "rnn" else cell
    rnn = torch_rnn(mode, 5, 4, 2, True, False, True)
    scratch = ScratchRNN(cell, 5, 4, 2, bidirectional=True, reset_after=cell == "gru")
    scratch.load_from_torch(rnn)
    X = torch.randn(6, 3, 5)
    expected = hand_flops(mode, 5, 4, 2, 2, 6, 3)
    assert count_ops(lambda: rnn(X)).flops == count_ops(lambda: scratch(X)).flops == expected
