"""Scratch RNN/GRU/LSTM against torch.nn and against the book's equations written naively."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from attnkit.models.rnn import RNNLM, ScratchRNN, build_lm, make_rnn

TORCH = {"rnn": nn.RNN, "gru": nn.GRU, "lstm": nn.LSTM}


def _random_state(cell, n, B, H):
    if cell == "lstm":
        return (torch.randn(n, B, H), torch.randn(n, B, H))
    return torch.randn(n, B, H)


def _flat(state):
    return torch.cat([s.reshape(-1) for s in state]) if isinstance(state, tuple) else state


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_scratch_equals_torch_nn(cell, layers, bidirectional):
    torch.manual_seed(1)
    D, H, T, B = 5, 7, 6, 3
    ref = TORCH[cell](D, H, layers, bidirectional=bidirectional)
    mine = ScratchRNN(cell, D, H, layers, bidirectional, reset_after=(cell == "gru"))
    mine.load_from_torch(ref)
    X = torch.randn(T, B, D, requires_grad=True)
    K = 2 if bidirectional else 1
    state = _random_state(cell, layers * K, B, H)
    Y_ref, s_ref = ref(X, state)
    Y, s = mine(X, state)
    torch.testing.assert_close(Y, Y_ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(_flat(s), _flat(s_ref), atol=1e-5, rtol=0)
    # gradients w.r.t. the input agree too
    (g_ref,) = torch.autograd.grad(Y_ref.sum(), X)
    (g,) = torch.autograd.grad(Y.sum(), X)
    torch.testing.assert_close(g, g_ref, atol=1e-5, rtol=0)


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_zero_state_default_matches_torch(cell):
    ref = TORCH[cell](4, 6)
    mine = ScratchRNN(cell, 4, 6, reset_after=(cell == "gru")).load_from_torch(ref)
    X = torch.randn(5, 2, 4)
    torch.testing.assert_close(mine(X)[0], ref(X)[0], atol=1e-5, rtol=0)


def _book_gru(X, H, p):
    """The book's ``gru(inputs, state, params)``, step by step."""
    W_xz, W_hz, b_z, W_xr, W_hr, b_r, W_xh, W_hh, b_h = p
    outs = []
    for x in X:
        Z = torch.sigmoid(x @ W_xz + H @ W_hz + b_z)
        R = torch.sigmoid(x @ W_xr + H @ W_hr + b_r)
        H_tilda = torch.tanh(x @ W_xh + (R * H) @ W_hh + b_h)
        H = Z * H + (1 - Z) * H_tilda
        outs.append(H)
    return torch.stack(outs), H


def _book_lstm(X, H, C, p):
    W_xi, W_hi, b_i, W_xf, W_hf, b_f, W_xo, W_ho, b_o, W_xc, W_hc, b_c = p
    outs = []
    for x in X:
        I = torch.sigmoid(x @ W_xi + H @ W_hi + b_i)  # noqa: E741
        F = torch.sigmoid(x @ W_xf + H @ W_hf + b_f)
        O = torch.sigmoid(x @ W_xo + H @ W_ho + b_o)  # noqa: E741
        C_tilda = torch.tanh(x @ W_xc + H @ W_hc + b_c)
        C = F * C + I * C_tilda
        H = O * torch.tanh(C)
        outs.append(H)
    return torch.stack(outs), H, C


def _randomize(module):
    with torch.no_grad():
        for p in module.parameters():
            p.copy_(torch.randn_like(p) * 0.5)


def test_book_gru_equations():
    layer = ScratchRNN("gru", 4, 5)
    _randomize(layer)
    g = layer.layers[0]
    X, H0 = torch.randn(6, 3, 4), torch.randn(3, 5)
    names = ["W_xz", "W_hz", "b_z", "W_xr", "W_hr", "b_r", "W_xh", "W_hh", "b_h"]
    Y_ref, H_ref = _book_gru(X, H0, [getattr(g, n) for n in names])
    Y, H = layer(X, H0.unsqueeze(0))
    torch.testing.assert_close(Y, Y_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(H[0], H_ref, atol=1e-6, rtol=0)
    # and it is a different function from nn.GRU's reset-after form
    after = ScratchRNN("gru", 4, 5, reset_after=True)
    after.load_state_dict({**layer.state_dict(), "layers.0.b_hh": torch.zeros(5)})
    assert (after(X, H0.unsqueeze(0))[0] - Y).abs().max() > 1e-3


def test_book_lstm_equations():
    layer = ScratchRNN("lstm", 4, 5)
    _randomize(layer)
    g = layer.layers[0]
    X, H0, C0 = torch.randn(6, 3, 4), torch.randn(3, 5), torch.randn(3, 5)
    names = [f"{w}{k}" for k in "ifoc" for w in ("W_x", "W_h", "b_")]
    Y_ref, H_ref, C_ref = _book_lstm(X, H0, C0, [getattr(g, n) for n in names])
    Y, (H, C) = layer(X, (H0.unsqueeze(0), C0.unsqueeze(0)))
    torch.testing.assert_close(Y, Y_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(H[0], H_ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(C[0], C_ref, atol=1e-6, rtol=0)


def test_parameter_names_and_book_init():
    torch.manual_seed(0)
    gru = ScratchRNN("gru", 28, 256)
    names = sorted(n.split(".")[-1] for n, _ in gru.named_parameters())
    assert names == sorted(["W_xz", "W_hz", "b_z", "W_xr", "W_hr", "b_r", "W_xh", "W_hh", "b_h"])
    lstm = ScratchRNN("lstm", 28, 256).layers[0]
    assert {n for n, _ in lstm.named_parameters()} == {
        f"{w}{k}" for k in "ifoc" for w in ("W_x", "W_h", "b_")
    }
    for name, p in gru.named_parameters():
        if name.split(".")[-1].startswith("b_"):
            assert torch.count_nonzero(p) == 0
        else:
            assert abs(float(p.detach().std()) - 0.01) < 0.001  # randn * 0.01
            assert abs(float(p.detach().mean())) < 0.001


@pytest.mark.parametrize("scratch", [False, True])
@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_lm_wrapper_state_and_logits(cell, scratch):
    torch.manual_seed(0)
    lm = build_lm(cell, 11, 8, num_layers=2, bidirectional=True, scratch=scratch)
    state = lm.begin_state(batch_size=3)
    zeros = state[0] if cell == "lstm" else state
    assert zeros.shape == (4, 3, 8) and float(zeros.abs().sum()) == 0
    X = torch.tensor([[1, 2, 3, 4], [5, 6, 7, 8], [9, 10, 0, 1]])
    logits, _ = lm(X, state)
    assert logits.shape == (4 * 3, 11)
    # rows are time-major: row t*B + b is the logit at step t of sequence b
    single, _ = lm(X[1:2], lm.begin_state(batch_size=1))
    torch.testing.assert_close(logits.reshape(4, 3, 11)[:, 1], single, atol=1e-5, rtol=0)


def test_torch_and_scratch_lm_share_output_layer_keys():
    a = build_lm("gru", 5, 4)
    assert {"linear.weight", "linear.bias", "rnn.weight_ih_l0"} <= set(a.state_dict())
    b = build_lm("gru", 5, 4, scratch=True)
    assert {"linear.weight", "rnn.layers.0.W_xz"} <= set(b.state_dict())


def test_bad_cells_and_sizes():
    with pytest.raises(ValueError, match="cell must be one of 'rnn', 'gru', 'lstm', got 'tcn'"):
        build_lm("tcn", 10, 8)
    with pytest.raises(TypeError, match=r"cell must be a str \(one of .*\), got NoneType"):
        build_lm(None, 10, 8)
    assert make_rnn("GRU", 10, 8, scratch=True).cell == "gru"  # any case
    with pytest.raises(ValueError, match=r"dropout must be in \[0, 1\), got 1\.0"):
        make_rnn("gru", 10, 8, num_layers=2, dropout=1.0, scratch=True)
    with pytest.raises(TypeError, match=r"dropout must be a float in \[0, 1\), got '0\.1'"):
        make_rnn("gru", 10, 8, num_layers=2, dropout="0.1", scratch=True)
    with pytest.raises(ValueError, match="num_hiddens must be a positive int, got 0"):
        build_lm("gru", 10, 0)
    with pytest.raises(ValueError, match="num_layers must be a positive int, got -1"):
        make_rnn("lstm", 10, 8, num_layers=-1, scratch=True)
    with pytest.raises(TypeError, match=r"vocab_size must be a positive int, got 2\.5"):
        build_lm("rnn", 2.5, 8)
    with pytest.raises(ValueError, match="input_size=10 must equal vocab_size=12"):
        RNNLM(nn.GRU(10, 4), 12)
    with pytest.raises(ValueError, match="reset_after=True"):
        ScratchRNN("gru", 3, 4).load_from_torch(nn.GRU(3, 4))
    with pytest.raises(ValueError, match=r"shapes differ"):
        ScratchRNN("rnn", 3, 4).load_from_torch(nn.RNN(3, 5))


def test_bad_inputs_to_lm():
    lm = build_lm("gru", 6, 4)
    with pytest.raises(
        ValueError, match=r"token indices must be in \[0, vocab_size=6\), got \[0, 9\]"
    ):
        lm(torch.tensor([[0, 9]]))
    with pytest.raises(TypeError, match=r"integer token indices, got dtype torch\.float32"):
        lm(torch.zeros(1, 2))
    with pytest.raises(ValueError, match=r"\(batch, steps\) index tensor, got \(4,\)"):
        lm(torch.zeros(4, dtype=torch.long))


@settings(max_examples=25, deadline=None)
@given(
    cell=st.sampled_from(["rnn", "gru", "lstm"]),
    T=st.integers(1, 6),
    B=st.integers(1, 4),
    D=st.integers(1, 6),
    H=st.integers(1, 6),
    layers=st.integers(1, 2),
    bidirectional=st.booleans(),
    seed=st.integers(0, 1000),
)
def test_scratch_equals_torch_nn_any_shape(cell, T, B, D, H, layers, bidirectional, seed):
    torch.manual_seed(seed)
    ref = TORCH[cell](D, H, layers, bidirectional=bidirectional)
    mine = ScratchRNN(cell, D, H, layers, bidirectional, reset_after=(cell == "gru"))
    mine.load_from_torch(ref)
    X = torch.randn(T, B, D)
    with torch.no_grad():
        Y_ref, s_ref = ref(X)
        Y, s = mine(X)
    torch.testing.assert_close(Y, Y_ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(_flat(s), _flat(s_ref), atol=1e-5, rtol=0)
