"""Recurrent networks of d2l 1.0 (chapters 9-10), with the book's parameter names.

Shapes: inputs are time-major, ``(num_steps, batch_size, num_inputs)``; scratch cells
return a list of ``num_steps`` states ``(batch_size, num_hiddens)`` and the last state.
``RNN``/``GRU``/``LSTM``/``BiGRU`` wrap ``torch.nn`` (``state_dict`` keys ``rnn.*``).
The notebook classes ``GRUScratch``, ``LSTMScratch``, ``LSTM``, ``StackedRNNScratch``,
``BiRNNScratch`` and ``BiGRU`` are here as conveniences.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from attnkit._validate import non_negative_int, non_negative_number, positive_int, probability
from attnkit.d2l.v1.base import Classifier, Module
from attnkit.i18n import _

__all__ = [
    "GRU", "LSTM", "RNN", "RNNLM", "BiGRU", "BiRNNScratch", "GRUScratch", "LSTMScratch",
    "RNNLMScratch", "RNNScratch", "StackedRNNScratch", "check_len", "check_shape",
]  # fmt: skip


def check_len(a, n):
    """Raise AssertionError (as the book) unless ``len(a) == n``."""
    assert len(a) == n, f"list's length {len(a)} != expected length {n}"


def check_shape(a, shape):
    """Raise AssertionError (as the book) unless ``a.shape == shape``."""
    assert a.shape == shape, f"tensor's shape {a.shape} != expected shape {shape}"


def _check_inputs(name: str, inputs, num_inputs: int) -> None:
    if not isinstance(inputs, torch.Tensor) or not inputs.is_floating_point():
        message = _("{name}: inputs must be a float tensor, got {type}")
        raise TypeError(message.format(name=name, type=type(inputs).__name__))
    if inputs.dim() != 3 or inputs.shape[-1] != num_inputs:
        message = _(
            "{name}: inputs must be (num_steps, batch_size, num_inputs={num_inputs}), got {shape}"
        )
        raise ValueError(
            message.format(name=name, num_inputs=num_inputs, shape=tuple(inputs.shape))
        )


def _weights(num_inputs, num_hiddens, sigma):
    return (
        nn.Parameter(torch.randn(num_inputs, num_hiddens) * sigma),
        nn.Parameter(torch.randn(num_hiddens, num_hiddens) * sigma),
        nn.Parameter(torch.zeros(num_hiddens)),
    )


class _Scratch(Module):
    def __init__(self, num_inputs, num_hiddens, sigma=0.01):
        super().__init__()
        positive_int("num_inputs", num_inputs)
        positive_int("num_hiddens", num_hiddens)
        non_negative_number("sigma", sigma)
        self.num_inputs, self.num_hiddens, self.sigma = num_inputs, num_hiddens, sigma
        self.hparams = {"num_inputs": num_inputs, "num_hiddens": num_hiddens, "sigma": sigma}

    def _zeros(self, inputs):
        return torch.zeros((inputs.shape[1], self.num_hiddens), device=inputs.device)


class RNNScratch(_Scratch):
    """``H_t = tanh(X_t W_xh + H_{t-1} W_hh + b_h)``."""

    def __init__(self, num_inputs, num_hiddens, sigma=0.01):
        super().__init__(num_inputs, num_hiddens, sigma)
        self.W_xh, self.W_hh, self.b_h = _weights(num_inputs, num_hiddens, sigma)

    def forward(self, inputs, state=None):
        """inputs (T, B, num_inputs); state None, (B, H) or the book's 1-tuple ``(H,)``."""
        _check_inputs("RNNScratch", inputs, self.num_inputs)
        if state is None:
            state = self._zeros(inputs)
        elif isinstance(state, tuple | list):
            (state,) = state
        outputs = []
        for X in inputs:
            state = torch.tanh(X @ self.W_xh + state @ self.W_hh + self.b_h)
            outputs.append(state)
        return outputs, state


class GRUScratch(_Scratch):
    """The gated recurrent unit from its equations (update ``z``, reset ``r``, candidate ``h``)."""

    def __init__(self, num_inputs, num_hiddens, sigma=0.01):
        super().__init__(num_inputs, num_hiddens, sigma)
        self.W_xz, self.W_hz, self.b_z = _weights(num_inputs, num_hiddens, sigma)
        self.W_xr, self.W_hr, self.b_r = _weights(num_inputs, num_hiddens, sigma)
        self.W_xh, self.W_hh, self.b_h = _weights(num_inputs, num_hiddens, sigma)

    def forward(self, inputs, H=None):
        _check_inputs("GRUScratch", inputs, self.num_inputs)
        H = self._zeros(inputs) if H is None else H
        outputs = []
        for X in inputs:
            Z = torch.sigmoid(X @ self.W_xz + H @ self.W_hz + self.b_z)
            R = torch.sigmoid(X @ self.W_xr + H @ self.W_hr + self.b_r)
            H_tilde = torch.tanh(X @ self.W_xh + (R * H) @ self.W_hh + self.b_h)
            H = Z * H + (1 - Z) * H_tilde
            outputs.append(H)
        return outputs, H


class LSTMScratch(_Scratch):
    """The LSTM from its equations; the state is ``(H, C)``."""

    def __init__(self, num_inputs, num_hiddens, sigma=0.01):
        super().__init__(num_inputs, num_hiddens, sigma)
        self.W_xi, self.W_hi, self.b_i = _weights(num_inputs, num_hiddens, sigma)
        self.W_xf, self.W_hf, self.b_f = _weights(num_inputs, num_hiddens, sigma)
        self.W_xo, self.W_ho, self.b_o = _weights(num_inputs, num_hiddens, sigma)
        self.W_xc, self.W_hc, self.b_c = _weights(num_inputs, num_hiddens, sigma)

    def forward(self, inputs, H_C=None):
        _check_inputs("LSTMScratch", inputs, self.num_inputs)
        if H_C is None:
            H, C = self._zeros(inputs), self._zeros(inputs)
        else:
            H, C = H_C
        outputs = []
        for X in inputs:
            I = torch.sigmoid(X @ self.W_xi + H @ self.W_hi + self.b_i)  # noqa: E741
            Fg = torch.sigmoid(X @ self.W_xf + H @ self.W_hf + self.b_f)
            O = torch.sigmoid(X @ self.W_xo + H @ self.W_ho + self.b_o)  # noqa: E741
            C_tilde = torch.tanh(X @ self.W_xc + H @ self.W_hc + self.b_c)
            C = Fg * C + I * C_tilde
            H = O * torch.tanh(C)
            outputs.append(H)
        return outputs, (H, C)


class StackedRNNScratch(Module):
    """``num_layers`` ``RNNScratch`` layers (``rnns.0``, ``rnns.1``, ...)."""

    def __init__(self, num_inputs, num_hiddens, num_layers, sigma=0.01):
        super().__init__()
        positive_int("num_layers", num_layers)
        self.save_hyperparameters()
        self.rnns = nn.Sequential(*[
            RNNScratch(num_inputs if i == 0 else num_hiddens, num_hiddens, sigma)
            for i in range(num_layers)
        ])  # fmt: skip

    def forward(self, inputs, Hs=None):
        outputs = inputs
        Hs = [None] * self.num_layers if Hs is None else list(Hs)
        for i in range(self.num_layers):
            outputs, Hs[i] = self.rnns[i](outputs, Hs[i])
            outputs = torch.stack(outputs, 0)
        return outputs, Hs


class BiRNNScratch(Module):
    """A forward and a backward ``RNNScratch``; outputs concatenate both (width 2H)."""

    def __init__(self, num_inputs, num_hiddens, sigma=0.01):
        super().__init__()
        self.save_hyperparameters()
        self.f_rnn = RNNScratch(num_inputs, num_hiddens, sigma)
        self.b_rnn = RNNScratch(num_inputs, num_hiddens, sigma)
        self.num_hiddens *= 2

    def forward(self, inputs, Hs=None):
        f_H, b_H = Hs if Hs is not None else (None, None)
        f_outputs, f_H = self.f_rnn(inputs, f_H)
        b_outputs, b_H = self.b_rnn(torch.flip(inputs, [0]), b_H)
        outputs = [torch.cat((f, b), -1) for f, b in zip(f_outputs, reversed(b_outputs))]
        return outputs, (f_H, b_H)


class RNNLMScratch(Classifier):
    """A character language model over ``rnn``: one-hot inputs, ``W_hq``/``b_q`` output.

    ``forward(X (B, T) ids, state=None) -> (B, T, vocab_size)`` logits.
    """

    def __init__(self, rnn, vocab_size, lr=0.01):
        super().__init__()
        if not isinstance(rnn, nn.Module):
            raise TypeError(
                _("rnn must be an nn.Module, got {type}").format(type=type(rnn).__name__)
            )
        positive_int("vocab_size", vocab_size)
        self.save_hyperparameters()
        self.init_params()

    def init_params(self):
        self.W_hq = nn.Parameter(
            torch.randn(self.rnn.num_hiddens, self.vocab_size) * self.rnn.sigma
        )
        self.b_q = nn.Parameter(torch.zeros(self.vocab_size))

    def training_step(self, batch):
        loss = self.loss(self(*batch[:-1]), batch[-1])
        self.plot("ppl", torch.exp(loss.detach()), train=True)
        return loss

    def validation_step(self, batch):
        loss = self.loss(self(*batch[:-1]), batch[-1])
        self.plot("ppl", torch.exp(loss), train=False)

    def one_hot(self, X):
        """X (B, T) ids -> (T, B, vocab_size) float32."""
        if X.dim() != 2:
            message = _("X must be (batch_size, num_steps) token ids, got {shape}")
            raise ValueError(message.format(shape=tuple(X.shape)))
        return F.one_hot(X.T.long(), self.vocab_size).type(torch.float32)

    def output_layer(self, rnn_outputs):
        outputs = [H @ self.W_hq + self.b_q for H in rnn_outputs]
        return torch.stack(outputs, 1)

    def forward(self, X, state=None):
        embs = self.one_hot(X)
        rnn_outputs, _ = self.rnn(embs, state)
        return self.output_layer(rnn_outputs)

    def predict(self, prefix, num_preds, vocab, device=None):
        """``prefix`` (str, >= 1 char), then ``num_preds`` greedy characters."""
        if not isinstance(prefix, str):
            message = _("prefix must be a non-empty str, got {value!r} ({type})")
            raise TypeError(message.format(value=prefix, type=type(prefix).__name__))
        if not prefix:
            message = _("prefix must be a non-empty str, got {value!r}")
            raise ValueError(message.format(value=prefix))
        non_negative_int("num_preds", num_preds)
        state, outputs = None, [vocab[prefix[0]]]
        for i in range(len(prefix) + num_preds - 1):
            X = torch.tensor([[outputs[-1]]], device=device)
            rnn_outputs, state = self.rnn(self.one_hot(X), state)
            if i < len(prefix) - 1:  # warm-up
                outputs.append(vocab[prefix[i + 1]])
            else:
                Y = self.output_layer(rnn_outputs)
                outputs.append(int(Y.argmax(dim=2).reshape(1)))
        return "".join([vocab.idx_to_token[i] for i in outputs])


class RNN(Module):
    """``nn.RNN(num_inputs, num_hiddens)``; ``forward(inputs (T, B, D), H=None)``."""

    def __init__(self, num_inputs, num_hiddens):
        super().__init__()
        positive_int("num_inputs", num_inputs)
        positive_int("num_hiddens", num_hiddens)
        self.save_hyperparameters()
        self.rnn = nn.RNN(num_inputs, num_hiddens)

    def forward(self, inputs, H=None):
        return self.rnn(inputs, H)


class RNNLM(RNNLMScratch):
    """``RNNLMScratch`` with a lazy ``linear`` output layer (keys ``linear.*``)."""

    def init_params(self):
        self.linear = nn.LazyLinear(self.vocab_size)

    def output_layer(self, hiddens):
        return self.linear(hiddens).swapaxes(0, 1)


class GRU(RNN):
    """``nn.GRU(num_inputs, num_hiddens, num_layers, dropout=dropout)`` (keys ``rnn.*``)."""

    def __init__(self, num_inputs, num_hiddens, num_layers, dropout=0):
        Module.__init__(self)
        positive_int("num_inputs", num_inputs)
        positive_int("num_hiddens", num_hiddens)
        positive_int("num_layers", num_layers)
        probability("dropout", dropout)
        self.save_hyperparameters()
        self.rnn = nn.GRU(num_inputs, num_hiddens, num_layers, dropout=dropout)


class LSTM(RNN):
    """``nn.LSTM(num_inputs, num_hiddens)``; ``forward(inputs, H_C=None)``."""

    def __init__(self, num_inputs, num_hiddens):
        Module.__init__(self)
        positive_int("num_inputs", num_inputs)
        positive_int("num_hiddens", num_hiddens)
        self.save_hyperparameters()
        self.rnn = nn.LSTM(num_inputs, num_hiddens)

    def forward(self, inputs, H_C=None):
        return self.rnn(inputs, H_C)


class BiGRU(RNN):
    """A bidirectional ``nn.GRU``; ``num_hiddens`` doubles (the output width)."""

    def __init__(self, num_inputs, num_hiddens):
        Module.__init__(self)
        positive_int("num_inputs", num_inputs)
        positive_int("num_hiddens", num_hiddens)
        self.save_hyperparameters()
        self.rnn = nn.GRU(num_inputs, num_hiddens, bidirectional=True)
        self.num_hiddens *= 2
