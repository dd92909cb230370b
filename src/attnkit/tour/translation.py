"""Translation topics (d2l 9.7, 10.4, 10.7): seq2seq with and without Bahdanau
attention, and the trained Transformer's maps, its encoder alone and decoder alone.

Both train small models on attnkit's generated English-French corpus within the time
limit; ``trained_transformer`` caches its model per (small, seed) for the process.
"""

from __future__ import annotations

import functools
import time

import torch

from attnkit.tour.base import TopicResult, check_args, topic

__all__ = ["seq2seq", "train_translator", "trained_transformer", "transformer"]


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

    if isinstance(epochs, bool) or not isinstance(epochs, int):
        raise TypeError(f"epochs must be an int, got {epochs!r}")
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
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
    model, history, _ = train_translator(
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
        curves[f"{arch} val BLEU"] = hist["val_bleu"]
    pool = (data.val or data.train)[:50]
    sentence = " ".join(max(pool, key=lambda pair: len(pair[0]))[0])  # a long one
    maps = attention_maps(res["bahdanau"][0], data, sentence)
    fig = show_heatmaps(maps.cross[0, 0], "source", "output", xticklabels=maps.source,
                        yticklabels=maps.outputs, figsize=(4, 4))  # fmt: skip
    values = {arch: {"val_bleu": b, "seconds_per_epoch": s, "train_loss": loss}
              for arch, (_, b, s, loss) in res.items()}  # fmt: skip
    values["epochs"] = epochs
    values["sizes"] = dict(RNN_SIZES)
    values["alignment_shape"] = tuple(maps.cross.shape)
    finding = (
        f"{epochs} epochs on {len(data.train)} generated pairs, the same GRU sizes "
        f"(embed 32, hidden 64, 1 layer): seq2seq val BLEU "
        f"{values['seq2seq']['val_bleu']:.1f} at {values['seq2seq']['seconds_per_epoch']:.2f} "
        f"s/epoch; with Bahdanau attention {values['bahdanau']['val_bleu']:.1f} at "
        f"{values['bahdanau']['seconds_per_epoch']:.2f} s/epoch. Alignment for "
        f"'{sentence}' -> '{maps.translation}'."
    )
    fig_b = plot_curves(
        curves, "epoch", "val BLEU", title="the same GRUs, with and without attention"
    )
    return TopicResult("seq2seq", finding, values, {"alignment": fig, "bleu": fig_b})


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
        figs[key] = show_heatmaps(w, "keys", "queries", titles=[f"head {i + 1}" for i in range(H)],
                                  row_titles=[f"layer {i + 1}" for i in range(L)],
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
        for _ in range(5):
            logits, state = model.decoder(torch.tensor([[tokens[-1]]]), state)
            tokens.append(int(logits[0, -1].argmax()))
    lm_text = " ".join(data.tgt_vocab.to_tokens(tokens[1:]))
    values = {
        "val_bleu": history["val_bleu"][-1],
        "encoder_self_shape": tuple(maps.encoder_self.shape),
        "cross_shape": tuple(maps.cross.shape),
        "decoder_causal_leak": causal_leak,
        "encoder_features_shape": tuple(feats.shape),
        "decoder_alone_tokens": len(tokens) - 1,
    }
    finding = (
        f"Trained Transformer (val BLEU {values['val_bleu']:.1f}): '{sentence}' -> "
        f"'{maps.translation}'; encoder self-attention {values['encoder_self_shape']} "
        f"(layers, heads, S, S), cross {values['cross_shape']}; decoder self-attention puts "
        f"{causal_leak:.1e} weight on future positions. The encoder alone maps the sentence to "
        f"features {values['encoder_features_shape']}; the decoder alone, with no encoder "
        f"memory, runs as a causal language model: '{lm_text}'."
    )
    return TopicResult("transformer", finding, values, figs)
