"""Exercises of d2l 0.17 section 9.7 (seq2seq): the book's GRU seq2seq on generated
English-French pairs, changed one thing at a time, paired over seeds (same init, same
minibatches): larger embedding and hidden sizes (9.7.1), no mask in the loss (9.7.2), no
teacher forcing (9.7.4, done right and as the widely copied loop does it), LSTM instead
of GRU (9.7.5). Each (variant, size, seed) trains once per process (``trained``)."""

from __future__ import annotations

import functools

import torch

from attnkit.exercises.seq2seq.common import (
    NUM_STEPS,
    book_arrays,
    build_seq2seq,
    corpus_data,
    train_seq2seq,
    val_bleu,
    val_sentence_losses,
)
from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, check_args, describe_seeds, seed_summary, topic

__all__ = ["hyperparameters", "lstm_cell", "no_loss_mask", "no_teacher_forcing", "trained"]

VARIANTS = {
    "base": ({}, {}),
    "wide": ({"embed_size": 64, "num_hiddens": 128}, {}),
    "no_mask": ({}, {"mask": False}),
    "free_running": ({}, {"teacher_forcing": False}),
    "free_running_reset": ({}, {"teacher_forcing": False, "reset_state": True}),
    "lstm": ({"cell": "lstm"}, {}),
}


def seeds(small: bool, claim: bool = True) -> int:
    """Seeds per variant: 2 at small size; at full size 5 (the fewest whose agreement a
    sign test puts at 0.05) for the variants a claim of an effect rests on, 3 for the
    ones only recorded (their answers say the count is too few for a test)."""
    return 2 if small else (5 if claim else 3)


def epochs(small: bool) -> int:
    return 6 if small else 8


@functools.cache
def data_for(small: bool, seed: int):
    data = corpus_data(small, seed)
    return data, book_arrays(data)


@functools.cache
def trained(variant: str, small: bool, seed: int):
    """(model, per-epoch train losses, val BLEU) of ``variant`` at this size and seed
    (data drawn with seed 0: every seed sees the same pairs, its own init and order)."""
    build, train = VARIANTS[variant]
    data, arrays = data_for(small, 0)
    model = build_seq2seq(data, seed=seed, **build)
    losses = train_seq2seq(model, data, arrays, epochs=epochs(small), seed=seed, **train)
    return model.eval(), losses, val_bleu(model, data)


def _paired(small: bool, variant: str, against: str = "base", claim: bool = True) -> dict:
    """Val BLEU of both over the seeds and ``seed_summary`` of variant - against."""
    n = seeds(small, claim)
    a = [trained(variant, small, s)[2] for s in range(n)]
    b = [trained(against, small, s)[2] for s in range(n)]
    return {variant: a, against: b, "diff": seed_summary([x - y for x, y in zip(a, b)])}


def _flops_formula(model) -> int:
    """The hand formula: multiply-add FLOPs (2 per weight entry) of the weight matrices
    one source token and one target token pass through (encoder recurrent layers, decoder
    recurrent layers, output layer)."""
    mats = [model.encoder.rnn, model.decoder.rnn, model.decoder.dense]
    return sum(2 * p.numel() for m in mats for n, p in m.named_parameters() if "weight" in n)


def _flops_counted(model, arrays, bos: int, rows: int = 32) -> float:
    """FLOPs per (source token, target token) pair counted by ``count_ops`` on a
    teacher-forced forward pass of ``rows`` training rows: the encoder's products per real
    source token (it packs the padding away) plus the rest (decoder layers and output
    layer, which run every target position) per target position."""
    from attnkit.tour.cost import count_ops

    src, src_len, tgt = arrays.src[:rows], arrays.src_len[:rows], arrays.tgt[:rows]
    dec_in = torch.cat([torch.full((len(src), 1), bos), tgt[:, :-1]], dim=1)
    encoder = count_ops(lambda: model.encoder(src, src_len)).flops
    whole = count_ops(lambda: model(src, dec_in, src_len)).flops
    return encoder / int(src_len.sum()) + (whole - encoder) / (len(src) * NUM_STEPS)


def _cost(small: bool, variants: tuple[str, str]) -> dict:
    """Counted FLOPs per token of both variants (seed 0), their ratio and the formula's."""
    data, arrays = data_for(small, 0)
    models = {v: trained(v, small, 0)[0] for v in variants}
    bos = data.tgt_vocab["<bos>"]
    counted = {v: _flops_counted(m, arrays, bos) for v, m in models.items()}
    formula = {v: _flops_formula(m) for v, m in models.items()}
    a, b = variants
    return {"flops_per_token": counted, "flops_formula": formula,
            "ops_ratio": counted[b] / counted[a]}  # fmt: skip


def _setting(small: bool, claim: bool = True) -> dict:
    data, _ = data_for(small, 0)
    return {"data": "generated English-French pairs (attnkit.data.synthetic_fr)",
            "train_pairs": len(data.train), "val_pairs": len(data.val),
            "epochs": epochs(small), "seeds": seeds(small, claim)}  # fmt: skip


@topic
def hyperparameters(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.7.1: embedding 32 -> 64 and hidden 64 -> 128 at the same epochs and batches."""
    check_args(small, seed)
    res = _paired(small, "wide")
    values = {**_setting(small), **res, **_cost(small, ("base", "wide")),
              "base_train_loss": trained("base", small, 0)[1],
              "base_train_loss_end": trained("base", small, 0)[1][-2:],
              "wide_over_base": describe_seeds(res["diff"], " BLEU")}  # fmt: skip
    finding = f"wider GRU seq2seq beats the book's sizes on {values['wide_over_base']}"
    return TopicResult("seq2seq_variants_hyperparameters", finding, values)


def _pad_probability(model, data, arrays, rows: int = 200) -> dict:
    """Teacher-forced on training rows: the mean probability of <pad> at padding positions
    and at real positions, and the loss over all positions vs over real ones."""
    bos, pad = data.tgt_vocab["<bos>"], data.tgt_vocab["<pad>"]
    src, src_len, tgt, tgt_len = (t[:rows] for t in (arrays.src, arrays.src_len, arrays.tgt,
                                                      arrays.tgt_len))  # fmt: skip
    dec_in = torch.cat([torch.full((len(src), 1), bos), tgt[:, :-1]], dim=1)
    with torch.no_grad():
        logp = torch.log_softmax(model(src, dec_in, src_len)[0], -1)  # (B, T, V)
    real = torch.arange(NUM_STEPS)[None, :] < tgt_len[:, None]  # (B, T)
    p_pad = logp[..., pad].exp()
    nll = -logp.gather(-1, tgt[..., None]).squeeze(-1)  # (B, T)
    return {"p_pad_at_padding": float(p_pad[~real].mean()),
            "p_pad_at_real": float(p_pad[real].mean()),
            "loss_real": float(nll[real].mean()), "loss_all": float(nll.mean()),
            "padding_share": float((~real).float().mean())}  # fmt: skip


def _mean_output_length(model, data) -> float:
    from attnkit.inference.decoding import translate
    from attnkit.inference.evaluation import split_texts

    sources, _ = split_texts(data, "val")
    found = translate(model, data, sources, max_len=NUM_STEPS + 2)
    return sum(len(h.text.split()) for h in found) / len(found)


@topic
def no_loss_mask(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.7.2: padding counted as targets in the loss."""
    check_args(small, seed)
    data, arrays = data_for(small, 0)
    res = _paired(small, "no_mask", claim=False)
    probe = {
        v: _pad_probability(trained(v, small, 0)[0], data, arrays) for v in ("base", "no_mask")
    }
    lengths = {v: _mean_output_length(trained(v, small, 0)[0], data) for v in ("base", "no_mask")}
    ref_len = sum(len(t) for _, t in data.val) / len(data.val)
    values = {**_setting(small, claim=False), **res, "probe": probe, "output_length": lengths,
              "reference_length": ref_len,
              "no_mask_minus_base": describe_seeds(res["diff"], " BLEU")}  # fmt: skip
    finding = (
        f"unmasked: P(<pad>) at padding {probe['no_mask']['p_pad_at_padding']:.3f} "
        f"(masked {probe['base']['p_pad_at_padding']:.3f}); BLEU no_mask - base: "
        f"{values['no_mask_minus_base']}"
    )
    return TopicResult("seq2seq_variants_no_loss_mask", finding, values)


@topic
def no_teacher_forcing(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.7.4: training on the model's own previous predictions (state carried, and the
    wrong loop that restarts the state every step) against teacher forcing."""
    check_args(small, seed)
    from attnkit.viz import plot_curves

    data, _ = data_for(small, 0)
    res = _paired(small, "free_running")
    # carried - reset: the copied loop, recorded on fewer seeds
    reset = _paired(small, "free_running", "free_running_reset", claim=False)
    tf_loss = {v: [float(val_sentence_losses(trained(v, small, s)[0], data).mean())
                   for s in range(seeds(small, v != "free_running_reset"))]
               for v in ("base", "free_running", "free_running_reset")}  # fmt: skip
    # positive when teacher forcing wins
    tf_wins = seed_summary([-d for d in (x - y for x, y in zip(res["free_running"], res["base"]))])
    curves = {gettext("{variant} (seed 0)").format(variant=v): trained(v, small, 0)[1]
              for v in ("base", "free_running", "free_running_reset")}  # fmt: skip
    values = {**_setting(small), "bleu": {"teacher_forcing": res["base"],
              "free_running": res["free_running"], "free_running_reset":
              reset["free_running_reset"]},
              "teacher_forcing_wins": tf_wins,
              "carried_over_reset": reset["diff"], "reset_seeds": seeds(small, False),
              "val_loss_teacher_forced": tf_loss,
              "train_loss_last": {v: trained(v, small, 0)[1][-1] for v in tf_loss},
              "tf_over_free": describe_seeds(tf_wins, " BLEU"),
              "carried_over_reset_text": describe_seeds(reset["diff"], " BLEU")}  # fmt: skip
    fig = plot_curves(curves, gettext("epoch"),
                      gettext("train loss (own inputs when free running)"),
                      title=gettext("teacher forcing vs free running"))  # fmt: skip
    finding = f"teacher forcing beats free running on {values['tf_over_free']}"
    return TopicResult("seq2seq_variants_no_teacher_forcing", finding, values, {"loss": fig})


@topic
def lstm_cell(*, small: bool = False, seed: int = 0) -> TopicResult:
    """9.7.5: the same seq2seq with LSTM layers in place of GRU layers."""
    check_args(small, seed)
    res = _paired(small, "lstm")
    params = {v: sum(p.numel() for p in trained(v, small, 0)[0].parameters())
              for v in ("base", "lstm")}  # fmt: skip
    # positive when the GRU's val BLEU is the higher
    gru_over_lstm = seed_summary([-d for d in (x - y for x, y in zip(res["lstm"], res["base"]))])
    values = {**_setting(small), **res, **_cost(small, ("base", "lstm")),
              "gru_over_lstm": gru_over_lstm,
              "params": params, "train_loss_last": {v: trained(v, small, 0)[1][-1]
                                                    for v in ("base", "lstm")},
              "lstm_minus_gru": describe_seeds(res["diff"], " BLEU")}  # fmt: skip
    finding = f"LSTM - GRU val BLEU: {values['lstm_minus_gru']}; ops x{values['ops_ratio']:.2f}"
    return TopicResult("seq2seq_variants_lstm_cell", finding, values)
