"""``attnkit.d2l`` chapter 8: the book's names, signatures and printed values.

Tests on the real Time Machine skip unless ``$ATTNKIT_TIMEMACHINE`` or
``../shared/data/timemachine/timemachine.txt`` (relative to the repo root) exists.
"""

from __future__ import annotations

import math
import os
import random
import re
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from attnkit import d2l
from attnkit.data.lm import LMDataLoader, load_corpus

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def time_machine(monkeypatch) -> Path:
    env = os.environ.get("ATTNKIT_TIMEMACHINE")
    path = Path(env) if env else REPO.parent / "shared" / "data" / "timemachine" / "timemachine.txt"
    if not path.is_file():
        pytest.skip(f"The Time Machine is not available at {path}; set ATTNKIT_TIMEMACHINE")
    monkeypatch.setenv("ATTNKIT_TIMEMACHINE", str(path))
    return path


def test_books_printed_values_on_the_time_machine(time_machine):
    lines = d2l.read_time_machine()
    assert len(lines) == 3221
    assert lines[0] == "the time machine by h g wells"
    tokens = d2l.tokenize(lines)
    vocab = d2l.Vocab(tokens)
    assert list(vocab.token_to_idx.items())[:5] == [
        ("<unk>", 0),
        ("the", 1),
        ("i", 2),
        ("and", 3),
        ("of", 4),
    ]
    assert vocab[tokens[0]] == [1, 19, 50, 40, 2183, 2184, 400]
    corpus, char_vocab = d2l.load_corpus_time_machine()
    assert (len(corpus), len(char_vocab)) == (170580, 28)
    assert char_vocab.idx_to_token[:5] == ["<unk>", " ", "e", "t", "a"]


def test_load_data_time_machine(time_machine):
    random.seed(0)
    train_iter, vocab = d2l.load_data_time_machine(32, 35)
    assert len(vocab) == 28 and len(train_iter.corpus) == 10000
    batches = list(train_iter)
    assert len(batches) == 8  # (10000 - offset - 1) // 32 // 35
    X, Y = batches[0]
    assert X.shape == (32, 35) and torch.equal(X[:, 1:], Y[:, :-1])
    corpus = train_iter.corpus
    offsets = [o for o in range(36) if torch.equal(corpus[o : o + 35], X[0])]
    assert offsets, "row 0 of the first minibatch starts at the random offset in [0, 35]"
    assert "".join(vocab.to_tokens(corpus[:29].tolist())) == "the time machine by h g wells"


def test_seq_data_iter_random_follows_global_seed_like_the_book():
    corpus = list(range(35))
    random.seed(3)
    a = [X.tolist() for X, _ in d2l.seq_data_iter_random(corpus, 2, 5)]
    random.seed(3)
    b = [X.tolist() for X, _ in d2l.seq_data_iter_random(corpus, 2, 5)]
    assert a == b and len(a) == 3  # 6 subsequences of 5 after the offset, 2 per batch


# ---- the book's chapter code for a scratch RNN, verbatim in spirit (sec_rnn_scratch) ----
def get_params(vocab_size, num_hiddens, device):
    num_inputs = num_outputs = vocab_size

    def normal(shape):
        return torch.randn(size=shape, device=device) * 0.01

    W_xh = normal((num_inputs, num_hiddens))
    W_hh = normal((num_hiddens, num_hiddens))
    b_h = torch.zeros(num_hiddens, device=device)
    W_hq = normal((num_hiddens, num_outputs))
    b_q = torch.zeros(num_outputs, device=device)
    params = [W_xh, W_hh, b_h, W_hq, b_q]
    for param in params:
        param.requires_grad_(True)
    return params


def init_rnn_state(batch_size, num_hiddens, device):
    return (torch.zeros((batch_size, num_hiddens), device=device),)


def rnn(inputs, state, params):
    W_xh, W_hh, b_h, W_hq, b_q = params
    (H,) = state
    outputs = []
    for X in inputs:
        H = torch.tanh(torch.mm(X, W_xh) + torch.mm(H, W_hh) + b_h)
        outputs.append(torch.mm(H, W_hq) + b_q)
    return torch.cat(outputs, dim=0), (H,)


TEXT = ["the time traveller for so it will be convenient to speak of him"] * 10


def test_train_ch8_with_the_books_scratch_rnn(capsys):
    torch.manual_seed(0)
    corpus, vocab = load_corpus(TEXT)
    net = d2l.RNNModelScratch(len(vocab), 64, "cpu", get_params, init_rnn_state, rnn)
    Y, state = net(torch.tensor([[1, 2, 3]]), net.begin_state(1, "cpu"))
    assert Y.shape == (3, len(vocab)) and state[0].shape == (1, 64)
    train_iter = LMDataLoader(corpus, 8, 10, seed=0)
    assert d2l.train_ch8(net, train_iter, vocab, lr=1, num_epochs=15, device="cpu") is None
    out = capsys.readouterr().out.splitlines()
    assert re.fullmatch(r"perplexity \d+\.\d, \d+\.\d tokens/sec on cpu", out[0])
    assert out[1].startswith("time traveller") and len(out[1]) == 14 + 50
    assert out[2].startswith("traveller") and len(out[2]) == 9 + 50
    assert float(out[0].split()[1].rstrip(",")) < len(vocab) / 2  # it learned (uniform: |V|)


def test_concise_rnn_model_keys_and_state_like_the_book():
    vocab_size, num_hiddens = 28, 16
    net = d2l.RNNModel(nn.LSTM(vocab_size, num_hiddens, 2, bidirectional=True), vocab_size)
    assert list(net.state_dict())[:4] == [
        "rnn.weight_ih_l0",
        "rnn.weight_hh_l0",
        "rnn.bias_ih_l0",
        "rnn.bias_hh_l0",
    ]
    assert net.state_dict()["linear.weight"].shape == (vocab_size, 2 * num_hiddens)
    H, C = net.begin_state(device="cpu", batch_size=3)
    assert H.shape == C.shape == (4, 3, num_hiddens) and float(H.abs().sum()) == 0
    X = torch.randint(0, vocab_size, (3, 5))
    logits, _ = net(X, (H, C))
    # the book's forward: one-hot of X.T, rnn, linear on the flattened outputs
    Yb, _ = net.rnn(F.one_hot(X.T.long(), vocab_size).float(), (H, C))
    torch.testing.assert_close(logits, net.linear(Yb.reshape(-1, Yb.shape[-1])))


def test_train_epoch_ch8_grad_clipping_and_predict_ch8():
    torch.manual_seed(0)
    corpus, vocab = load_corpus(TEXT)
    net = d2l.RNNModel(nn.GRU(len(vocab), 32), len(vocab))
    updater = torch.optim.SGD(net.parameters(), 1.0)
    loss = nn.CrossEntropyLoss()
    ppl, speed = d2l.train_epoch_ch8(
        net, LMDataLoader(corpus, 4, 10, seed=0), loss, updater, "cpu", False
    )
    assert 1 < ppl < 2 * len(vocab) and speed > 0
    for p in net.parameters():
        p.grad = torch.ones_like(p)
    total = math.sqrt(sum(p.numel() for p in net.parameters()))
    assert d2l.grad_clipping(net, 1) == pytest.approx(total, rel=1e-5)
    norm = torch.cat([p.grad.reshape(-1) for p in net.parameters()]).norm()
    assert float(norm) == pytest.approx(1.0, rel=1e-5)
    text = d2l.predict_ch8("time traveller", 10, net, vocab, "cpu")
    assert text.startswith("time traveller") and len(text) == 24
    with pytest.raises(ValueError, match="outside the vocabulary"):
        d2l.predict_ch8("Time", 10, net, vocab, "cpu")


def test_chapter_8_names_exist_with_the_books_signatures():
    import inspect

    expected = {
        "read_time_machine": [],
        "tokenize": ["lines", "token"],
        "load_corpus_time_machine": ["max_tokens"],
        "seq_data_iter_random": ["corpus", "batch_size", "num_steps"],
        "seq_data_iter_sequential": ["corpus", "batch_size", "num_steps"],
        "load_data_time_machine": ["batch_size", "num_steps", "use_random_iter", "max_tokens"],
        "predict_ch8": ["prefix", "num_preds", "net", "vocab", "device"],
        "grad_clipping": ["net", "theta"],
        "train_epoch_ch8": ["net", "train_iter", "loss", "updater", "device", "use_random_iter"],
        "train_ch8": [
            "net",
            "train_iter",
            "vocab",
            "lr",
            "num_epochs",
            "device",
            "use_random_iter",
        ],
    }
    for name, params in expected.items():
        got = list(inspect.signature(getattr(d2l, name)).parameters)
        assert got[: len(params)] == params, name
    init = list(inspect.signature(d2l.SeqDataLoader.__init__).parameters)
    assert init == ["self", "batch_size", "num_steps", "use_random_iter", "max_tokens"]
    init = list(inspect.signature(d2l.RNNModelScratch.__init__).parameters)
    assert init[1:] == [
        "vocab_size",
        "num_hiddens",
        "device",
        "get_params",
        "init_state",
        "forward_fn",
    ]
