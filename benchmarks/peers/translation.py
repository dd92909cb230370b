"""attnkit against the tools a practitioner would pick instead: training at the base recipe's
shapes, and decoding against CTranslate2 (issue 25).

    pip install 'attnkit[peers]'     # transformers, x-transformers, ctranslate2 (or pip install
                                     # transformers x-transformers ctranslate2); a peer that is
                                     # not installed is skipped with a line saying so
    python -m benchmarks.peers.translation train [--dtype bf16|fp32] [--rounds 5] [--batches recipe|large]
        [--threads 2] [--data fra.txt] [--warmup 3] [--steps 20]
    python -m benchmarks.peers.translation decode --checkpoint DIR [--limit 2000] [--beam 4] [--batch 64]
        [--threads 2] [--rounds 3] [--length-penalty 0] [--input FILE]

**train**: one training step (forward, loss with the recipe's label smoothing, backward,
clipping at the recipe's norm, fused Adam where torch has it, else foreach) of five
systems at the ``base`` recipe's shapes, read from ``attnkit.training.recipes.BASE``
(d_model 256, 4 heads, FFN 1024, 2 + 2 layers, pre-norm, joint vocabulary of 4000):

- ``attnkit``: its real step, ``Trainer.train_step`` (the engine: the task's loss under
  the recipe's precision, backward, clipping, schedule, optimizer), the model built by the
  registry from the recipe, the train config resolved as ``attnkit translate train
  --preset base`` resolves it (``--dtype`` sets its ``precision``);
- ``HF Marian eager`` / ``HF Marian sdpa``: transformers' ``MarianMTModel`` with
  ``attn_implementation`` "eager" and "sdpa". Marian is **post-norm only** (its config has
  no ``normalize_before``; every block is ``LN(x + f(x))`` and there is no final LayerNorm);
  all else is matched: sizes, ReLU, dropout 0, sinusoidal positions, embeddings scaled by
  sqrt(d), separate (untied) source, target and output embeddings as attnkit's;
- ``x-transformers``: ``XTransformer``, pre-norm with a final norm (its default), the same
  sizes, ReLU (``ff_custom_activation``), untied embeddings, sinusoidal positions
  (``scaled_sinu_pos_emb``: one learned scale), its own attention (``attn_flash`` off:
  explicit matrix products, the default); its LayerNorms have no bias and its attention
  projections none (as attnkit's);
- ``nn.Transformer``: a plain loop around ``torch.nn.Transformer`` (``norm_first``,
  ``batch_first``), embeddings scaled by sqrt(d) plus a sinusoidal table, an output layer.

The peers share one step function: trim each batch to its longest sentence, forward, the
token-mean cross-entropy over real target tokens (``ignore_index=<pad>``, the recipe's
label smoothing), backward, ``clip_grad_norm_(foreach=True)``, ``Adam(fused=True)`` at the
recipe's betas and the learning rate of the recipe's schedule at each step (as attnkit's
engine sets it: without a time budget the recipe's ``inverse_sqrt`` warm-up); bf16
is ``torch.autocast`` over forward and loss (fp32 parameters, gradients and optimizer), as
attnkit's engine does.

Batches: with ``--data fra.txt`` the recipe's own, from attnkit's pipeline as ``attnkit
translate train --preset base --tokenizer sentencepiece --data fra.txt`` makes them
(``load_translation_data``, 4000 joint SentencePiece pieces, ``batch_tokens`` 3000, about
1,600 target tokens; ``--batches large``: 6000); without ``--data``, attnkit's generated
corpus (word level, ids inside the 4000 of the vocabulary), the token budget set so that
the batches hold the same target tokens (1,600 or 3,200 on average). Every system trains
on the same ``--warmup`` + ``--steps`` batches in every round.

Rounds: ``--rounds`` interleaved rounds (A B C D E, A B C D E, ...), each system doing
``--warmup`` untimed then ``--steps`` timed steps per round; before the first round and
after each one, the machine's matrix-multiply peak: ``torch.matmul`` of two ``--peak-size``
square matrices in the run's dtype at the same thread count (the best of 3; the peak is
the best of all). Table: target tokens/s median [min-max] over rounds, the ratio to attnkit
(per round, median [min-max]; > 1: faster than attnkit), achieved GFLOP/s (the median
tokens/s x FLOPs per target token) and its % of the peak, and the trainable parameters.

FLOPs, the same count for every system (useful work only: real tokens, not padding):
per batch, with s, t the source and target lengths (``<eos>`` included) of each pair,
    6 x [ Le (sum s (4d^2 + 2dF) + sum s^2 2d)
        + Ld (sum t (6d^2 + 2dF) + sum s 2d^2 + sum t^2 2d + sum t s 2d) + sum t dV ]
(multiply-adds of the projections, FFNs, attention scores and sums and the output layer;
x2 FLOPs per multiply-add, x3 for forward + backward). Per target token this is about
6 [Ld (6d^2 + 2dF) + dV + r (Le (4d^2 + 2dF) + 2 Ld d^2)] = 17.2 + 11.0 r MFLOP, r the
source/target token ratio (26.8 MFLOP at r = 0.88, the issue's figure).

**decode**: greedy and beam search of attnkit (``Translator.translate``, the library call;
float32, and int8 with ``Translator.load(..., int8=True)``, ``attnkit.inference.int8``)
against CTranslate2 float32 and int8 on the same checkpoint (exported with
``export_ctranslate2`` into a temporary folder), from English text to French text
(normalization and SentencePiece included), ``--batch`` sentences at a time, the same
decoder steps (``Translator.decode_steps()``), ``--threads`` threads. Each engine runs in
its own process, once per round (interleaved): its import, load and translation times
are reported apart, with sentences/s of the translation and the share of outputs with
token ids identical to attnkit's. Then the command lines end to end (wall time of the
process): ``attnkit translate run --checkpoint DIR --input FILE`` against
``benchmarks/peers/ct2_translate.py`` (ctranslate2 + sentencepiece only).

Length penalty: CTranslate2 divides a hypothesis's log-probability by ``length ** a``,
attnkit by the GNMT ``((5 + length) / 6) ** a``: no value of CTranslate2's makes its
formula attnkit's. The default ``--length-penalty 0`` ranks both by the raw
log-probability (the same formula, outputs comparable); another value gives each engine
that value in its own formula (the table says so).

Sentences: the checkpoint's test split (its data reloaded with its recorded arguments and
tokenizer, as ``attnkit translate eval`` does), the first ``--limit``; or ``--input FILE``.

Numbers on a shared or busy machine are indicative only.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness import matmul_peak, print_table, spread

INSTALL = "pip install 'attnkit[peers]' (or pip install transformers x-transformers ctranslate2)"
TARGET_TOKENS = {"recipe": 1600, "large": 3200}  # generated batches: mean target tokens


def _have(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


# =============================================================================== train


@dataclass
class System:
    """A contender: its step (one batch -> the loss tensor) and what the table says."""

    name: str
    step: Any
    params: int
    note: str = ""
    rates: list[float] = field(default_factory=list)  # target tokens/s, one per round
    last_loss: float = math.nan


def step_flops(src_len, tgt_len, d: int, ff: int, v_tgt: int, le: int, ld: int) -> float:
    """Useful FLOPs of one training step (forward + backward) of a batch (see the docstring)."""
    s, t = src_len.double(), tgt_len.double()
    enc = le * (s.sum() * (4 * d * d + 2 * d * ff) + (s * s).sum() * 2 * d)
    dec = ld * (
        t.sum() * (6 * d * d + 2 * d * ff)
        + s.sum() * 2 * d * d
        + (t * t).sum() * 2 * d
        + (t * s).sum() * 2 * d
    )
    return float(6 * (enc + dec + t.sum() * d * v_tgt))


def _sinusoids(max_len: int, d: int):
    import torch

    pos = torch.arange(max_len, dtype=torch.float32)[:, None]
    div = torch.pow(10000.0, torch.arange(0, d, 2, dtype=torch.float32) / d)
    table = torch.zeros(max_len, d)
    table[:, 0::2], table[:, 1::2] = torch.sin(pos / div), torch.cos(pos / div)
    return table


def _adam(params, lr: float, betas: tuple[float, float]):
    import torch

    try:
        return torch.optim.Adam(params, lr=lr, betas=betas, fused=True)
    except (RuntimeError, TypeError):
        return torch.optim.Adam(params, lr=lr, betas=betas, foreach=True)


def peer_step(model, forward, *, pad: int, bos: int, smoothing: float, clip: float | None,
              lr, betas: tuple[float, float], bf16: bool):  # fmt: skip
    """The peers' training step on a ``TranslationBatch``: trim, forward, loss, backward,
    clip, the learning rate of the step (``lr(step)``), Adam. ``forward(src, src_len,
    dec_in) -> logits (B, T, V)``."""
    import torch
    import torch.nn.functional as F

    params = [p for p in model.parameters() if p.requires_grad]
    opt = _adam(params, lr(1), betas)
    done = [0]  # optimizer steps
    autocast = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if bf16 else None

    def step(batch):
        src, src_len, tgt, tgt_len = batch.astuple()
        src, tgt = src[:, : int(src_len.max())], tgt[:, : int(tgt_len.max())]
        dec_in = torch.cat([torch.full_like(tgt[:, :1], bos), tgt[:, :-1]], dim=1)
        with autocast() if autocast else contextlib.nullcontext():
            logits = forward(src, src_len, dec_in)
            loss = F.cross_entropy(
                logits.reshape(-1, logits.shape[-1]), tgt.reshape(-1),
                ignore_index=pad, label_smoothing=smoothing,
            )  # fmt: skip
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if clip is not None:
            torch.nn.utils.clip_grad_norm_(params, clip, foreach=True)
        done[0] += 1
        for group in opt.param_groups:
            group["lr"] = lr(done[0])
        opt.step()
        return loss.detach()

    model.train()
    return step


def _n_params(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def build_marian(attn: str, shape: dict, v_src: int, v_tgt: int, pad: int, bos: int, eos: int):
    from transformers import MarianConfig, MarianMTModel

    config = MarianConfig(
        vocab_size=v_src, decoder_vocab_size=v_tgt, d_model=shape["d"],
        encoder_layers=shape["le"], decoder_layers=shape["ld"],
        encoder_attention_heads=shape["heads"], decoder_attention_heads=shape["heads"],
        encoder_ffn_dim=shape["ff"], decoder_ffn_dim=shape["ff"], activation_function="relu",
        dropout=0.0, attention_dropout=0.0, activation_dropout=0.0,
        max_position_embeddings=shape["max_len"], scale_embedding=True,
        pad_token_id=pad, decoder_start_token_id=bos, eos_token_id=eos, forced_eos_token_id=None,
        share_encoder_decoder_embeddings=False, tie_word_embeddings=False,
        attn_implementation=attn,
    )  # fmt: skip
    model = MarianMTModel(config)
    if model.config._attn_implementation != attn:
        raise RuntimeError(f"MarianMTModel took attention {model.config._attn_implementation!r}")

    def forward(src, src_len, dec_in):
        import torch

        mask = (torch.arange(src.shape[1])[None, :] < src_len[:, None]).long()
        return model(
            input_ids=src, attention_mask=mask, decoder_input_ids=dec_in, use_cache=False
        ).logits

    return model, forward


def build_xtransformer(shape: dict, v_src: int, v_tgt: int):
    from torch import nn
    from x_transformers import XTransformer

    model = XTransformer(
        dim=shape["d"], tie_token_emb=False,
        enc_num_tokens=v_src, enc_depth=shape["le"], enc_heads=shape["heads"],
        enc_max_seq_len=shape["max_len"], enc_scaled_sinu_pos_emb=True,
        enc_ff_mult=shape["ff"] // shape["d"], enc_ff_custom_activation=nn.ReLU(),
        dec_num_tokens=v_tgt, dec_depth=shape["ld"], dec_heads=shape["heads"],
        dec_max_seq_len=shape["max_len"], dec_scaled_sinu_pos_emb=True,
        dec_ff_mult=shape["ff"] // shape["d"], dec_ff_custom_activation=nn.ReLU(),
    )  # fmt: skip

    def forward(src, src_len, dec_in):
        import torch

        mask = torch.arange(src.shape[1])[None, :] < src_len[:, None]  # True: a real token
        enc = model.encoder(src, mask=mask, return_embeddings=True)
        return model.decoder.net(dec_in, context=enc, context_mask=mask)

    return model, forward


def build_plain(shape: dict, v_src: int, v_tgt: int):
    import warnings

    import torch
    from torch import nn

    class PlainTransformer(nn.Module):
        """Embeddings x sqrt(d) + sinusoids, ``nn.Transformer`` (pre-norm), output layer."""

        def __init__(self) -> None:
            super().__init__()
            d = shape["d"]
            self.src_emb, self.tgt_emb = nn.Embedding(v_src, d), nn.Embedding(v_tgt, d)
            self.register_buffer("pe", _sinusoids(shape["max_len"], d), persistent=False)
            with warnings.catch_warnings():  # no nested tensors with norm_first: we know
                warnings.simplefilter("ignore")
                self.core = nn.Transformer(
                    d, shape["heads"], shape["le"], shape["ld"], shape["ff"], dropout=0.0,
                    batch_first=True, norm_first=True,
                )  # fmt: skip
            self.out = nn.Linear(d, v_tgt)
            self.scale = math.sqrt(d)

        def forward(self, src, src_len, dec_in):
            S, T = src.shape[1], dec_in.shape[1]
            pad = torch.arange(S)[None, :] >= src_len[:, None]  # True: padding
            causal = torch.ones(T, T, dtype=torch.bool).triu(1)  # True: not allowed
            x = self.src_emb(src) * self.scale + self.pe[:S]
            y = self.tgt_emb(dec_in) * self.scale + self.pe[:T]
            h = self.core(
                x, y, tgt_mask=causal, src_key_padding_mask=pad,
                memory_key_padding_mask=pad, tgt_is_causal=True,
            )  # fmt: skip
            return self.out(h)

    model = PlainTransformer()
    return model, model


def train_setup(args: argparse.Namespace):
    """(data, the batches, vocab sizes, the resolved train config, the recipe's model config,
    where the batches come from)."""
    from attnkit.data.translation import load_translation_data
    from attnkit.training.recipes import BASE, resolve

    train_flags = {"precision": args.dtype, "progress": False}
    if args.data:
        data_flags = {"data": args.data, "tokenizer": "sentencepiece"}
    else:
        data_flags = {"num_pairs": args.pairs, "val_fraction": 0.0, "test_fraction": 0.0}
    resolved = resolve(
        "translate", arch="transformer", preset="base",
        flags={"train": train_flags, "data": data_flags},
    )  # fmt: skip
    config, data_args = resolved.train, dict(resolved.data)
    t0 = time.perf_counter()
    data = load_translation_data(**data_args)
    loaded = time.perf_counter() - t0
    need = args.warmup + args.steps
    if args.data:
        budget = config.batch_tokens * (2 if args.batches == "large" else 1)
        v_src, v_tgt = len(data.src_vocab), len(data.tgt_vocab)
        source = f"{args.data}: the recipe's batches (batch_tokens {budget})"
    else:
        budget = config.batch_tokens
        want = TARGET_TOKENS[args.batches]
        for _ in range(3):  # scale the token budget to the target tokens wanted
            batches = data.batches("train", budget, shuffle=True, seed=0)
            mean = statistics.mean(b.num_tgt_tokens for b in batches[:200])
            budget = max(budget * want // max(int(mean), 1), 64)
        v_src = v_tgt = BASE.data["vocab_size"]
        source = (
            f"generated corpus ({args.pairs:,} pairs, word level, ids < {v_tgt}), "
            f"batch_tokens {budget} for ~{want:,} target tokens"
        )
    import dataclasses

    config = dataclasses.replace(config, batch_tokens=budget)
    batches = data.batches("train", budget, shuffle=True, seed=config.seed or 0)
    if len(batches) < need:
        raise ValueError(f"{len(batches)} batches; --warmup + --steps need {need}")
    source += f"; data loaded in {loaded:.1f} s"
    return data, batches[:need], v_src, v_tgt, config, BASE.model, source


def run_train(args: argparse.Namespace) -> int:
    import dataclasses

    import torch

    from attnkit.models.registry import build_model
    from attnkit.training.optim import lr_at
    from attnkit.training.translation import Trainer

    torch.set_num_threads(args.threads)
    data, batches, v_src, v_tgt, config, model_config, source = train_setup(args)
    mc = dataclasses.asdict(model_config)
    shape = {
        "d": mc["d_model"], "heads": mc["num_heads"], "ff": mc["d_ff"], "le": mc["num_layers"],
        "ld": mc["num_layers"], "max_len": 256,
    }  # fmt: skip
    pad, bos, eos = (data.tgt_vocab[t] for t in ("<pad>", "<bos>", "<eos>"))
    if data.src_vocab["<pad>"] != pad:
        raise ValueError("the source and target vocabularies put <pad> at different ids")
    longest = max(max(int(b.src_len.max()), int(b.tgt_len.max())) for b in batches)
    shape["max_len"] = max(shape["max_len"], longest + 1)
    bf16 = args.dtype == "bf16"

    def lr(step: int) -> float:  # the recipe's schedule, as attnkit's engine sets it
        return lr_at(config.schedule, config.lr, config.warmup_steps, step, 0.0)

    common = dict(pad=pad, bos=bos, smoothing=config.label_smoothing, clip=config.clip,
                  lr=lr, betas=(config.beta1, config.beta2), bf16=bf16)  # fmt: skip

    systems: list[System] = []
    torch.manual_seed(0)
    model = build_model("transformer", mc, v_src, v_tgt)
    trainer = Trainer(model, data, config, arch="transformer", model_config=mc)

    def attnkit_step(batch):
        loss_sum, tokens, _ = trainer.train_step(batch)
        return loss_sum / tokens

    systems.append(System("attnkit", attnkit_step, _n_params(model),
                          f"pre-norm; its engine's step ({config.precision})"))  # fmt: skip
    if _have("transformers"):
        for attn in ("eager", "sdpa"):
            torch.manual_seed(0)
            model, fwd = build_marian(attn, shape, v_src, v_tgt, pad, bos, eos)
            step = peer_step(model, fwd, **common)
            systems.append(
                System(f"HF Marian {attn}", step, _n_params(model), "post-norm (its only option)")
            )
    else:
        print(f"skipped HF transformers (MarianMTModel): not installed; {INSTALL}")
    if _have("x_transformers"):
        torch.manual_seed(0)
        model, fwd = build_xtransformer(shape, v_src, v_tgt)
        note = "pre-norm; LayerNorm without bias; own attention"
        systems.append(System("x-transformers", peer_step(model, fwd, **common),
                              _n_params(model), note))  # fmt: skip
    else:
        print(f"skipped x-transformers (XTransformer): not installed; {INSTALL}")
    torch.manual_seed(0)
    model, fwd = build_plain(shape, v_src, v_tgt)
    systems.append(System("nn.Transformer", peer_step(model, fwd, **common), _n_params(model),
                          "pre-norm; attention biases"))  # fmt: skip

    warm, timed = batches[: args.warmup], batches[args.warmup :]
    tgt_tokens = sum(b.num_tgt_tokens for b in timed)
    src_tokens = sum(int(b.src_len.sum()) for b in timed)
    padded = sum(b.src.shape[0] * (int(b.src_len.max()) + int(b.tgt_len.max())) for b in timed)
    flops = sum(
        step_flops(b.src_len, b.tgt_len, shape["d"], shape["ff"], v_tgt, shape["le"], shape["ld"])
        for b in timed
    )
    per_token = flops / tgt_tokens
    r = src_tokens / tgt_tokens
    d, ff, le, ld = shape["d"], shape["ff"], shape["le"], shape["ld"]
    approx = 6 * (ld * (6 * d * d + 2 * d * ff) + d * v_tgt + r * (le * (4 * d * d + 2 * d * ff)
                                                                  + 2 * ld * d * d))  # fmt: skip
    print(
        f"shapes (attnkit.training.recipes.BASE): d_model {d}, {shape['heads']} heads, FFN {ff}, "
        f"{le} + {ld} layers, pre-norm, vocabulary {v_src}/{v_tgt}; {args.dtype}, "
        f"{args.threads} threads, torch {torch.__version__}"
    )
    print(f"batches: {source}")
    print(
        f"timed batches: {len(timed)} x {args.rounds} rounds (+ {len(warm)} warm-up each), "
        f"{tgt_tokens / len(timed):,.0f} target tokens and {src_tokens / len(timed):,.0f} source "
        f"tokens per batch on average (source/target r = {r:.3f}), "
        f"{1 - (src_tokens + tgt_tokens) / padded:.1%} padding"
    )
    print(
        f"FLOPs per target token: {per_token / 1e6:.2f} M (exact, over the timed batches; "
        f"6 x [Le(Σs(4d²+2dF) + Σs²·2d) + Ld(Σt(6d²+2dF) + Σs·2d² + Σt²·2d + Σts·2d) + Σt·dV] "
        f"/ Σt); without the attention scores: 6[Ld(6d²+2dF) + dV + r(Le(4d²+2dF) + 2Ld·d²)] "
        f"= {approx / 1e6:.2f} M"
    )
    dtype = torch.bfloat16 if bf16 else torch.float32
    peaks = [matmul_peak(dtype, args.peak_size)]  # and after every round
    for rnd in range(args.rounds):
        for system in systems:
            for batch in warm:
                system.step(batch)
            t0 = time.perf_counter()
            for batch in timed:
                loss = system.step(batch)
            seconds = time.perf_counter() - t0
            system.rates.append(tgt_tokens / seconds)
            system.last_loss = float(loss)
        peaks.append(matmul_peak(dtype, args.peak_size))
        line = ", ".join(f"{s.name} {s.rates[-1]:,.0f}" for s in systems)
        print(f"round {rnd + 1}/{args.rounds}: target tokens/s {line}; matmul {peaks[-1]:.0f} "
              "GFLOP/s", flush=True)  # fmt: skip
    peak = max(peaks)
    print(
        f"\nmatrix-multiply peak: {peak:.0f} GFLOP/s ({args.dtype} torch.matmul {args.peak_size}"
        f"x{args.peak_size}, {args.threads} threads, best of {3 * len(peaks)}; median of the "
        f"measurements' best {statistics.median(peaks):.0f})\n"
    )
    base = systems[0].rates
    rows = []
    for s in systems:
        ratios = [x / b for x, b in zip(s.rates, base)]
        gflops = statistics.median(s.rates) * per_token / 1e9
        rows.append([
            s.name, f"{s.params:,}", spread(s.rates, "{:,.0f}"), spread(ratios, "{:.2f}x"),
            f"{gflops:.0f}", f"{gflops / peak:.0%}", f"{s.last_loss:.3f}", s.note,
        ])  # fmt: skip
    print_table(
        ["system", "params", "target tokens/s", "vs attnkit", "GFLOP/s", "% of peak",
         "last loss", "notes"], rows,
    )  # fmt: skip
    print(
        f"\n{args.dtype}, {args.threads} threads, {args.rounds} interleaved rounds of "
        f"{args.warmup} + {len(timed)} steps; median [min-max] over rounds; 'vs attnkit' > 1: "
        "faster than attnkit; GFLOP/s from the median and the FLOP count above; last loss: "
        "the training loss of the last timed batch (label smoothing included), a check that "
        "each system trains (same batches and schedule, different initializations)"
    )
    return 0


# =============================================================================== decode


def _worker(args: argparse.Namespace) -> int:
    """One engine in its own process: import, load, translate; times and outputs as JSON."""
    t0 = time.perf_counter()
    sentences = json.loads(Path(args.input).read_text(encoding="utf-8"))
    out: dict[str, Any] = {}
    if args.engine in ("attnkit", "attnkit-int8"):
        import torch

        from attnkit.inference.translator import Translator

        out["import_s"] = time.perf_counter() - t0
        torch.set_num_threads(args.threads)
        t0 = time.perf_counter()
        translator = Translator.load(args.model, int8=args.engine == "attnkit-int8")
        out["load_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        hyps = translator.translate(
            sentences, beam=args.beam if args.beam > 1 else None,
            length_penalty=args.length_penalty, batch_size=args.batch,
        )  # fmt: skip
        out["translate_s"] = time.perf_counter() - t0
        out["ids"] = [h.ids for h in hyps]
        out["texts"] = [h.text for h in hyps]
    else:
        from benchmarks.peers import ct2_translate as ct2

        normalize = ct2.normalizer()
        import ctranslate2  # noqa: F401
        import sentencepiece  # noqa: F401

        out["import_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        translator, sp_src, sp_tgt = ct2.load(args.model, args.threads)
        out["load_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        tokens = ct2.translate(
            translator, sp_src, sentences, normalize, beam=args.beam,
            length_penalty=args.length_penalty, batch_size=args.batch,
            max_decoding_length=args.steps,
        )  # fmt: skip
        texts = [sp_tgt.decode(t) for t in tokens]
        out["translate_s"] = time.perf_counter() - t0
        out["tokens"], out["texts"] = tokens, texts
    Path(args.out).write_text(json.dumps(out, ensure_ascii=False), encoding="utf-8")
    return 0


@dataclass
class Engine:
    name: str
    engine: str  # "attnkit" or "ct2"
    model: str  # checkpoint or CT2 folder
    beam: int
    runs: list[dict] = field(default_factory=list)


def _decode_sentences(args: argparse.Namespace):
    """(translator, sentences, where from)."""
    from attnkit.data.subword import SubwordTokenizer
    from attnkit.data.translation import load_translation_data
    from attnkit.inference.translator import Translator

    translator = Translator.load(args.checkpoint)
    if args.input:
        lines = Path(args.input).read_text(encoding="utf-8").splitlines()
        sentences = [s for s in lines if s.strip()][: args.limit]
        return translator, sentences, f"{args.input}, first {len(sentences)} lines"
    cfg = translator.config
    data_args = dict(cfg.get("data_args") or {})
    record = (cfg.get("data") or {}).get("tokenizer")
    if record is not None:
        data_args["subword"] = SubwordTokenizer.load(args.checkpoint, record)
    data = load_translation_data(**data_args)
    sentences = data.sources("test")[: args.limit]
    return translator, sentences, f"the checkpoint's test split, {len(sentences)} sentences"


def run_decode(args: argparse.Namespace) -> int:
    """The decode command: the exports and inputs live in a temporary folder, removed after."""
    translator, sentences, where = _decode_sentences(args)
    if not sentences:
        raise ValueError("no sentences to translate")
    tmp = Path(tempfile.mkdtemp(prefix="peers-decode-"))
    try:
        return _decode(args, translator.decode_steps(), sentences, where, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _decode(args: argparse.Namespace, steps: int, sentences: list[str], where: str, tmp: Path):
    beam = args.beam
    lp = args.length_penalty
    have_ct2 = _have("ctranslate2")
    engines = [
        Engine("attnkit greedy", "attnkit", args.checkpoint, 1),
        Engine("attnkit int8 greedy", "attnkit-int8", args.checkpoint, 1),
    ]
    vocab: list[str] = []
    if have_ct2:
        from attnkit.inference.export_ctranslate2 import export_ctranslate2

        for quant, label in ((None, "fp32"), ("int8", "int8")):
            t0 = time.perf_counter()
            try:
                folder = export_ctranslate2(
                    args.checkpoint, tmp / f"ct2-{label}", quantization=quant
                )
            except ValueError as e:  # not a subword Transformer translator
                raise SystemExit(f"peers.py decode: {e}") from None
            print(f"exported {args.checkpoint} to CTranslate2 {label} in "
                  f"{time.perf_counter() - t0:.1f} s: {folder}")  # fmt: skip
            engines.append(Engine(f"CT2 {label} greedy", "ct2", str(folder), 1))
        names = ("shared_vocabulary.json", "target_vocabulary.json")
        vocab_file = next(tmp / "ct2-fp32" / n for n in names if (tmp / "ct2-fp32" / n).is_file())
        vocab = json.loads(vocab_file.read_text(encoding="utf-8"))
    else:
        print(f"skipped CTranslate2: not installed; {INSTALL}")
    if beam > 1:
        engines += [Engine(e.name.replace("greedy", f"beam {beam}"), e.engine, e.model, beam)
                    for e in list(engines)]  # fmt: skip
    inputs = tmp / "sentences.json"
    inputs.write_text(json.dumps(sentences, ensure_ascii=False), encoding="utf-8")
    text_input = tmp / "input.txt"
    text_input.write_text("".join(s + "\n" for s in sentences), encoding="utf-8")
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    print(
        f"sentences: {where}; batch {args.batch}, {args.threads} threads, {steps} decoder steps "
        f"at most, length penalty {lp:g}, {args.rounds} interleaved rounds"
    )
    for rnd in range(args.rounds):
        for e in engines:
            out = tmp / "out.json"
            cmd = [sys.executable, "-m", "benchmarks.peers.translation", "_worker", "--engine", e.engine,
                   "--model", e.model, "--input", str(inputs), "--out", str(out),
                   "--beam", str(e.beam), "--batch", str(args.batch), "--threads",
                   str(args.threads), "--steps", str(steps), "--length-penalty", str(lp)]  # fmt: skip
            t0 = time.perf_counter()
            subprocess.run(cmd, check=True, env=env)
            run = json.loads(out.read_text(encoding="utf-8"))
            run["wall_s"] = time.perf_counter() - t0
            if "tokens" in run:  # CT2's pieces -> ids of the shared/target vocabulary
                index = {t: i for i, t in enumerate(vocab)}
                run["ids"] = [[index.get(p, -1) for p in hyp] for hyp in run["tokens"]]
            e.runs.append(run)
        line = ", ".join(f"{e.name} {len(sentences) / e.runs[-1]['translate_s']:,.1f}"
                         for e in engines)  # fmt: skip
        print(f"round {rnd + 1}/{args.rounds}: sentences/s {line}", flush=True)
    n = len(sentences)
    rows = []
    for e in engines:
        ref = next(x for x in engines if x.engine == "attnkit" and x.beam == e.beam)
        rates = [n / r["translate_s"] for r in e.runs]
        ratios = [n / r["translate_s"] / (n / q["translate_s"]) for r, q in zip(e.runs, ref.runs)]
        ids, ref_ids = e.runs[-1]["ids"], ref.runs[-1]["ids"]
        same = sum(a == b for a, b in zip(ids, ref_ids))
        texts = sum(a == b for a, b in zip(e.runs[-1]["texts"], ref.runs[-1]["texts"]))
        rows.append([
            e.name,
            spread([r["import_s"] for r in e.runs], "{:.2f}"),
            spread([r["load_s"] for r in e.runs], "{:.2f}"),
            spread([r["translate_s"] for r in e.runs], "{:.2f}"),
            spread(rates, "{:,.1f}"),
            spread(ratios, "{:.2f}x"),
            "(reference)" if e is ref else f"{same}/{n} ({same / n:.1%})",
            "(reference)" if e is ref else f"{texts}/{n}",
            spread([r["wall_s"] for r in e.runs], "{:.2f}"),
        ])  # fmt: skip
    print("\nlibrary calls, each engine in its own process (seconds; median [min-max]):")
    print_table(
        ["engine", "import s", "load s", "translate s", "sentences/s", "vs attnkit",
         "ids = attnkit's", "texts = attnkit's", "process wall s"], rows,
    )  # fmt: skip
    if beam > 1 and have_ct2:
        if lp == 0:
            print(f"beam {beam}: both engines rank by the raw log-probability (length penalty 0 "
                  "in both formulas: the same ranking)")  # fmt: skip
        else:
            print(f"beam {beam}: attnkit divides by the GNMT ((5 + L) / 6) ** {lp:g}, CTranslate2 "
                  f"by L ** {lp:g}: different formulas, so some outputs can differ")  # fmt: skip
    _cli_table(args, engines, text_input, steps, env, have_ct2)
    return 0


def _attnkit_command() -> list[str]:
    script = Path(sys.executable).with_name("attnkit")
    return [str(script)] if script.is_file() else [sys.executable, "-m", "attnkit"]


def _cli_table(args, engines, text_input: Path, steps: int, env: dict, have_ct2: bool) -> None:
    """The command lines end to end: wall time of the process, interleaved rounds."""
    lp, beam = args.length_penalty, args.beam
    ct2_folder = next((e.model for e in engines if e.name == "CT2 fp32 greedy"), None)
    commands: dict[str, list[str]] = {}
    searches = [(1, "greedy")] + ([(beam, f"beam {beam}")] if beam > 1 else [])
    for k, label in searches:
        extra = ["--beam", str(k), "--length-penalty", str(lp)] if k > 1 else []
        commands[f"attnkit {label}"] = [
            *_attnkit_command(), "translate", "run", "--checkpoint", args.checkpoint,
            "--input", str(text_input), "--batch-size", str(args.batch), *extra,
        ]  # fmt: skip
        if have_ct2:
            commands[f"CT2 fp32 {label}"] = [
                sys.executable, "-m", "benchmarks.peers.ct2_translate", ct2_folder,
                "--input", str(text_input), "--batch-size", str(args.batch),
                "--threads", str(args.threads), "--max-decoding-length", str(steps), *extra,
            ]  # fmt: skip
    walls: dict[str, list[float]] = {name: [] for name in commands}
    outputs: dict[str, list[str]] = {}
    for _ in range(args.rounds):
        for name, cmd in commands.items():
            t0 = time.perf_counter()
            done = subprocess.run(cmd, check=True, env=env, capture_output=True, text=True)
            walls[name].append(time.perf_counter() - t0)
            outputs[name] = done.stdout.splitlines()
    n = len(text_input.read_text(encoding="utf-8").splitlines())
    rows = []
    for name in commands:
        ref = f"attnkit {name.split(' ', 2)[-1]}" if name.startswith("CT2") else name
        ratios = [b / a for a, b in zip(walls[name], walls[ref])]
        same = sum(a == b for a, b in zip(outputs[name], outputs[ref]))
        shown = "attnkit translate run" if name.startswith("attnkit") else "ct2_translate.py"
        rows.append([
            name, spread(walls[name], "{:.2f}"),
            spread([n / w for w in walls[name]], "{:,.1f}"), spread(ratios, "{:.2f}x"),
            "(reference)" if name == ref else f"{same}/{n}", shown,
        ])  # fmt: skip
    print(f"\ncommand lines end to end ({n} sentences, wall seconds of the process, "
          f"OMP_NUM_THREADS={args.threads}):")  # fmt: skip
    print_table(
        ["command", "wall s", "sentences/s", "vs attnkit", "lines = attnkit's", "command"], rows
    )


# =============================================================================== main


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = ap.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="training steps at the base recipe's shapes")
    t.add_argument("--dtype", choices=["bf16", "fp32"], default="bf16")
    t.add_argument("--rounds", type=int, default=5, help="interleaved rounds")
    t.add_argument("--batches", choices=["recipe", "large"], default="recipe",
                   help="~1,600 target tokens a batch (the recipe's) or ~3,200")  # fmt: skip
    t.add_argument("--threads", type=int, default=2)
    t.add_argument("--data", metavar="FILE", help="fra.txt (default: the generated corpus)")
    t.add_argument("--warmup", type=int, default=3, help="untimed steps per system and round")
    t.add_argument("--steps", type=int, default=20, help="timed steps per system and round")
    t.add_argument("--pairs", type=int, default=20000, help="generated pairs (without --data)")
    t.add_argument("--peak-size", type=int, default=2048, help="matmul size of the peak")
    t.set_defaults(func=run_train)
    d = sub.add_parser("decode", help="attnkit vs CTranslate2 on a checkpoint")
    d.add_argument("--checkpoint", required=True, metavar="DIR")
    d.add_argument("--limit", type=int, default=2000, help="sentences (the first N)")
    d.add_argument("--beam", type=int, default=4, help="beam size (1: greedy only)")
    d.add_argument("--batch", type=int, default=64, help="sentences per batch")
    d.add_argument("--threads", type=int, default=2)
    d.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    d.add_argument("--length-penalty", type=float, default=0.0,
                   help="beam: attnkit's GNMT alpha and CTranslate2's exponent (0: the same)")  # fmt: skip
    d.add_argument(
        "--input", metavar="FILE", help="sentences (one a line) instead of the test split"
    )
    d.set_defaults(func=run_decode)
    w = sub.add_parser("_worker", help="(internal) one engine of decode in its own process")
    w.add_argument("--engine", choices=["attnkit", "attnkit-int8", "ct2"], required=True)
    w.add_argument("--model", required=True)
    w.add_argument("--input", required=True)
    w.add_argument("--out", required=True)
    w.add_argument("--beam", type=int, default=1)
    w.add_argument("--batch", type=int, default=64)
    w.add_argument("--threads", type=int, default=2)
    w.add_argument("--steps", type=int, required=True)
    w.add_argument("--length-penalty", type=float, default=0.0)
    w.set_defaults(func=_worker)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    for name in ("rounds", "steps", "threads", "limit", "beam", "batch"):
        if getattr(args, name, 1) < 1:
            raise SystemExit(f"--{name} must be at least 1")
    if getattr(args, "warmup", 0) < 0:
        raise SystemExit("--warmup must be 0 or more")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
