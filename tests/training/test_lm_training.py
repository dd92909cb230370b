"""Training loop, perplexity, clipping, generation, checkpoints and the ``attnkit lm`` CLI."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch
from torch import nn

import attnkit.cli
from attnkit.cli import main
from attnkit.data.lm import LMDataLoader, load_corpus
from attnkit.inference.generation import generate
from attnkit.inference.loading import load_lm_checkpoint
from attnkit.metrics import perplexity
from attnkit.models.rnn import build_lm
from attnkit.training.lm import save_lm_checkpoint, train_epoch, train_lm
from attnkit.training.optim import clip_gradients, make_optimizer

TEXT = ["the time traveller for so it will be convenient to speak of him"] * 8


@pytest.fixture(autouse=True)
def _only_the_lm_verb(monkeypatch):
    # the CLI tests exercise `attnkit lm` through the real main(), independent of other verbs
    monkeypatch.setattr(attnkit.cli, "VERBS", ["lm"])


@pytest.fixture(scope="module")
def data():
    corpus, vocab = load_corpus(TEXT)
    return corpus, vocab


class UniformLM(nn.Module):
    """Predicts the same logits for every token: perplexity must be the vocabulary size."""

    def __init__(self, V: int) -> None:
        super().__init__()
        self.V = V
        self.w = nn.Parameter(torch.zeros(()))

    def forward(self, X, state):
        return torch.zeros(X.numel(), self.V) + 0 * self.w, state

    def begin_state(self, batch_size, device):
        return torch.zeros(1)


def test_perplexity_of_uniform_predictor_is_vocab_size(data):
    corpus, vocab = data
    model = UniformLM(len(vocab))
    loader = LMDataLoader(corpus, 4, 7, seed=0)
    stats = train_epoch(model, loader, make_optimizer(model, "sgd", 0.1))
    assert stats.perplexity == pytest.approx(len(vocab), rel=1e-5)
    assert stats.num_tokens == sum(X.numel() for X, _ in LMDataLoader(corpus, 4, 7, seed=0))
    assert perplexity(10 * math.log(5), 10) == pytest.approx(5.0)
    with pytest.raises(ValueError, match="num_tokens must be positive, got 0"):
        perplexity(1.0, 0)


def test_clipping_bounds_the_global_norm():
    a, b = nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(4))
    a.grad, b.grad = torch.full((3,), 3.0), torch.full((4,), 4.0)  # norm sqrt(27 + 64)
    before = clip_gradients([a, b], 1.0)
    assert before == pytest.approx(math.sqrt(91), rel=1e-6)
    after = torch.cat([a.grad, b.grad]).norm()
    assert float(after) == pytest.approx(1.0, rel=1e-5)
    torch.testing.assert_close(a.grad / b.grad[:3], torch.full((3,), 0.75))  # direction kept
    a.grad = torch.full((3,), 0.1)
    b.grad = torch.zeros(4)
    clip_gradients([a, b], 1.0)
    torch.testing.assert_close(a.grad, torch.full((3,), 0.1))  # small gradients untouched
    with pytest.raises(ValueError, match="max_norm must be a positive finite number, got 0"):
        clip_gradients([a], 0)


@pytest.mark.parametrize("scratch", [False, True])
def test_short_training_lowers_perplexity(data, scratch):
    torch.manual_seed(0)
    corpus, vocab = data
    model = build_lm("gru", len(vocab), 32, scratch=scratch)
    loader = LMDataLoader(corpus, 8, 10, seed=0)
    hist = train_lm(model, loader, num_epochs=12, lr=0.02, optimizer="adam", progress=False)
    assert hist.perplexity[0] > 8
    assert hist.perplexity[-1] < hist.perplexity[0] / 3
    assert len(hist.tokens_per_sec) == 12 and min(hist.tokens_per_sec) > 0


class Recorder(nn.Module):
    """Wraps an LM and records each incoming state."""

    def __init__(self, inner):
        super().__init__()
        self.inner, self.seen = inner, []

    def forward(self, X, state):
        self.seen.append((state.clone(), state.grad_fn is None))
        return self.inner(X, state)

    def begin_state(self, batch_size, device):
        return self.inner.begin_state(device=device, batch_size=batch_size)


@pytest.mark.parametrize("use_random_iter", [False, True])
def test_truncated_bptt_state_handling(data, use_random_iter):
    corpus, vocab = data
    model = Recorder(build_lm("rnn", len(vocab), 8))
    loader = LMDataLoader(corpus, 4, 6, use_random_iter=use_random_iter, seed=1)
    train_epoch(model, loader, make_optimizer(model, "sgd", 0.5), use_random_iter=use_random_iter)
    assert len(model.seen) > 2
    assert all(detached for _, detached in model.seen)  # never backprop into older batches
    norms = [float(s.abs().sum()) for s, _ in model.seen]
    assert norms[0] == 0
    if use_random_iter:
        assert all(n == 0 for n in norms)  # re-initialized every minibatch
    else:
        assert all(n > 0 for n in norms[1:])  # carried over


def _book_predict(prefix, num_preds, net, vocab):
    state = net.begin_state(batch_size=1, device="cpu")
    outputs = [vocab[prefix[0]]]
    for y in prefix[1:]:
        _, state = net(torch.tensor([[outputs[-1]]]), state)
        outputs.append(vocab[y])
    for _ in range(num_preds):
        y, state = net(torch.tensor([[outputs[-1]]]), state)
        outputs.append(int(y.argmax(dim=1).reshape(1)))
    return "".join(vocab.idx_to_token[i] for i in outputs)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_generation_greedy_and_sampled(data, cell):
    torch.manual_seed(0)
    _, vocab = data
    model = build_lm(cell, len(vocab), 16, num_layers=2, bidirectional=(cell == "lstm"))
    greedy = generate(model, "time traveller", vocab=vocab, max_new_tokens=20)
    with torch.no_grad():
        assert greedy == _book_predict("time traveller", 20, model, vocab)
    sampled = {"vocab": vocab, "max_new_tokens": 30, "temperature": 1.0}
    s1 = generate(model, "time", generator=torch.Generator().manual_seed(5), **sampled)
    s2 = generate(model, "time", seed=5, **sampled)
    assert s1 == s2 and s1.startswith("time")
    assert (
        len(s1.replace("<unk>", "?")) == 34
    )  # 30 sampled tokens (an untrained model may pick <unk>)
    assert set(s1.replace("<unk>", "")) <= set(vocab.idx_to_token)
    cold = {"temperature": 1e-4, "generator": torch.Generator()}
    hot = generate(model, "time", vocab=vocab, max_new_tokens=30, **cold)
    assert hot == generate(model, "time", vocab=vocab, max_new_tokens=30)  # tiny T -> greedy


def test_generation_bad_input(data):
    _, vocab = data
    model = build_lm("gru", len(vocab), 8)
    with pytest.raises(
        ValueError, match=r"prompt 'Time!' has tokens outside the vocabulary: \['!', 'T'\]"
    ):
        generate(model, "Time!", vocab=vocab, max_new_tokens=5)
    assert generate(model, "Time!", vocab=vocab, max_new_tokens=0, unknown="unk") == "Time!"
    with pytest.raises(ValueError, match="prompt must contain at least one char token, got ''"):
        generate(model, "", vocab=vocab, max_new_tokens=5)
    with pytest.raises(ValueError, match=r"temperature must be >= 0 \(0 = greedy\), got -1"):
        generate(model, "time", vocab=vocab, max_new_tokens=5, temperature=-1)
    with pytest.raises(ValueError, match="max_new_tokens must be a non-negative int, got -2"):
        generate(model, "time", vocab=vocab, max_new_tokens=-2)
    with pytest.raises(TypeError, match="positional argument"):  # the prompts, then keywords
        generate(model, vocab, "time", 5)
    with pytest.raises(ValueError, match="optimizer must be one of 'adam', 'sgd', got 'rmsprop'"):
        make_optimizer(model, "rmsprop", 0.1)
    with pytest.raises(ValueError, match="num_epochs must be a positive int, got 0"):
        train_lm(model, [], num_epochs=0)
    with pytest.raises(TypeError, match=r"num_epochs must be a positive int, got 2\.0 \(float\)"):
        train_lm(model, [], num_epochs=2.0)
    with pytest.raises(TypeError, match=r"num_epochs must be a positive int, got True \(bool\)"):
        train_lm(model, [], num_epochs=True)


def test_checkpoint_roundtrip(tmp_path, data):
    _, vocab = data
    model = build_lm("lstm", len(vocab), 8, num_layers=2, scratch=True)
    cfg = {
        "cell": "lstm",
        "num_hiddens": 8,
        "num_layers": 2,
        "bidirectional": False,
        "scratch": True,
        "reset_after": False,
    }
    save_lm_checkpoint(tmp_path / "ck", model, vocab, cfg)
    names = sorted(p.name for p in (tmp_path / "ck").iterdir())
    assert len(names) == 2 and names[0] == "config.json"  # no temporary files left behind
    assert names[1].startswith("model-") and names[1].endswith(".pt")
    loaded, v2, cfg2 = load_lm_checkpoint(tmp_path / "ck")
    assert v2.idx_to_token == vocab.idx_to_token and cfg2["task"] == "lm"
    assert cfg2["format"] == "attnkit-checkpoint" and cfg2["num_layers"] == 2
    X = torch.tensor([[1, 2, 3], [4, 5, 6]])
    torch.testing.assert_close(loaded(X)[0], model(X)[0])
    with pytest.raises(FileNotFoundError, match="must be a folder written by"):
        load_lm_checkpoint(tmp_path / "nothing")
    with pytest.raises(ValueError, match="config lacks the model keys"):
        save_lm_checkpoint(tmp_path / "x", model, vocab, {"cell": "lstm"})


def test_cli_train_then_generate(tmp_path, capsys):
    random.seed(0)
    data = tmp_path / "book.txt"
    data.write_text("\n".join(TEXT * 2), encoding="utf-8")
    out = tmp_path / "run"
    argv = ["lm", "train", "--cell", "lstm", "--scratch", "--data", str(data), "--epochs", "3"]
    argv += ["--hiddens", "16", "--batch-size", "4", "--num-steps", "8", "--optimizer", "adam"]
    argv += ["--out", str(out), "--no-progress", "--sample-tokens", "10"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "scratch LSTM" in printed and "perplexity" in printed
    for name in ("config.json", "perplexity.png", "samples.txt"):
        assert (out / name).stat().st_size > 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["cell"] == "lstm" and cfg["scratch"] is True and cfg["lr"] == 0.01
    assert (cfg["task"], cfg["epoch"], cfg["epochs_done"]) == ("lm", 3, 3)
    assert len(cfg["history"]["train_loss"]) == 3 and cfg["vocab"]["idx_to_token"][0] == "<unk>"
    assert {"model", "trainer"} == set(cfg["files"]) == set(cfg["sha256"])
    assert (out / "samples.txt").read_text().count("time traveller") == 2
    assert main(["lm", "generate", "--checkpoint", str(out), "--prompt", "Time Traveller!"]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("time traveller") and len(captured.out.strip()) == 14 + 50
    assert "prompt normalized like the corpus: 'Time Traveller!' -> 'time traveller'" in (
        captured.err
    )


def test_cli_errors(tmp_path, capsys):
    assert main(["lm", "train", "--layers", "0", "--no-progress"]) == 1
    assert "--layers must be positive, got 0" in capsys.readouterr().err
    assert main(["lm", "train", "--threads", "0", "--no-progress"]) == 1  # was ignored
    assert "--threads must be positive, got 0" in capsys.readouterr().err
    assert main(["lm", "train", "--data", str(tmp_path / "missing.txt")]) == 1
    assert "does not exist" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["lm", "train", "--cell", "tcn"])
    assert "invalid choice: 'tcn'" in capsys.readouterr().err
    assert main(["lm", "generate", "--checkpoint", str(tmp_path), "--prompt", "the"]) == 1
    assert "must be a folder written by" in capsys.readouterr().err


class UniformWindowLM(nn.Module):
    """A model without a state (batch-major logits (B, T, V), as a Transformer's)."""

    def __init__(self, V: int) -> None:
        super().__init__()
        self.V, self.w = V, nn.Parameter(torch.zeros(()))

    def forward(self, X):
        return torch.zeros(*X.shape, self.V) + 0 * self.w


@pytest.mark.parametrize("kind", ["recurrent", "windows"])
def test_both_kinds_train_and_validate_on_the_engine(data, kind):
    from attnkit.training.engine import Engine, EngineConfig
    from attnkit.training.lm import LMTask

    corpus, vocab = data
    V = len(vocab)
    model = UniformLM(V) if kind == "recurrent" else UniformWindowLM(V)
    task = LMTask(LMDataLoader(corpus[:300], 4, 7, seed=0), val_data=torch.tensor(corpus[300:]),
                  val_steps=7, val_batch_size=5)  # fmt: skip
    config = EngineConfig(epochs=2, seed=None, progress=False, log_every=0)
    history = Engine(model, task, config).fit()
    assert perplexity(history["train_loss"][-1]) == pytest.approx(V, rel=1e-5)
    assert history["val_perplexity"] == pytest.approx([V, V], rel=1e-5)
    assert history["val_loss"] == pytest.approx([math.log(V)] * 2, rel=1e-5)
    with pytest.raises(ValueError, match="val_data holds 5 tokens: the validation needs"):
        LMTask([], val_data=torch.arange(5), val_steps=7)
    for bad in (torch.rand(50), torch.arange(50).view(5, 10), [True] * 50):
        with pytest.raises(TypeError, match=r"val_data must be token ids, a 1-D integer tensor"):
            LMTask([], val_data=bad, val_steps=7)  # used to be truncated or misread silently


def test_a_transformer_lm_trains_with_train_lm(data):
    from attnkit.models.decoder_lm import DecoderLMConfig

    torch.manual_seed(0)
    corpus, vocab = data
    config = DecoderLMConfig(d_model=32, num_heads=4, num_layers=2, ffn_hidden=64, dropout=0.0,
                             context_length=16, positions="rope")  # fmt: skip
    model = config.build(len(vocab))
    loader = LMDataLoader(corpus, 8, 16, use_random_iter=True, seed=0)
    hist = train_lm(model, loader, num_epochs=40, lr=0.01, optimizer="adam", progress=False)
    assert hist.perplexity[0] > 8 and hist.perplexity[-1] < hist.perplexity[0] / 3
    out = generate(model, "the time", vocab=vocab, max_new_tokens=20)
    assert out.startswith("the time traveller")  # the one sentence of the corpus, learned
