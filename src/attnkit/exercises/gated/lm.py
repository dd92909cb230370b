"""Exercises of d2l 0.17 sections 9.1-9.3 (1.0's 10.1-10.3) on tiny character language
models: hyperparameters of the GRU and the LSTM (9.1.2, 9.2.1), the plain RNN against the
GRU, the words a character model invents and a word-level model on the same text (9.1.3,
9.2.2, with ``words``), and deep GRU against deep LSTM (9.3.2). Every character model is a
one-hot ``RNNLM`` over ``torch.nn`` layers trained with Adam on the book's sequential
minibatches (the state carried and detached, gradients clipped to 1); the book's SGD at
lr 1 needs hundreds of epochs, we have seconds. Cost is counted (``count_ops`` of one
forward pass on one minibatch); seconds are only shown beside."""

from __future__ import annotations

import random
import time

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnkit.data.lm import seq_data_iter_sequential
from attnkit.data.text import Vocab
from attnkit.exercises.gated import words
from attnkit.exercises.rnn.lm import char_data, evaluate_perplexity
from attnkit.models.rnn import build_lm
from attnkit.tour.base import TopicResult, describe_seeds, seed_summary, topic
from attnkit.tour.cost import count_ops

__all__ = [
    "deep_gru_vs_lstm", "hyperparameter_grid", "lm_size", "rnn_vs_gru", "sample_text",
    "train_lm",
]  # fmt: skip


def lm_size(small: bool) -> dict:
    """The sizes the experiments of this module share (one place to change them)."""
    return {"num_hiddens": 32 if small else 64, "num_steps": 10 if small else 16,
            "batch_size": 32, "steps": 50 if small else 150, "lr": 0.01,
            "max_tokens": 30000 if small else 200000}  # fmt: skip


def _detach(state):
    return tuple(s.detach() for s in state) if isinstance(state, tuple) else state.detach()


def train_lm(model: nn.Module, train: Tensor, *, steps: int, lr: float = 0.01,
             batch_size: int = 32, num_steps: int = 16, seed: int = 0) -> list[float]:  # fmt: skip
    """``steps`` Adam steps on the book's sequential minibatches (a fresh random offset
    every epoch from ``seed``; the state, a tensor or the LSTM's pair, carried and
    detached), gradient norm clipped to 1. Returns every step's training loss."""
    rng = random.Random(seed)
    opt = torch.optim.Adam(model.parameters(), lr)
    losses: list[float] = []
    while len(losses) < steps:
        state = None
        for X, Y in seq_data_iter_sequential(train, batch_size, num_steps, rng):  # (B, T)
            if state is not None:
                state = _detach(state)
            logits, state = model(X, state)  # (T*B, V)
            loss = F.cross_entropy(logits, Y.T.reshape(-1))
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            losses.append(float(loss.detach()))
            if len(losses) == steps:
                break
    return losses


@torch.no_grad()
def sample_text(model: nn.Module, vocab, prefix: str, length: int, seed: int,
                greedy: bool = False) -> str:  # fmt: skip
    """``prefix`` continued by ``length`` characters drawn from the model's softmax
    (or its argmax when ``greedy``), from a seeded generator."""
    g = torch.Generator().manual_seed(seed)
    ids = vocab[list(prefix)]
    logits, state = model(torch.tensor([ids]))  # (T, V) for batch 1
    out = list(prefix)
    for _ in range(length):
        p = torch.softmax(logits[-1], -1)
        nxt = int(p.argmax()) if greedy else int(torch.multinomial(p, 1, generator=g))
        out.append(vocab.to_tokens(nxt))
        logits, state = model(torch.tensor([[nxt]]), state)
    return "".join(out)


def _fit(cell: str, data: tuple, *, seed: int, num_hiddens: int, num_layers: int = 1,
         steps: int, lr: float, num_steps: int, batch_size: int) -> dict:  # fmt: skip
    """Build (init from ``seed``), train and evaluate one model: held-out perplexity (on
    the first 10000 held-out characters), counted ops of one forward minibatch (of the
    scratch layers of the same shape; its FLOPs and those of the torch.nn layers
    trained), parameters, seconds, the model."""
    _, train, held, vocab = data
    torch.manual_seed(seed)
    model = build_lm(cell, len(vocab), num_hiddens, num_layers)
    X = train[: batch_size * num_steps].reshape(batch_size, num_steps)
    flops = count_ops(lambda: model(X)).flops  # the torch.nn layers trained, fused ones too
    # every operation, elementwise too, counted on the scratch twin (the book's
    # equations): the CPU's fused LSTM kernel hides its gates' elementwise work
    twin = build_lm(cell, len(vocab), num_hiddens, num_layers, scratch=True)
    ops = count_ops(lambda: twin(X))
    t0 = time.perf_counter()
    losses = train_lm(model, train, steps=steps, lr=lr, batch_size=batch_size,
                      num_steps=num_steps, seed=seed)  # fmt: skip
    seconds = time.perf_counter() - t0
    model.eval()
    return {"ppl": evaluate_perplexity(model, held[:10000]), "train_loss": sum(losses[-5:]) / 5,
            "flops": flops, "twin_flops": ops.flops, "ops": ops.total, "seconds": seconds,
            "params": sum(p.numel() for p in model.parameters()), "model": model}  # fmt: skip


def _data(small: bool) -> tuple:
    return char_data(small, lm_size(small)["max_tokens"])


@topic
def hyperparameter_grid(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.1.2 and 9.2.1: one knob at a time from a base setting (hidden units, time steps
    per minibatch, learning rate), for the GRU and the LSTM: held-out perplexity after
    the same number of steps, counted ops per forward minibatch, a greedy sample."""
    data = _data(small)
    base = lm_size(small)
    h, T, lr = base["num_hiddens"], base["num_steps"], base["lr"]
    steps = base["steps"]
    settings = {
        "base": {},
        "hidden x2": {"num_hiddens": 2 * h},
        "steps/batch x2": {"num_steps": 2 * T},
        "lr /10": {"lr": lr / 10},
    }
    table: dict[str, dict] = {}
    for cell in ("gru", "lstm"):
        table[cell] = {}
        for label, change in settings.items():
            kw = {"num_hiddens": h, "num_steps": T, "lr": lr, **change}
            r = _fit(cell, data, seed=seed, steps=steps,
                     batch_size=base["batch_size"], **kw)  # fmt: skip
            sample = sample_text(r.pop("model"), data[3], "the ", 30, seed, greedy=True)
            table[cell][label] = {**r, "sample": sample}
    values = {"data": data[0], "steps": steps, "settings": list(settings),
              "base_hidden": h, "base_num_steps": T, "base_lr": lr, "table": table,
              "vocab_size": len(data[3]), "batch_size": base["batch_size"]}  # fmt: skip
    ratio = {c: table[c]["hidden x2"]["ops"] / table[c]["base"]["ops"] for c in table}
    values["ops_ratio_hidden_x2"] = ratio
    values["ops_ratio_steps_x2"] = {
        c: table[c]["steps/batch x2"]["ops"] / table[c]["base"]["ops"] for c in table
    }
    values["ppl_gain_hidden_x2"] = {
        c: table[c]["base"]["ppl"] / table[c]["hidden x2"]["ppl"] for c in table
    }
    values["ppl_loss_lr_div10"] = {
        c: table[c]["lr /10"]["ppl"] / table[c]["base"]["ppl"] for c in table
    }
    finding = "; ".join(
        f"{c}: "
        + ", ".join(
            f"{k} ppl {r['ppl']:.2f} ({r['ops'] / 1e6:.1f} Mops, "
            f"{r['seconds']:.1f} s) '{r['sample']}'"
            for k, r in table[c].items()
        )
        for c in table
    )
    return TopicResult("gated_lm_hyperparameter_grid", finding, values)


@topic
def rnn_vs_gru(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.1.3 and 9.2.2: the plain RNN and the GRU, paired over seeds (same seed, same
    batches): held-out perplexity after equal steps, counted FLOPs, sampled strings; the
    fraction of the generated words that are words of the training text; and a
    word-level GRU (``words.WordLM``) trained with the same steps and minibatch shape,
    against the character GRU in bits per character of the same held-out characters."""
    data = _data(small)
    name, train, held, vocab = data
    size = lm_size(small)
    n_seeds = 2 if small else 5
    kw = {k: size[k] for k in ("num_hiddens", "steps", "lr", "num_steps", "batch_size")}
    # 9.2.2: the same text as words; the held-out characters cut to whole words
    text = "".join(vocab.to_tokens(train.tolist()))
    train_words = text.split()[1:-1]  # a cut first and last word left out
    known = set(train_words)
    word_vocab = Vocab(train_words, min_freq=words.MIN_FREQ)
    speller = words.Speller(train_words)
    held_text = words.held_words("".join(vocab.to_tokens(held[:10000].tolist())))
    held_w = held_text.split()
    start = len(held_w[0])  # both models predict what follows the first word
    runs = {"rnn": [], "gru": []}
    bits: dict[str, list[float]] = {"char": [], "word": []}
    samples: dict[str, str] = {}
    for s in range(seed, seed + n_seeds):
        for cell in runs:
            r = _fit(cell, data, seed=s, **kw)
            model = r.pop("model")
            if s == seed:
                samples[cell] = sample_text(model, vocab, "the ", 400, s)
            if cell == "gru":
                bits["char"].append(words.char_model_bits(model, vocab, held_text, start))
            runs[cell].append(r)
        torch.manual_seed(s)
        word_lm = words.WordLM(len(word_vocab), size["num_hiddens"])
        train_lm(word_lm, torch.tensor(word_vocab[train_words]), seed=s,
                 **{k: kw[k] for k in ("steps", "lr", "num_steps", "batch_size")})  # fmt: skip
        word_lm.eval()
        total, spelling = words.word_model_bits(word_lm, word_vocab, held_w, speller)
        bits["word"].append(total)
        if s == seed:
            spelling_share = spelling / total
            word_sample = words.sample_words(word_lm, word_vocab, ["the"], 60, s)
    n_chars = len(held_text) - start
    bpc = {k: [b / n_chars for b in v] for k, v in bits.items()}
    ppl = {c: [r["ppl"] for r in runs[c]] for c in runs}
    gap = seed_summary([a - b for a, b in zip(ppl["rnn"], ppl["gru"])])
    g = torch.Generator().manual_seed(seed)
    chars = [c for c in vocab.idx_to_token if c != "<unk>"]
    uniform = "".join(chars[int(i)] for i in torch.randint(len(chars), (400,), generator=g))

    def real_fraction(sample: str) -> float:
        return words.real_word_fraction(sample.split()[1:-1], known)  # a cut last word out

    values = {
        "data": name, "seeds": n_seeds, "steps": size["steps"], "hidden": size["num_hiddens"],
        "num_steps": size["num_steps"], "batch_size": size["batch_size"],
        "vocab_size": len(vocab), "ppl": ppl, "rnn_minus_gru": gap,
        "ops": {c: runs[c][0]["ops"] for c in runs}, "flops": {c: runs[c][0]["flops"] for c in runs},
        "params": {c: runs[c][0]["params"] for c in runs},
        "seconds": {c: sum(r["seconds"] for r in runs[c]) / n_seeds for c in runs},
        "samples": {c: t[:120] for c, t in samples.items()},
        "real_word_fraction": {**{c: real_fraction(t) for c, t in samples.items()},
                               "uniform characters": real_fraction(uniform)},
        "training_words": len(known),
        "word_vocab": len(word_vocab), "word_min_freq": words.MIN_FREQ,
        "held_chars": n_chars, "held_words": len(held_w) - 1,
        "held_unknown": sum(w not in word_vocab for w in held_w[1:]) / (len(held_w) - 1),
        "chars_per_word": len(text) / len(text.split()),
        "bits_per_char": bpc, "spelling_share": spelling_share,
        "char_minus_word_bpc": seed_summary([c - w for c, w in zip(bpc["char"], bpc["word"])]),
        "word_sample": " ".join(word_sample[:24]),
        "word_sample_unknown": word_sample.count("<unk>") / len(word_sample),
    }  # fmt: skip
    values["gru_over_rnn_flops"] = values["flops"]["gru"] / values["flops"]["rnn"]
    finding = (
        f"{name}, {size['steps']} Adam steps, {size['num_hiddens']} hidden units: held-out "
        f"perplexity RNN {ppl['rnn']}, GRU {ppl['gru']}; RNN - GRU: "
        + describe_seeds(gap)
        + f". FLOPs per forward minibatch GRU/RNN {values['gru_over_rnn_flops']:.2f}. "
        f"Real words in the samples: {values['real_word_fraction']}. Bits per held-out "
        f"character, character GRU {bpc['char']}, word GRU {bpc['word']}; character - word: "
        + describe_seeds(values["char_minus_word_bpc"])
        + "."
    )
    return TopicResult("gated_lm_rnn_vs_gru", finding, values)


@topic
def deep_gru_vs_lstm(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.3.2: two-layer GRU against two-layer LSTM, paired over seeds: held-out
    perplexity after equal steps, counted ops, parameters, seconds (shown only)."""
    data = _data(small)
    size = lm_size(small)
    n_seeds = 2 if small else 5
    kw = {k: size[k] for k in ("num_hiddens", "steps", "lr", "num_steps", "batch_size")}
    runs: dict[str, list] = {"gru": [], "lstm": []}
    for s in range(seed, seed + n_seeds):
        for cell in runs:
            r = _fit(cell, data, seed=s, num_layers=2, **kw)
            r.pop("model")
            runs[cell].append(r)
    ppl = {c: [r["ppl"] for r in runs[c]] for c in runs}
    gap = seed_summary([a - b for a, b in zip(ppl["lstm"], ppl["gru"])])
    values = {
        "data": data[0], "seeds": n_seeds, "steps": size["steps"], "hidden": size["num_hiddens"],
        "num_steps": size["num_steps"], "batch_size": size["batch_size"],
        "vocab_size": len(data[3]), "ppl": ppl, "lstm_minus_gru": gap,
        "flops": {c: runs[c][0]["flops"] for c in runs},
        "params": {c: runs[c][0]["params"] for c in runs},
        "seconds": {c: sum(r["seconds"] for r in runs[c]) / n_seeds for c in runs},
    }  # fmt: skip
    values["lstm_over_gru_flops"] = values["flops"]["lstm"] / values["flops"]["gru"]
    finding = (
        f"{data[0]}, two layers of {size['num_hiddens']}: held-out perplexity GRU {ppl['gru']}, "
        f"LSTM {ppl['lstm']}; LSTM - GRU: "
        + describe_seeds(gap)
        + f". FLOPs LSTM/GRU {values['lstm_over_gru_flops']:.2f}."
    )
    return TopicResult("gated_lm_deep_gru_vs_lstm", finding, values)
