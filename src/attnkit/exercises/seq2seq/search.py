"""Exercises of d2l 0.17 section 9.8 (beam search), all with attnkit's ``BeamSearch``:
exhaustive search as beam search whose beam never prunes (9.8.1, checked against
enumeration on tiny random models), beam size against BLEU and counted decoder work on
the trained seq2seq (9.8.2), and greedy against beam search for a character language
model's continuations (9.8.3)."""

from __future__ import annotations

import itertools
import time

import torch
from torch import nn

from attnkit.inference.beam_search import BeamSearch
from attnkit.models.seq2seq import EncoderDecoder, Seq2SeqDecoder, Seq2SeqEncoder
from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["beam_sizes", "char_lm_search", "exhaustive_is_beam"]

BOS, EOS = 2, 3  # the book's reserved ids: <unk>=0, <pad>=1, <bos>=2, <eos>=3


def _toy_model(vocab: int, seed: int) -> EncoderDecoder:
    """An untrained book seq2seq over ``vocab`` target tokens, output weights scaled up
    so that its next-token distributions are peaked (as a trained model's are)."""
    torch.manual_seed(seed)
    model = EncoderDecoder(Seq2SeqEncoder(8, 8, 16, 1), Seq2SeqDecoder(vocab, 8, 16, 1))
    with torch.no_grad():
        model.decoder.dense.weight.mul_(6.0)
    return model.eval()


def _exhaustive_best(model, src, src_len, vocab: int, T: int) -> float:
    """The largest log-probability over every hypothesis of at most T tokens: a sequence
    ending at its first <eos>, or T tokens without one (what beam search returns)."""
    seqs = torch.tensor(list(itertools.product(range(vocab), repeat=T)))  # (V^T, T)
    n = seqs.shape[0]
    dec_in = torch.cat([torch.full((n, 1), BOS), seqs[:, :-1]], dim=1)
    with torch.no_grad():
        logits, _ = model(src.expand(n, -1), dec_in, src_len.expand(n))  # (V^T, T, V)
    lp = torch.log_softmax(logits, -1).gather(-1, seqs[..., None]).squeeze(-1)  # (V^T, T)
    # a token counts when no <eos> came before it
    eos_before = torch.cumsum((seqs == EOS).long(), dim=1) - (seqs == EOS).long()
    return float((lp * (eos_before == 0)).sum(1).max())


@topic
def exhaustive_is_beam(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.8.1: on random models over V tokens and T steps, beam search with k = V^(T-1)
    finds the exhaustive optimum every time; k = 1 (greedy) and small k can miss it."""
    check_args(small, seed)
    V, T = 5, 4
    models = 10 if small else 40
    k_full = V ** (T - 1)
    beams = (1, 2, V, k_full)
    key = {1: "k1", 2: "k2", V: "k_vocab", k_full: "k_full"}
    gaps: dict[int, list[float]] = {k: [] for k in beams}
    steps = dict.fromkeys(beams, 0)  # hypothesis-steps the decoder ran, counted
    for m in range(models):
        model = _toy_model(V, seed * 1000 + m)
        g = torch.Generator().manual_seed(seed * 1000 + m)
        src = torch.randint(0, 8, (1, 5), generator=g)
        src_len = torch.tensor([5])
        best = _exhaustive_best(model, src, src_len, V, T)
        for k in beams:
            counter = _StepCounter(model.decoder)
            found = BeamSearch(k, T, BOS, EOS)(model, src, src_len)[0][0].log_prob
            counter.remove()
            steps[k] += counter.rows
            gaps[k].append(best - found)  # >= 0; 0 when beam search found the optimum
    values = {
        "vocab": V, "steps": T, "models": models, "k_never_prunes": k_full,
        "exhaustive_sequences": V**T,
        "missed": {key[k]: sum(gap > 1e-4 for gap in gaps[k]) for k in beams},
        "max_gap": {key[k]: max(gaps[k]) for k in beams},
        "min_gap": min(min(g) for g in gaps.values()),
        "decoder_steps": {key[k]: steps[k] for k in beams},
    }  # fmt: skip
    finding = f"misses of the exhaustive optimum per beam size: {values['missed']}"
    return TopicResult("seq2seq_search_exhaustive_is_beam", finding, values)


class _StepCounter:
    """Counts the hypothesis-steps the decoder runs: rows x tokens of every call."""

    def __init__(self, decoder: nn.Module) -> None:
        self.rows = 0
        self.handle = decoder.register_forward_hook(self._hook)

    def _hook(self, module, args, output) -> None:
        self.rows += args[0].numel()  # X: (R, T) tokens fed

    def remove(self) -> None:
        self.handle.remove()


@topic
def beam_sizes(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.8.2: the 9.7 seq2seq (book sizes, trained as in 9.7.1's baseline) decoded with
    beam sizes 1-8, without length normalisation and with the book's alpha = 0.75."""
    check_args(small, seed)
    from attnkit.exercises.seq2seq.common import NUM_STEPS
    from attnkit.exercises.seq2seq.variants import data_for, trained
    from attnkit.inference.evaluation import split_texts
    from attnkit.metrics import bleu_from_stats, bleu_stats

    data, _ = data_for(small, 0)
    model = trained("base", small, seed)[0]
    sources, refs = split_texts(data, "val")
    src, src_len = data.encode_source(sources)
    rows = []
    for alpha in (0.0, 0.75):
        for k in (1, 2, 4, 8):
            counter = _StepCounter(model.decoder)
            t0 = time.perf_counter()
            found = BeamSearch(k, NUM_STEPS + 2, data.tgt_vocab["<bos>"], data.tgt_vocab["<eos>"],
                               length_penalty=alpha)(model, src, src_len)  # fmt: skip
            seconds = time.perf_counter() - t0
            counter.remove()
            best = [hyps[0] for hyps in found]
            hyps = [" ".join(data.tgt_vocab.to_tokens(h.tokens)) for h in best]
            rows.append({
                "alpha": alpha, "beam": k,
                "bleu": bleu_from_stats(bleu_stats(hyps, refs)),
                "log_prob": sum(h.log_prob for h in best) / len(best),
                "length": sum(len(h.tokens) for h in best) / len(best),
                "decoder_steps": counter.rows, "seconds": seconds,
            })  # fmt: skip
    raw = [r for r in rows if r["alpha"] == 0.0]
    values = {
        "data": "generated English-French pairs (attnkit.data.synthetic_fr)",
        "val_sentences": len(sources),
        "rows": rows,
        "raw": {f"k{r['beam']}": r for r in raw},
        "normalised": {f"k{r['beam']}": r for r in rows if r["alpha"] == 0.75},
        "steps_ratio_8_over_1": raw[-1]["decoder_steps"] / raw[0]["decoder_steps"],
        "log_prob_gain_8_over_1": raw[-1]["log_prob"] - raw[0]["log_prob"],
        "log_probs": [r["log_prob"] for r in raw],  # mean log-probability, k = 1, 2, 4, 8
        "bleu_range": max(r["bleu"] for r in rows) - min(r["bleu"] for r in rows),
        "reference_length": sum(len(r.split()) for r in refs) / len(refs),
    }
    finding = "; ".join(
        f"k={r['beam']} a={r['alpha']}: BLEU {r['bleu']:.1f} logp {r['log_prob']:.3f} "
        f"steps {r['decoder_steps']}"
        for r in rows
    )
    return TopicResult("seq2seq_search_beam_sizes", finding, values)


def _lm_beam(model, prefix: list[int], steps: int, k: int) -> tuple[list[int], float]:
    """Beam search over ``steps`` new characters of an ``RNNLM`` after ``prefix``: the k
    continuations of highest total log-probability kept at every step; returns the best
    one and its log-probability."""
    with torch.no_grad():
        _, state = model(torch.tensor([prefix[:-1]]), model.begin_state(batch_size=1))
        seqs, scores, last = [[]], torch.zeros(1), torch.tensor([[prefix[-1]]])
        for _ in range(steps):
            logits, state = model(last, state)  # (R, V), state (L, R, H)
            cand = scores[:, None] + torch.log_softmax(logits, -1)  # (R, V)
            scores, flat = cand.flatten().topk(min(k, cand.numel()))
            rows, chars = flat // cand.shape[1], flat % cand.shape[1]
            seqs = [seqs[r] + [int(c)] for r, c in zip(rows.tolist(), chars.tolist())]
            state, last = state.index_select(1, rows), chars[:, None]
    return seqs[0], float(scores[0])


def _repeated_share(text: str, n: int = 4) -> float:
    """The share of the text's character n-grams that already occurred earlier in it."""
    grams = [text[i : i + n] for i in range(len(text) - n + 1)]
    return sum(g in grams[:i] for i, g in enumerate(grams)) / max(len(grams), 1)


@topic
def char_lm_search(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.8.3: a character GRU language model (8.5's generator) continuing prefixes by
    greedy search (what the book's ``predict_ch8`` does), beam search and sampling."""
    check_args(small, seed)
    from attnkit.data.lm import LMDataLoader, load_corpus
    from attnkit.exercises import corpora
    from attnkit.inference.generation import generate_ids
    from attnkit.models.rnn import build_lm
    from attnkit.training.lm import train_lm

    name, lines = corpora.text_lines(small)
    corpus, vocab = load_corpus(lines, "char", 20000 if small else 60000)
    torch.manual_seed(seed)
    model = build_lm("gru", len(vocab), 64)
    loader = LMDataLoader(corpus, 32, 32, seed=seed)
    hist = train_lm(model, loader, num_epochs=4 if small else 6, lr=0.01, optimizer="adam",
                    progress=False)  # fmt: skip
    model.eval()
    steps = 40
    prefixes = ["the ", "time ", "a ", "in the "]
    rows = []
    for p in prefixes:
        ids = vocab[list(p)]
        with torch.no_grad():
            greedy = generate_ids(model, [ids], max_new_tokens=steps)[0]  # new ids only
            sampled = generate_ids(model, [ids], max_new_tokens=steps, temperature=1.0,
                                   seed=seed)[0]  # fmt: skip
        row = {"prefix": p}
        for label, new in (("greedy", greedy), ("sampled", sampled)):
            row[label] = _score(model, ids, new)
            row[label + "_text"] = "".join(vocab.to_tokens(new))
        beam, _ = _lm_beam(model, ids, steps, 8)
        row["beam8"] = _score(model, ids, beam)
        row["beam8_text"] = "".join(vocab.to_tokens(beam))
        rows.append(row)
    mean = {m: sum(r[m] for r in rows) / len(rows) for m in ("greedy", "beam8", "sampled")}
    repeats = {m: sum(_repeated_share(r[m + "_text"]) for r in rows) / len(rows)
               for m in ("greedy", "beam8", "sampled")}  # fmt: skip
    values = {
        "data": name, "corpus_chars": len(corpus), "vocab": len(vocab),
        "train_perplexity": hist.perplexity[-1], "steps": steps, "rows": rows,
        "log_prob": mean, "beam_minus_greedy": mean["beam8"] - mean["greedy"],
        "beam_beats_greedy": sum(r["beam8"] >= r["greedy"] - 1e-4 for r in rows),
        "prefixes": len(rows), "repeated_4grams": repeats,
    }  # fmt: skip
    finding = f"mean log-prob of {steps} chars: {mean}; repeated 4-grams {repeats}"
    return TopicResult("seq2seq_search_char_lm_search", finding, values)


def _score(model, prefix: list[int], new: list[int]) -> float:
    """Total log-probability of the characters ``new`` after ``prefix``."""
    ids = torch.tensor([prefix + new])
    with torch.no_grad():
        logits, _ = model(ids[:, :-1], model.begin_state(batch_size=1))  # (T, V)
    lp = torch.log_softmax(logits, -1)[torch.arange(ids.shape[1] - 1), ids[0, 1:]]
    return float(lp[len(prefix) - 1 :].sum())
