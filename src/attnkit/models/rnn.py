"""RNN, GRU and LSTM from their equations, and one language model over them or torch.nn.

Shape legend: T time steps, B batch, D input width, H hidden width, V vocabulary,
L layers, K directions (1, or 2 when bidirectional).

The scratch layers take the parameter names of the book's equations (``W_xz``,
``W_hz``, ``b_z``...), are initialized as the book (``randn * 0.01`` weights, zero
biases) and are fast enough to train: the input projections of all time steps are
one matmul, then a Python loop runs over time with one matmul per step.

``ScratchRNN`` mirrors ``nn.RNN``/``nn.GRU``/``nn.LSTM``: time-major input (T, B, D),
state (L*K, B, H) (a pair ``(H, C)`` for the LSTM), output (T, B, K*H); so
``RNNLM`` wraps either. ``ScratchRNN.load_from_torch`` copies a torch.nn module's
weights in (used by the equivalence tests).

The book's GRU computes the candidate state as ``tanh(X W_xh + (R * H) W_hh + b_h)``;
``nn.GRU`` (cuDNN) computes ``tanh(X W_xh + b_h + R * (H W_hh + b_hh))``. They are
different functions, so ``ScratchRNN('gru', reset_after=True)`` gives the second
form (Keras's name for it) with the extra bias ``b_hh``; the default is the book's.
"""

from __future__ import annotations

from typing import ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit._validate import one_of, positive_int, probability
from attnkit.i18n import _

__all__ = [
    "CELLS",
    "RNNLM",
    "GRUScratchLayer",
    "LSTMScratchLayer",
    "RNNScratchLayer",
    "ScratchRNN",
    "build_lm",
    "make_rnn",
]

CELLS = ("rnn", "gru", "lstm")
_TORCH_CLASSES = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}

State = Tensor | tuple[Tensor, Tensor]


def _check_cell(cell) -> str:
    """``cell`` lowercased ("GRU" is "gru") if it is one of :data:`CELLS`."""
    if not isinstance(cell, str):
        message = _("cell must be a str (one of {cells}), got {type}")
        raise TypeError(message.format(cells=CELLS, type=type(cell).__name__))
    return one_of("cell", cell.lower(), CELLS)


class _ScratchLayer(nn.Module):
    """One layer, one direction. Subclasses name their gates; ``W_x{g}``, ``W_h{g}``, ``b_{g}``.

    The hidden projections of all gates are multiplied in one matmul per step
    (``W_h`` concatenated), the input projections of all steps in one matmul.
    """

    gates: ClassVar[tuple[str, ...]] = ()
    num_states: ClassVar[int] = 1

    def __init__(self, input_size: int, hidden_size: int) -> None:
        super().__init__()
        self.input_size, self.hidden_size = input_size, hidden_size
        for g in self.gates:
            self.register_parameter(
                f"W_x{g}", nn.Parameter(torch.randn(input_size, hidden_size) * 0.01)
            )
            self.register_parameter(
                f"W_h{g}", nn.Parameter(torch.randn(hidden_size, hidden_size) * 0.01)
            )
            self.register_parameter(f"b_{g}", nn.Parameter(torch.zeros(hidden_size)))

    def _cat(self, prefix: str, gates: tuple[str, ...] | None = None) -> Tensor:
        return torch.cat([getattr(self, f"{prefix}{g}") for g in gates or self.gates], dim=-1)

    def input_projection(self, X: Tensor) -> Tensor:
        """(T, B, D) -> (T, B, G*H): ``X W_x + b`` for every gate and step in one matmul."""
        T, B, D = X.shape
        out = torch.addmm(self._cat("b_"), X.reshape(T * B, D), self._cat("W_x"))
        return out.reshape(T, B, -1)

    def forward(self, X: Tensor, state: tuple[Tensor, ...]) -> tuple[Tensor, tuple[Tensor, ...]]:
        raise NotImplementedError


class RNNScratchLayer(_ScratchLayer):
    """H_t = tanh(X_t W_xh + H_{t-1} W_hh + b_h)."""

    gates = ("h",)

    def forward(self, X, state):  # X: (T, B, D), state: ((B, H),)
        XW = self.input_projection(X)  # (T, B, H)
        (H,) = state
        W_hh = self.W_hh
        outputs = []
        for XW_t in XW.unbind(0):  # unbind: one backward for all steps (XW[t] would be T)
            H = torch.tanh(torch.addmm(XW_t, H, W_hh))
            outputs.append(H)
        return torch.stack(outputs), (H,)


class GRUScratchLayer(_ScratchLayer):
    """Z = σ(X W_xz + H W_hz + b_z), R = σ(X W_xr + H W_hr + b_r),
    H~ = tanh(X W_xh + (R ⊙ H) W_hh + b_h), H = Z ⊙ H + (1 - Z) ⊙ H~.

    With ``reset_after=True``: H~ = tanh(X W_xh + b_h + R ⊙ (H W_hh + b_hh)), as nn.GRU.
    """

    gates = ("z", "r", "h")

    def __init__(self, input_size: int, hidden_size: int, reset_after: bool = False) -> None:
        super().__init__(input_size, hidden_size)
        self.reset_after = reset_after
        if reset_after:
            self.b_hh = nn.Parameter(torch.zeros(hidden_size))

    def forward(self, X, state):  # X: (T, B, D), state: ((B, H),)
        XW = self.input_projection(X)  # (T, B, 3H)
        (H,) = state
        n = self.hidden_size
        outputs = []
        XZR, XH = XW.split([2 * n, n], dim=-1)  # (T, B, 2H), (T, B, H)
        steps = zip(XZR.unbind(0), XH.unbind(0))
        if self.reset_after:
            W_h = self._cat("W_h")  # (H, 3H)
            b_h = torch.cat([torch.zeros(2 * n, dtype=H.dtype, device=H.device), self.b_hh])
            for XZR_t, XH_t in steps:
                HZR, HH = torch.addmm(b_h, H, W_h).split([2 * n, n], dim=-1)  # (B, 2H), (B, H)
                Z, R = torch.sigmoid(XZR_t + HZR).chunk(2, dim=-1)
                H_tilde = torch.tanh(XH_t + R * HH)
                H = H_tilde + Z * (H - H_tilde)  # = Z*H + (1-Z)*H~
                outputs.append(H)
        else:
            W_hzr = self._cat("W_h", ("z", "r"))  # (H, 2H)
            W_hh = self.W_hh
            for XZR_t, XH_t in steps:
                Z, R = torch.sigmoid(torch.addmm(XZR_t, H, W_hzr)).chunk(2, dim=-1)
                H_tilde = torch.tanh(torch.addmm(XH_t, R * H, W_hh))
                H = H_tilde + Z * (H - H_tilde)
                outputs.append(H)
        return torch.stack(outputs), (H,)


class LSTMScratchLayer(_ScratchLayer):
    """I, F, O = σ(X W_x{i,f,o} + H W_h{i,f,o} + b_{i,f,o}), C~ = tanh(X W_xc + H W_hc + b_c),
    C = F ⊙ C + I ⊙ C~, H = O ⊙ tanh(C)."""

    gates = ("i", "f", "o", "c")
    num_states = 2

    def forward(self, X, state):  # X: (T, B, D), state: ((B, H), (B, H))
        XW = self.input_projection(X)  # (T, B, 4H)
        H, C = state
        n = self.hidden_size
        W_h = self._cat("W_h")  # (H, 4H)
        outputs = []
        for XW_t in XW.unbind(0):
            IFO, C_hat = torch.addmm(XW_t, H, W_h).split([3 * n, n], dim=-1)  # (B, 3H), (B, H)
            I_t, F_t, O_t = torch.sigmoid(IFO).chunk(3, dim=-1)
            C = F_t * C + I_t * torch.tanh(C_hat)
            H = O_t * torch.tanh(C)
            outputs.append(H)
        return torch.stack(outputs), (H, C)


_LAYERS = {"rnn": RNNScratchLayer, "gru": GRUScratchLayer, "lstm": LSTMScratchLayer}
# torch.nn packs gates in this order in weight_ih / weight_hh / bias_*
_TORCH_GATE_ORDER = {"rnn": ("h",), "gru": ("r", "z", "h"), "lstm": ("i", "f", "c", "o")}


class ScratchRNN(nn.Module):
    """Multi-layer, optionally bidirectional stack of scratch layers with nn.RNN's interface.

    ``forward(X (T, B, D), state)`` -> ``(Y (T, B, K*H), state)``; state is (L*K, B, H)
    (``(H, C)`` for the LSTM), ordered layer-major as in torch.nn.
    """

    def __init__(
        self,
        cell: str,
        input_size: int,
        hidden_size: int,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout: float = 0.0,
        reset_after: bool = False,
    ) -> None:
        super().__init__()
        self.cell = _check_cell(cell)
        self.input_size = positive_int("input_size", input_size)
        self.hidden_size = positive_int("hidden_size", hidden_size)
        self.num_layers = positive_int("num_layers", num_layers)
        probability("dropout", dropout)
        if reset_after and self.cell != "gru":
            message = _("reset_after applies to the GRU only, got cell={cell!r}")
            raise ValueError(message.format(cell=cell))
        self.bidirectional = bool(bidirectional)
        self.dropout = dropout
        self.reset_after = reset_after
        self.mode = {"rnn": "RNN_TANH", "gru": "GRU", "lstm": "LSTM"}[self.cell]
        K = 2 if self.bidirectional else 1
        layers = []
        for layer in range(num_layers):
            d_in = input_size if layer == 0 else K * hidden_size
            for _direction in range(K):
                kwargs = {"reset_after": reset_after} if self.cell == "gru" else {}
                layers.append(_LAYERS[self.cell](d_in, hidden_size, **kwargs))
        self.layers = nn.ModuleList(layers)  # index layer * K + direction

    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    def forward(self, X: Tensor, state: State | None = None) -> tuple[Tensor, State]:
        # X: (T, B, D)
        if X.dim() != 3 or X.shape[-1] != self.input_size:
            message = _("input must have shape (T, B, input_size={input_size}), got {shape}")
            raise ValueError(message.format(input_size=self.input_size, shape=tuple(X.shape)))
        K, n_states = self.num_directions, _LAYERS[self.cell].num_states
        if state is None:
            zeros = X.new_zeros(self.num_layers * K, X.shape[1], self.hidden_size)
            states: tuple[Tensor, ...] = (zeros,) * n_states
        else:
            states = tuple(state) if n_states == 2 else (state,)
        finals: list[list[Tensor]] = [[] for _ in range(n_states)]
        for layer in range(self.num_layers):
            outs = []
            for d in range(K):
                i = layer * K + d
                s0 = tuple(s[i] for s in states)
                inp = X.flip(0) if d == 1 else X
                Y, s = self.layers[i](inp, s0)
                outs.append(Y.flip(0) if d == 1 else Y)
                for j in range(n_states):
                    finals[j].append(s[j])
            X = outs[0] if K == 1 else torch.cat(outs, dim=-1)  # (T, B, K*H)
            if self.dropout and self.training and layer < self.num_layers - 1:
                X = F.dropout(X, self.dropout, training=True)
        out_states = tuple(torch.stack(f) for f in finals)  # each (L*K, B, H)
        return X, (out_states if n_states == 2 else out_states[0])

    @torch.no_grad()
    def load_from_torch(self, rnn: nn.RNNBase) -> ScratchRNN:
        """Copy the weights of an ``nn.RNN``/``nn.GRU``/``nn.LSTM`` of the same shape.

        A GRU needs ``reset_after=True`` (see the module docstring); two biases of
        torch.nn (``b_ih + b_hh``) fold into one ``b_g`` where the equations allow.
        """
        expected = _TORCH_CLASSES[self.cell]
        if type(rnn) is not expected:
            raise TypeError(f"expected an {expected.__name__}, got {type(rnn).__name__}")
        if self.cell == "rnn" and rnn.nonlinearity != "tanh":
            raise ValueError(f"only tanh RNNs have a scratch twin, got {rnn.nonlinearity!r}")
        if self.cell == "gru" and not self.reset_after:
            raise ValueError("nn.GRU resets after the hidden matmul: build with reset_after=True")
        mine = (self.input_size, self.hidden_size, self.num_layers, self.bidirectional)
        theirs = (rnn.input_size, rnn.hidden_size, rnn.num_layers, rnn.bidirectional)
        if mine != theirs or not rnn.bias or rnn.batch_first or getattr(rnn, "proj_size", 0):
            message = _(
                "shapes differ: (input_size, hidden_size, num_layers, bidirectional) = "
                "{mine} here, {theirs} in the torch module (which also needs "
                "bias=True, batch_first=False, proj_size=0)"
            )
            raise ValueError(message.format(mine=mine, theirs=theirs))
        K, n = self.num_directions, self.hidden_size
        for layer in range(self.num_layers):
            for d in range(K):
                sfx = f"_l{layer}" + ("_reverse" if d else "")
                W_ih, W_hh = getattr(rnn, "weight_ih" + sfx), getattr(rnn, "weight_hh" + sfx)
                b_ih, b_hh = getattr(rnn, "bias_ih" + sfx), getattr(rnn, "bias_hh" + sfx)
                target = self.layers[layer * K + d]
                for k, g in enumerate(_TORCH_GATE_ORDER[self.cell]):
                    rows = slice(k * n, (k + 1) * n)
                    getattr(target, f"W_x{g}").copy_(W_ih[rows].T)
                    getattr(target, f"W_h{g}").copy_(W_hh[rows].T)
                    if self.cell == "gru" and g == "h":
                        target.b_h.copy_(b_ih[rows])
                        target.b_hh.copy_(b_hh[rows])
                    else:
                        getattr(target, f"b_{g}").copy_(b_ih[rows] + b_hh[rows])
        return self


def make_rnn(
    cell: str,
    input_size: int,
    num_hiddens: int,
    num_layers: int = 1,
    bidirectional: bool = False,
    scratch: bool = False,
    dropout: float = 0.0,
    reset_after: bool = False,
) -> nn.Module:
    """A scratch or torch.nn recurrent layer stack with nn.RNN's interface."""
    cell = _check_cell(cell)
    positive_int("input_size", input_size)
    positive_int("num_hiddens", num_hiddens)
    positive_int("num_layers", num_layers)
    if scratch:
        return ScratchRNN(
            cell, input_size, num_hiddens, num_layers, bidirectional, dropout, reset_after
        )
    if reset_after:
        raise ValueError(_("reset_after is only for the scratch GRU (nn.GRU always resets after)"))
    return _TORCH_CLASSES[cell](
        input_size, num_hiddens, num_layers, dropout=dropout, bidirectional=bidirectional
    )


class RNNLM(nn.Module):
    """Character/word language model: one-hot inputs -> recurrent stack -> Linear to V.

    ``forward(inputs (B, T) int, state)`` -> ``(logits (T*B, V), state)``, time-major
    rows as the book's ``RNNModel``; attribute names ``rnn`` and ``linear`` keep its
    ``state_dict`` keys.
    """

    def __init__(self, rnn_layer: nn.Module, vocab_size: int) -> None:
        super().__init__()
        self.vocab_size = positive_int("vocab_size", vocab_size)
        for attr in ("hidden_size", "num_layers", "bidirectional", "mode", "input_size"):
            if not hasattr(rnn_layer, attr):
                message = _(
                    "rnn_layer must be nn.RNN/nn.GRU/nn.LSTM or ScratchRNN, got {type} "
                    "(missing {attr!r})"
                )
                raise TypeError(message.format(type=type(rnn_layer).__name__, attr=attr))
        if rnn_layer.input_size != vocab_size:
            message = _(
                "rnn_layer.input_size={input_size} must equal vocab_size={vocab_size} "
                "(inputs are one-hot)"
            )
            raise ValueError(message.format(input_size=rnn_layer.input_size, vocab_size=vocab_size))
        if getattr(rnn_layer, "batch_first", False):
            raise ValueError(_("rnn_layer must be time-major (batch_first=False)"))
        self.rnn = rnn_layer
        self.num_hiddens = rnn_layer.hidden_size
        self.num_directions = 2 if rnn_layer.bidirectional else 1
        self.linear = nn.Linear(self.num_hiddens * self.num_directions, vocab_size)

    @property
    def is_lstm(self) -> bool:
        return self.rnn.mode == "LSTM"

    def forward(self, inputs: Tensor, state: State | None = None) -> tuple[Tensor, State]:
        # inputs: (B, T) token indices
        if not isinstance(inputs, Tensor) or inputs.dim() != 2:
            shape = tuple(inputs.shape) if isinstance(inputs, Tensor) else type(inputs).__name__
            message = _("inputs must be a (batch, steps) index tensor, got {shape}")
            raise ValueError(message.format(shape=shape))
        if inputs.is_floating_point() or inputs.dtype == torch.bool:
            message = _("inputs must hold integer token indices, got dtype {dtype}")
            raise TypeError(message.format(dtype=inputs.dtype))
        if inputs.numel() and (int(inputs.min()) < 0 or int(inputs.max()) >= self.vocab_size):
            message = _("token indices must be in [0, vocab_size={vocab_size}), got [{lo}, {hi}]")
            raise ValueError(
                message.format(
                    vocab_size=self.vocab_size, lo=int(inputs.min()), hi=int(inputs.max())
                )
            )
        X = F.one_hot(inputs.T.long(), self.vocab_size).to(self.linear.weight.dtype)  # (T, B, V)
        Y, state = self.rnn(X, state)  # (T, B, K*H)
        return self.linear(Y.reshape(-1, Y.shape[-1])), state  # (T*B, V)

    def begin_state(self, device: torch.device | str | None = None, batch_size: int = 1) -> State:
        """Zero state (L*K, B, H); a pair for the LSTM. Keyword-compatible with the book."""
        if device is None:
            device = self.linear.weight.device
        shape = (self.num_directions * self.rnn.num_layers, batch_size, self.num_hiddens)
        zeros = torch.zeros(shape, device=device, dtype=self.linear.weight.dtype)
        return (zeros, zeros.clone()) if self.is_lstm else zeros


def build_lm(
    cell: str,
    vocab_size: int,
    num_hiddens: int = 256,
    num_layers: int = 1,
    bidirectional: bool = False,
    scratch: bool = False,
    dropout: float = 0.0,
    reset_after: bool = False,
) -> RNNLM:
    """``RNNLM`` over a scratch or torch.nn ``cell`` ('rnn', 'gru', 'lstm')."""
    positive_int("vocab_size", vocab_size)
    rnn = make_rnn(
        cell, vocab_size, num_hiddens, num_layers, bidirectional, scratch, dropout, reset_after
    )
    return RNNLM(rnn, vocab_size)
