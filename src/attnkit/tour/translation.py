"""Translation topics (d2l 9.7, 10.4, 10.7): seq2seq with and without Bahdanau
attention, and the trained Transformer's maps, its encoder alone and decoder alone.

Both train small models on attnkit's generated English-French corpus within the time
limit; ``trained_transformer`` caches its model per (small, seed) for the process.
"""

from __future__ import annotations

import functools
import time

import torch
from torch import Tensor

from attnkit._validate import positive_int
from attnkit.i18n import _
from attnkit.tour.base import TopicResult, check_args, topic

__all__ = [
    "alignment_stats",
    "seq2seq",
    "train_translator",
    "trained_transformer",
    "transformer",
]


def _data(small: bool, seed: int, num_pairs: int = 3000):
    from attnkit.data.translation import load_translation_data

    pairs = 1000 if small else num_pairs
    return load_translation_data(None, num_pairs=pairs, seed=seed, max_len=10)


# the book's Transformer sizes without dropout (25 epochs on 2000 pairs: no time to regularise)
TRANSFORMER_SIZES = {"d_model": 32, "num_heads": 4, "num_layers": 2, "d_ff": 64, "dropout": 0.0}
# one GRU layer of 64: the size that learns this corpus within the topic's time limit
RNN_SIZES = {"embed_size": 32, "num_hiddens": 64, "num_layers": 1, "dropout": 0.0}


def train_translator(
    arch: str, data, *, epochs: int, seed: int = 0, model_config=None, eval_every=None, **train
):
    """Train ``arch`` on ``data`` quietly; return (model, history, seconds per epoch).

    Seconds per epoch: the fastest evaluated epoch's training time (the least disturbed
    by other work on a shared machine); the wall-clock mean when evaluated once only.
    """
    from attnkit.models.registry import build_model
    from attnkit.training.translation import TrainConfig, Trainer

    positive_int("epochs", epochs)
    torch.manual_seed(seed)
    model = build_model(arch, model_config, len(data.src_vocab), len(data.tgt_vocab))
    cfg = TrainConfig(epochs=epochs, progress=False, log_every=0, bleu_sentences=100,
                      eval_every=eval_every or epochs, seed=seed, **train)  # fmt: skip
    t0 = time.perf_counter()
    history = Trainer(model, data, cfg, arch=arch).fit()
    per_epoch = (time.perf_counter() - t0) / epochs
    if len(history["seconds"]) > 1:
        per_epoch = min(history["seconds"])
    return model.eval(), history, per_epoch


@functools.cache
def trained_transformer(*, small: bool = False, seed: int = 0):
    """A book-size Transformer trained on the generated corpus: (model, data, history)."""
    check_args(small, seed)
    data = _data(small, seed, num_pairs=2000)
    model, history, _seconds = train_translator(
        "transformer", data, epochs=4 if small else 25, seed=seed, model_config=TRANSFORMER_SIZES,
        lr=0.005, schedule="inverse_sqrt", warmup_steps=100, batch_tokens=512,
    )  # fmt: skip
    return model, data, history


@topic
def seq2seq(*, small: bool = False, seed: int = 0) -> TopicResult:
    """The same data, the same sizes: GRU seq2seq against the Bahdanau decoder."""
    check_args(small, seed)
    from attnkit.inference.attention_maps import attention_maps
    from attnkit.viz import plot_curves, show_heatmaps

    data = _data(small, seed)
    epochs = 6 if small else 10
    res, curves = {}, {}
    for arch in ("seq2seq", "bahdanau"):
        model, hist, spe = train_translator(
            arch, data, epochs=epochs, seed=seed, model_config=RNN_SIZES, lr=0.01,
            batch_tokens=512, eval_every=1,
        )  # fmt: skip
        res[arch] = (model, hist["val_bleu"][-1], spe, hist["train_loss"][-1])
        curves[_("{arch} val BLEU").format(arch=arch)] = hist["val_bleu"]
    pool = (data.val or data.train)[:50]
    sentence = " ".join(max(pool, key=lambda pair: len(pair[0]))[0])  # a long one
    maps = attention_maps(res["bahdanau"][0], data, sentence)
    ops = {arch: _teacher_forced_ops(res[arch][0], data) for arch in res}
    align = alignment_stats(res["bahdanau"][0], data, (data.val or data.train)[:30])
    fig = show_heatmaps(maps.cross[0, 0], _("source"), _("output"), xticklabels=maps.source,
                        yticklabels=maps.outputs, figsize=(4, 4))  # fmt: skip
    bleu = {"seq2seq": res["seq2seq"][1], "bahdanau": res["bahdanau"][1]}  # val BLEU per arm
    values = {arch: {"val_bleu": bleu[arch], "seconds_per_epoch": s, "train_loss": loss}
              for arch, (_, _b, s, loss) in res.items()}  # fmt: skip
    values["epochs"] = epochs
    values["sizes"] = dict(RNN_SIZES)
    values["alignment_shape"] = tuple(maps.cross.shape)
    values["ops_per_batch"] = ops
    values["bahdanau_over_seq2seq_ops"] = {
        k: ops["bahdanau"][k] / ops["seq2seq"][k]
        for k in ("flops", "elementwise", "total", "calls")
    }
    values["alignment"] = align
    ratio = values["bahdanau_over_seq2seq_ops"]
    finding = _(
        "{epochs} epochs on {pairs} generated pairs, the same GRU sizes (embed 32, hidden 64, 1 "
        "layer): seq2seq val BLEU {bleu_seq2seq:.1f} at {seconds_seq2seq:.2f} s/epoch; with "
        "Bahdanau attention {bleu_bahdanau:.1f} at {seconds_bahdanau:.2f} s/epoch (measured, for "
        "illustration). Counted on the same {batches} training batches, teacher-forced: the "
        "attention decoder costs {flops:.2f}x the FLOPs and {total:.2f}x the operations (FLOPs "
        "+ elements written) of the plain decoder, which it runs in {calls:.1f}x the operator "
        "calls: it scores every source position at every step, one step after another (the "
        "plain decoder's GRU runs over all steps in one call). Alignment for '{sentence}' -> "
        "'{translation}'; over {sentences} validation sentences, the source position it weights "
        "most moves with the output step (correlation {correlation:.2f}, mean; it does not move "
        "back in {monotone:.0%} of steps) and the weight within ±1 of the scaled diagonal is "
        "{diagonal:.2f}, against {uniform:.2f} for uniform weights: the alignment is close to "
        "diagonal (English and French word order mostly agree; adjectives swap)."
    ).format(
        epochs=epochs, pairs=len(data.train), bleu_seq2seq=values["seq2seq"]["val_bleu"],
        seconds_seq2seq=values["seq2seq"]["seconds_per_epoch"],
        bleu_bahdanau=values["bahdanau"]["val_bleu"],
        seconds_bahdanau=values["bahdanau"]["seconds_per_epoch"],
        batches=ops["seq2seq"]["batches"], flops=ratio["flops"], total=ratio["total"],
        calls=ratio["calls"], sentence=sentence, translation=maps.translation,
        sentences=align["sentences"], correlation=align["correlation"],
        monotone=align["monotone"], diagonal=align["diagonal_mass"],
        uniform=align["diagonal_mass_uniform"],
    )  # fmt: skip
    fig_b = plot_curves(
        curves, _("epoch"), _("val BLEU"), title=_("the same GRUs, with and without attention")
    )
    return TopicResult("seq2seq", finding, values, {"alignment": fig, "bleu": fig_b})


def _teacher_forced_ops(model, data, batches: int = 3) -> dict:
    """``count_ops`` of the model's teacher-forced forward on the first training batches."""
    from attnkit.tour.cost import count_ops

    bos = data.tgt_vocab["<bos>"]
    flops = elementwise = calls = 0
    chosen = data.batches("train", 512, shuffle=False)[:batches]
    for b in chosen:
        dec_in = torch.cat([torch.full((b.tgt.shape[0], 1), bos), b.tgt[:, :-1]], dim=1)
        c = count_ops(lambda b=b, dec_in=dec_in: model(b.src, dec_in, b.src_len))
        flops, elementwise, calls = flops + c.flops, elementwise + c.elementwise, calls + c.calls
    return {"flops": flops, "elementwise": elementwise, "total": flops + elementwise,
            "calls": calls, "batches": len(chosen)}  # fmt: skip


def alignment_stats(model, data, pairs) -> dict:
    """How diagonal a Bahdanau model's alignments are over ``pairs`` (source, target):
    per sentence (3 or more output steps), the correlation between the output step t and
    the source position weighted most, the fraction of steps where that position does not
    move back, and the weight within ±1 of the diagonal position t (S - 1) / (T - 1);
    their means, and the last for uniform weights."""
    from attnkit.inference.attention_maps import attention_maps

    corr, mono, diag, unif = [], [], [], []
    for src, _tgt in pairs:
        A = attention_maps(model, data, " ".join(src)).cross[0, 0]  # (T, S)
        T, S = A.shape
        if T < 3 or S < 2:
            continue
        top = A.argmax(1).float()
        t = torch.arange(T, dtype=torch.float32)
        c = torch.corrcoef(torch.stack([t, top]))[0, 1]
        corr.append(float(c) if torch.isfinite(c) else 0.0)
        mono.append(float((top[1:] >= top[:-1]).float().mean()))
        band = ((torch.arange(S)[None, :] - t[:, None] * (S - 1) / (T - 1)).abs() <= 1).float()
        diag.append(float((A * band).sum(1).mean()))
        unif.append(float((band / S).sum(1).mean()))
    n = len(corr)
    if n == 0:
        raise ValueError("no sentence with 3 or more output steps to measure")
    return {"sentences": n, "correlation": sum(corr) / n, "correlation_min": min(corr),
            "monotone": sum(mono) / n, "diagonal_mass": sum(diag) / n,
            "diagonal_mass_uniform": sum(unif) / n}  # fmt: skip


def decoder_alone_perplexity(model, data, sentences: list[list[str]], seed: int) -> dict:
    """Perplexity of the Transformer's decoder alone (a zero memory with no valid key, so
    cross-attention adds nothing) on target ``sentences`` + <eos>, teacher-forced; on the
    same sentences with their words shuffled (a seeded shuffle); uniform = vocabulary size."""
    import math
    import random

    bos, eos = data.tgt_vocab["<bos>"], data.tgt_vocab["<eos>"]
    rng = random.Random(seed)
    shuffled = [rng.sample(list(s), len(s)) for s in sentences]

    def nll(batch: list[list[str]]) -> float:
        total = count = 0.0
        with torch.no_grad():
            for words in batch:
                ids = torch.tensor(data.tgt_vocab[list(words)] + [eos])
                state = model.decoder.init_state(
                    torch.zeros(1, 1, model.decoder.num_hiddens), torch.tensor([0])
                )
                logits, _state = model.decoder(
                    torch.cat([torch.tensor([bos]), ids[:-1]])[None], state
                )
                logp = torch.log_softmax(logits[0], -1)
                total -= float(logp[torch.arange(len(ids)), ids].sum())
                count += len(ids)
        return total / count

    real, other = nll(sentences), nll(shuffled)  # the two arms: French order, shuffled
    return {"sentences": len(sentences), "real": math.exp(real), "shuffled": math.exp(other),
            "uniform": len(data.tgt_vocab)}  # fmt: skip


def encoder_alone_features(model, data, sentences: list[list[str]]) -> dict:
    """The encoder alone's vectors for every word of ``sentences``: how often the nearest
    word centroid (the vector left out of its own word's centroid) is the word's own,
    over words seen at least twice; and how much one word's vectors differ across
    sentences (mean 1 - cosine similarity between pairs)."""
    from collections import defaultdict

    feats: dict[str, list[Tensor]] = defaultdict(list)
    with torch.no_grad():
        for words in sentences:
            src, src_len = data.encode_source([" ".join(words)])
            out = model.encoder(src, src_len)[0]
            for i, w in enumerate(words):
                feats[w].append(out[i])
    words = [w for w, f in feats.items() if len(f) >= 2]
    if len(words) < 2:
        raise ValueError("need two or more words seen at least twice")
    stacks = [torch.stack(feats[w]) for w in words]
    sums = torch.stack([f.sum(0) for f in stacks])
    centroids = sums / torch.tensor([len(f) for f in stacks], dtype=sums.dtype)[:, None]
    hits = vectors = 0
    spread = []
    for i, F in enumerate(stacks):
        for f in F:
            c = centroids.clone()
            c[i] = (sums[i] - f) / (len(F) - 1)  # leave this vector out
            hits += int(int((c - f).norm(dim=1).argmin()) == i)
            vectors += 1
        cos = torch.nn.functional.cosine_similarity(F[:, None], F[None], dim=-1)
        spread.append(float(1 - cos[~torch.eye(len(F), dtype=torch.bool)].mean()))
    return {"sentences": len(sentences), "words": len(words), "vectors": vectors,
            "recovered": hits / vectors, "context_spread": sum(spread) / len(spread)}  # fmt: skip


@topic
def transformer(*, small: bool = False, seed: int = 0) -> TopicResult:
    """Maps per layer and head; the encoder alone (features) and the decoder alone (LM)."""
    check_args(small, seed)
    from attnkit.inference.attention_maps import attention_maps
    from attnkit.viz import show_heatmaps

    model, data, history = trained_transformer(small=small, seed=seed)
    pool = (data.val or data.train)[:50]
    sentence = " ".join(max(pool, key=lambda pair: len(pair[0]))[0])  # a long one
    maps = attention_maps(model, data, sentence)
    figs = {}
    for key, w, xt, yt in (("encoder", maps.encoder_self, maps.source, maps.source),
                           ("decoder", maps.decoder_self, maps.decoder_inputs, maps.decoder_inputs),
                           ("cross", maps.cross, maps.source, maps.outputs)):  # fmt: skip
        L, H = w.shape[:2]
        figs[key] = show_heatmaps(w, _("keys"), _("queries"),
                                  titles=[_("head {i}").format(i=i + 1) for i in range(H)],
                                  row_titles=[_("layer {i}").format(i=i + 1) for i in range(L)],
                                  xticklabels=xt, yticklabels=yt)  # fmt: skip
    causal_leak = float(maps.decoder_self.triu(1).abs().max())
    with torch.no_grad():
        # the encoder alone: one contextual vector per source token (as BERT uses it)
        src, src_len = data.encode_source([sentence])
        feats = model.encoder(src, src_len)
        # the decoder alone: a causal language model (as GPT); a zero "memory" with no
        # valid key stands in for the encoder, so cross-attention contributes nothing
        bos = data.tgt_vocab["<bos>"]
        memory = torch.zeros(1, 1, model.decoder.num_hiddens)
        tokens = [bos]
        state = model.decoder.init_state(memory, torch.tensor([0]))
        for _step in range(5):
            logits, state = model.decoder(torch.tensor([[tokens[-1]]]), state)
            tokens.append(int(logits[0, -1].argmax()))
    lm_text = " ".join(data.tgt_vocab.to_tokens(tokens[1:]))
    pairs = (data.val or data.train)[:100]
    lm = decoder_alone_perplexity(model, data, [t for _, t in pairs], seed)
    enc = encoder_alone_features(model, data, [s for s, _ in pairs[:60]])
    values = {
        "val_bleu": history["val_bleu"][-1],
        "encoder_self_shape": tuple(maps.encoder_self.shape),
        "cross_shape": tuple(maps.cross.shape),
        "decoder_causal_leak": causal_leak,
        "encoder_features_shape": tuple(feats.shape),
        "decoder_alone_tokens": len(tokens) - 1,
        "decoder_alone_perplexity": lm,
        "encoder_alone_features": enc,
    }
    finding = _(
        "Trained Transformer (val BLEU {bleu:.1f}): '{sentence}' -> '{translation}'; encoder "
        "self-attention {encoder_shape} (layers, heads, S, S), cross {cross_shape}; decoder "
        "self-attention puts {leak:.1e} weight on future positions. The encoder alone maps the "
        "sentence to features {features_shape}, one contextual vector per word: over {words} "
        "words seen twice or more in {enc_sentences} sentences, the nearest word centroid "
        "(leaving the vector out of its own) names the word for {recovered:.0%} of {vectors} "
        "vectors (chance {chance:.0%}), while the same word's vectors differ across sentences "
        "(mean 1 - cosine {spread:.2f}; an embedding lookup gives 0). The decoder alone, with no "
        "encoder memory, runs as a causal language model ('{lm_text}'): perplexity {real:.1f} on "
        "{lm_sentences} validation French sentences against {shuffled:.1f} on the same words "
        "shuffled: it has learned French word order"
    ).format(
        bleu=values["val_bleu"], sentence=sentence, translation=maps.translation,
        encoder_shape=values["encoder_self_shape"], cross_shape=values["cross_shape"],
        leak=causal_leak, features_shape=values["encoder_features_shape"], words=enc["words"],
        enc_sentences=enc["sentences"], recovered=enc["recovered"], vectors=enc["vectors"],
        chance=1 / enc["words"], spread=enc["context_spread"], lm_text=lm_text, real=lm["real"],
        lm_sentences=lm["sentences"], shuffled=lm["shuffled"],
    ) + (
        _(", and beats uniform guesses over the vocabulary ({uniform}).")
        if lm["real"] < lm["uniform"]
        else _("; but it is worse than uniform guesses over the vocabulary ({uniform}): trained "
               "to lean on the encoder, it is not a calibrated language model alone.")
    ).format(uniform=lm["uniform"])  # fmt: skip
    return TopicResult("transformer", finding, values, figs)
