"""Exercises of d2l 0.17 section 10.4 (Bahdanau attention): 10.4.1, the GRUs replaced by
LSTMs (the decoder's state is (h, c); the attention query is h); 10.4.2, the additive score
replaced by the scaled dot product (no W_q, W_k, w_v). One run trains the three decoders
on the same generated English-French pairs with the same batches, over several seeds.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnkit.models.seq2seq import (
    BahdanauState,
    EncoderDecoder,
    Seq2SeqAttentionDecoder,
    Seq2SeqEncoder,
)
from attnkit.tour.base import TopicResult, check_args, describe_seeds, seed_summary, topic

__all__ = [
    "LSTMEncoder",
    "StepAttentionDecoder",
    "bahdanau_variants",
    "build_variant",
    "teacher_forced_ops",
]


def _xavier_rnn(rnn: nn.Module) -> None:
    """The book's init for a recurrent layer: Xavier-uniform on its weight matrices."""
    for name, p in rnn.named_parameters():
        if name.startswith("weight"):
            nn.init.xavier_uniform_(p)


class LSTMEncoder(Seq2SeqEncoder):
    """The book's encoder with an LSTM: its state is the pair (h, c), each (L, B, H)."""

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0) -> None:
        super().__init__(vocab_size, embed_size, num_hiddens, num_layers, dropout)
        self.rnn = nn.LSTM(embed_size, num_hiddens, num_layers)
        _xavier_rnn(self.rnn)


class StepAttentionDecoder(Seq2SeqAttentionDecoder):
    """The Bahdanau decoder with a choice of cell (``gru``, ``lstm``) and score
    (``additive``: w_vᵀ tanh(W_q h + W_k k); ``dot``: hᵀk / √H, the encoder outputs as keys).

    With ``gru`` and ``additive`` it computes exactly the library's decoder. With ``lstm``
    the state is (h, c) and the query is the top layer's h: the hidden state the decoder
    outputs, not the memory cell c.
    """

    def __init__(self, vocab_size, embed_size, num_hiddens, num_layers, dropout=0.0, *,
                 cell: str = "gru", score: str = "additive") -> None:  # fmt: skip
        super().__init__(vocab_size, embed_size, num_hiddens, num_layers, dropout)
        if cell not in ("gru", "lstm") or score not in ("additive", "dot"):
            raise ValueError(f"cell must be gru or lstm, score additive or dot: {cell}, {score}")
        self.cell, self.score = cell, score
        if cell == "lstm":
            self.rnn = nn.LSTM(embed_size + num_hiddens, num_hiddens, num_layers)
            _xavier_rnn(self.rnn)
        if score == "dot":
            del self.attention  # the scaled dot product has no parameters

    def forward(self, X: Tensor, state: BahdanauState) -> tuple[Tensor, BahdanauState]:
        enc_outputs, hidden, src_len = state  # (B, S, H); (L, B, H) or a pair of them
        S, H = enc_outputs.shape[1:]
        if self.score == "additive":
            keys = self.attention.W_k(enc_outputs).unsqueeze(1)  # (B, 1, S, H)
        mask = None
        if src_len is not None:
            mask = (torch.arange(S)[None, :] < src_len[:, None]).unsqueeze(1)  # (B, 1, S)
        outputs, weights = [], []
        for x in self.embedding(X.t()):  # x: (B, E)
            h_top = (hidden[0] if self.cell == "lstm" else hidden)[-1]  # (B, H): the query
            if self.score == "additive":
                query = self.attention.W_q(h_top)[:, None, None, :]  # (B, 1, 1, H)
                scores = self.attention.w_v(torch.tanh(query + keys)).squeeze(-1)  # (B, 1, S)
            else:
                scores = torch.bmm(h_top.unsqueeze(1), enc_outputs.transpose(1, 2)) / math.sqrt(H)
            if mask is not None:
                scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
            w = torch.softmax(scores, dim=-1)  # (B, 1, S)
            context = torch.bmm(w, enc_outputs)  # (B, 1, H)
            step_in = torch.cat((context.squeeze(1), x), dim=-1).unsqueeze(0)  # (1, B, H + E)
            out, hidden = self.rnn(step_in, hidden)  # (1, B, H)
            outputs.append(out)
            weights.append(w.detach())
        self._attention_weights = weights
        logits = self.dense(torch.cat(outputs, dim=0)).transpose(0, 1)  # (B, T, V)
        return logits, BahdanauState(enc_outputs, hidden, src_len)

    def reorder_state(self, state: BahdanauState, index: Tensor, *, same_sources: bool = False):
        enc_outputs, hidden, src_len = state
        if self.cell == "lstm":
            pick = tuple(t.index_select(1, index) for t in hidden)
            src = None if src_len is None else src_len.index_select(0, index)
            return BahdanauState(enc_outputs.index_select(0, index), pick, src)
        return super().reorder_state(state, index, same_sources=same_sources)


def build_variant(variant: str, src_vocab: int, tgt_vocab: int, sizes: dict) -> EncoderDecoder:
    """``library`` (the library's GRU Bahdanau model), ``gru``, ``lstm``, ``gru_dot``."""
    args = (sizes["embed_size"], sizes["num_hiddens"], sizes["num_layers"])
    if variant == "library":
        return EncoderDecoder(
            Seq2SeqEncoder(src_vocab, *args), Seq2SeqAttentionDecoder(tgt_vocab, *args)
        )
    cell, score = {"gru": ("gru", "additive"), "lstm": ("lstm", "additive"),
                   "gru_dot": ("gru", "dot")}[variant]  # fmt: skip
    encoder = LSTMEncoder(src_vocab, *args) if cell == "lstm" else Seq2SeqEncoder(src_vocab, *args)
    return EncoderDecoder(encoder, StepAttentionDecoder(tgt_vocab, *args, cell=cell, score=score))


def _train(variant: str, data, sizes: dict, epochs: int, seed: int):
    """Train quietly with the tour's settings; the same seed gives the same batches."""
    from attnkit.training.translation import TrainConfig, Trainer

    torch.manual_seed(seed)
    model = build_variant(variant, len(data.src_vocab), len(data.tgt_vocab), sizes)
    cfg = TrainConfig(epochs=epochs, progress=False, log_every=0, bleu_sentences=100,
                      eval_every=epochs, seed=seed, lr=0.01, batch_tokens=512)  # fmt: skip
    history = Trainer(model, data, cfg, arch=f"bahdanau_{variant}").fit()
    return model.eval(), history


def teacher_forced_ops(model, data, batches: int = 3) -> dict:
    """``count_ops`` of the model's teacher-forced forward on the first training batches
    (unshuffled), and each batch's shape: [batch size, source length (padded), target
    length, source tokens (the encoder packs the source: it runs on these only)]."""
    from attnkit.tour.cost import count_ops

    bos = data.tgt_vocab["<bos>"]
    flops = elementwise = 0
    shapes = []
    for b in data.batches("train", 512, shuffle=False)[:batches]:
        dec_in = torch.cat([torch.full((b.tgt.shape[0], 1), bos), b.tgt[:, :-1]], dim=1)
        c = count_ops(lambda b=b, dec_in=dec_in: model(b.src, dec_in, b.src_len))
        flops, elementwise = flops + c.flops, elementwise + c.elementwise
        shapes.append([*b.src.shape, dec_in.shape[1], int(b.src_len.sum())])
    return {"flops": flops, "elementwise": elementwise, "total": flops + elementwise,
            "batches": shapes}  # fmt: skip


def _same_as_library(data, sizes: dict) -> float:
    """Largest |logit difference| of the generic decoder (gru, additive) against the
    library's, with the library's weights loaded: 0 means the same computation."""
    lib = build_variant("library", len(data.src_vocab), len(data.tgt_vocab), sizes).eval()
    mine = build_variant("gru", len(data.src_vocab), len(data.tgt_vocab), sizes).eval()
    mine.load_state_dict(lib.state_dict())
    b = data.batches("train", 512, shuffle=False)[0]
    with torch.no_grad():
        return float(
            (lib(b.src, b.tgt, b.src_len)[0] - mine(b.src, b.tgt, b.src_len)[0]).abs().max()
        )


def _query_checks(sizes: dict) -> dict:
    """One decoder step from a random state, the weights against a computation by hand:
    the LSTM's query is h (not c), the dot score is hᵀk / √H. Float64, largest error."""
    g = torch.Generator().manual_seed(0)
    H, B, S = sizes["num_hiddens"], 3, 5
    enc = torch.randn(B, S, H, generator=g, dtype=torch.float64)  # encoder outputs
    h = torch.randn(1, B, H, generator=g, dtype=torch.float64)
    c = torch.randn(1, B, H, generator=g, dtype=torch.float64)
    X = torch.zeros(B, 1, dtype=torch.long)
    args = (10, sizes["embed_size"], H, 1)
    lstm = StepAttentionDecoder(*args, cell="lstm").double().eval()
    dot = StepAttentionDecoder(*args, score="dot").double().eval()
    att = lstm.attention
    with torch.no_grad():
        lstm(X, BahdanauState(enc, (h, c), None))
        by_hand = att.w_v(torch.tanh(att.W_q(h[-1])[:, None, :] + att.W_k(enc))).squeeze(-1)
        lstm_err = (lstm.attention_weights[0][:, 0] - torch.softmax(by_hand, -1)).abs().max()
        dot(X, BahdanauState(enc, h, None))
        by_hand = torch.einsum("bh,bsh->bs", h[-1], enc) / math.sqrt(H)
        dot_err = (dot.attention_weights[0][:, 0] - torch.softmax(by_hand, -1)).abs().max()
    return {"lstm_query_error": float(lstm_err), "dot_score_error": float(dot_err)}


@topic
def bahdanau_variants(*, small: bool = False, seed: int = 0) -> TopicResult:
    """10.4.1 and 10.4.2: GRU/additive (the book), LSTM/additive, GRU/scaled dot product,
    trained on the same pairs and batches over seeds; operations counted per batch."""
    check_args(small, seed)
    from attnkit.data.translation import load_translation_data
    from attnkit.tour.translation import RNN_SIZES

    sizes = dict(RNN_SIZES)
    pairs, epochs, seeds = (600, 3, 1) if small else (800, 6, 5)
    data = load_translation_data(None, num_pairs=pairs, seed=seed, max_len=10)
    variants = ("gru", "lstm", "gru_dot")
    bleu: dict[str, list[float]] = {v: [] for v in variants}
    loss: dict[str, list[float]] = {v: [] for v in variants}
    ops = {}
    for s in range(seed, seed + seeds):
        for v in variants:
            model, hist = _train(v, data, sizes, epochs, s)
            bleu[v].append(float(hist["val_bleu"][-1]))
            loss[v].append(float(hist["train_loss"][-1]))
            if s == seed:
                ops[v] = teacher_forced_ops(model, data)
    first_loss = math.log(len(data.tgt_vocab))  # the loss of uniform predictions
    # paired per seed, each positive when the book's GRU/additive model does better
    gru_vs_lstm = seed_summary([a - b for a, b in zip(bleu["gru"], bleu["lstm"])])
    lstm_loss_gap = seed_summary([a - b for a, b in zip(loss["lstm"], loss["gru"])])
    add_vs_dot = seed_summary([a - b for a, b in zip(bleu["gru"], bleu["gru_dot"])])
    params = {v: sum(p.numel() for p in build_variant(v, len(data.src_vocab), len(data.tgt_vocab),
                                                      sizes).parameters()) for v in variants}  # fmt: skip
    values = {
        "data": f"generated English-French pairs ({len(data.train)} training)",
        "data_zh": f"生成的英法句对（{len(data.train)} 对用于训练）",
        "epochs": epochs,
        "seeds": seeds,
        "hidden": sizes["num_hiddens"],
        "val_bleu": bleu,
        "train_loss": loss,
        "uniform_loss": first_loss,
        "lstm_loss_higher": lstm_loss_gap,
        "lstm_loss_higher_text": describe_seeds(lstm_loss_gap, " nats"),
        "mean_bleu": {v: sum(b) / len(b) for v, b in bleu.items()},
        "gru_minus_lstm": gru_vs_lstm,
        "gru_minus_lstm_text": describe_seeds(gru_vs_lstm, " BLEU"),
        "additive_minus_dot": add_vs_dot,
        "additive_minus_dot_text": describe_seeds(add_vs_dot, " BLEU"),
        "embed": sizes["embed_size"],
        "ops_per_batch": ops,
        "counted_batches": ops["gru"]["batches"],
        # what the dot score saves (W_q at every step, W_k once) and the LSTM's fourth gate
        # costs: counted, against the closed forms the test evaluates
        "dot_saving_flops": ops["gru"]["flops"] - ops["gru_dot"]["flops"],
        "lstm_extra_flops": ops["lstm"]["flops"] - ops["gru"]["flops"],
        "lstm_over_gru_flops": ops["lstm"]["flops"] / ops["gru"]["flops"],
        "dot_over_additive_flops": ops["gru_dot"]["flops"] / ops["gru"]["flops"],
        "dot_over_additive_total": ops["gru_dot"]["total"] / ops["gru"]["total"],
        "attention_params_saved": params["gru"] - params["gru_dot"],
        **_query_checks(sizes),
        "params": params,
        "generic_vs_library": _same_as_library(data, sizes),
    }
    finding = (
        f"{epochs} epochs on {values['data']}, hidden {sizes['num_hiddens']}, {seeds} seeds: "
        + ", ".join(f"{v} val BLEU {values['mean_bleu'][v]:.1f}" for v in variants)
        + f". GRU - LSTM: {values['gru_minus_lstm_text']}; additive - dot: "
        f"{values['additive_minus_dot_text']}; training loss LSTM - GRU: "
        f"{values['lstm_loss_higher_text']}. Counted per teacher-forced batch: the dot "
        f"score costs {values['dot_over_additive_flops']:.2f}x the FLOPs of the additive one "
        f"and it drops {values['attention_params_saved']} parameters; the LSTM costs "
        f"{values['lstm_over_gru_flops']:.2f}x the GRU's FLOPs."
    )
    return TopicResult("attention_bahdanau_bahdanau_variants", finding, values, {})
