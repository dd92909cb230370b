"""Decoding speed of attnkit: greedy and beam-search sentences/s on a Transformer of the
base recipe's shape, with the decoder rows computed beside those of a search that keeps
every row of a batch until its last sentence ends.

The model: d_model 256, 4 heads, FFN 1024, 2 + 2 layers, pre-norm, 4000 ids on each side
(the ``base`` recipe's shape). It is trained for ``--train-steps`` steps of ~1500 tokens on
attnkit's generated EN-FR corpus (word level: 174 + 310 words used of the 4000 ids; test
sentences of 3-11 words), enough for sentence-like translations that end with ``<eos>``
(the share equal to the reference is printed); ``--train-steps 0`` times random weights
instead (outputs then mostly run to the step limit), ``--weights FILE`` keeps the trained
weights for reruns, and ``--checkpoint DIR`` times a trained Transformer translator on its
own test split instead (the base recipe's run on fra.txt, say). The library call is
timed: ``decoding.translate`` from English text to French text, ``--batch-size``
sentences at a time.

Decoder rows: a forward pre-hook on the decoder counts the rows of every call. Greedy
and beam search compute one row per live hypothesis (unfinished, finite log-probability)
and step, the useful rows: exactly the rows of the sentences decoded one at a time
(``tests/inference/test_one_decoding_path.py``). "Rows if kept to batch end" is what a
search that keeps every row of a batch until its last sentence ends computes (batch size
x beams x steps): attnkit's beam search before issue 25.

With ctranslate2 installed (``pip install 'attnkit[peers]'``) the same weights are also
converted (``attnkit.inference.export_ctranslate2.transformer_spec``) and timed in
float32 with the same threads and batches, from the same words to words, and the outputs
compared (greedy: the ids must be equal; beam: CTranslate2's length penalty is another
formula than attnkit's GNMT penalty, so some outputs can differ).

    python -m benchmarks.models.decode_speed [--train-steps 300] [--weights w.pt] [--rounds 3]
    python -m benchmarks.models.decode_speed --checkpoint runs/base [--limit 2000]

Numbers on a shared or busy machine are indicative only.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from attnkit.data.translation import load_translation_data
from attnkit.inference.decoding import translate
from attnkit.models.transformer import TransformerConfig, build_transformer
from benchmarks.harness import load_translator_checkpoint, print_table

V = 4000
BASE = TransformerConfig(
    d_model=256, num_heads=4, num_layers=2, d_ff=1024, dropout=0.0, pre_norm=True
)  # the base recipe's shape


def train(model, data, num_steps: int) -> dict[str, float]:
    """Teacher-forced training, ``num_steps`` steps of ~1500 tokens (Adam, warm-up): the
    seconds it took and the last loss."""
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.98))
    bos = data.tgt_vocab["<bos>"]
    model.train()
    start, steps, loss, epoch = time.perf_counter(), 0, float("nan"), 0
    while steps < num_steps:
        for batch in data.batches("train", 1500, shuffle=True, epoch=epoch):
            if steps >= num_steps:
                break
            src, src_len, tgt, tgt_len = batch.astuple()  # (B, S), (B,), (B, T), (B,)
            dec_in = torch.cat([torch.full_like(tgt[:, :1], bos), tgt[:, :-1]], dim=1)
            for group in opt.param_groups:
                group["lr"] = 2e-3 * min(1.0, (steps + 1) / 30)
            logits, _ = model(src, dec_in, src_len)  # (B, T, V)
            mask = torch.arange(tgt.shape[1])[None, :] < tgt_len[:, None]
            loss_t = torch.nn.functional.cross_entropy(logits[mask], tgt[mask])
            opt.zero_grad()
            loss_t.backward()
            opt.step()
            steps, loss = steps + 1, loss_t.item()
        epoch += 1
    return {"seconds": time.perf_counter() - start, "loss": loss}


class RowCounter:
    """Decoder rows of every call (a forward pre-hook), and the rows a search that keeps
    every row of a batch until its end computes: the first call's rows x beams, per call."""

    def __init__(self, decoder) -> None:
        self.rows = self.kept = 0
        self.beams = 1
        self._batch_rows = 0
        decoder.register_forward_pre_hook(self._hook)

    def _hook(self, module, args) -> None:
        X, state = args  # X (B', 1); state[2]: the per-block caches
        if len(state[2][0]) == 0:  # nothing decoded yet: a new batch, one row per sentence
            self._batch_rows = X.shape[0]
        self.rows += X.shape[0]
        self.kept += self._batch_rows * self.beams


def ct2_translate(ct2, data, sentences, beam, steps, batch_size):
    """The same sentences, batches and steps in CTranslate2: ids per sentence."""
    order = sorted(range(len(sentences)), key=lambda i: len(sentences[i].split()))
    out: list[list[int] | None] = [None] * len(sentences)
    for start in range(0, len(order), batch_size):
        idx = order[start : start + batch_size]
        words = [data.source_tokens(sentences[i]) for i in idx]
        res = ct2.translate_batch(
            words, beam_size=beam or 1, max_decoding_length=steps, min_decoding_length=0,
            length_penalty=0.6 if beam else 1.0, max_batch_size=batch_size,
        )  # fmt: skip
        for i, r in zip(idx, res):
            out[i] = data.tgt_vocab[r.hypotheses[0]]
    return out


def _ctranslate2(model, data, threads: int):
    """A ctranslate2.Translator of the same weights, or None when it is not installed."""
    try:
        import ctranslate2
    except ImportError:
        print("ctranslate2 is not installed (pip install 'attnkit[peers]'): attnkit only")
        return None
    from attnkit.inference.export_ctranslate2 import transformer_spec

    def padded(vocab, size):  # the vocabulary's tokens, then placeholders for unused ids
        tokens = list(vocab.idx_to_token)
        return tokens + [f"<unused{i}>" for i in range(len(tokens), size)]

    src = padded(data.src_vocab, model.encoder.vocab_size)
    spec = transformer_spec(model, src, padded(data.tgt_vocab, model.decoder.vocab_size))
    spec.validate()
    spec.optimize()
    folder = Path(tempfile.mkdtemp()) / "ct2"
    folder.mkdir()
    spec.save(str(folder))
    return ctranslate2.Translator(
        str(folder), device="cpu", compute_type="float32", inter_threads=1, intra_threads=threads
    )


def load_checkpoint_and_test_split(directory: str):
    """A trained translator and its data with the splits (as ``translate eval`` does)."""
    model, cfg, data = load_translator_checkpoint(directory)
    if cfg["arch"] != "transformer":
        raise SystemExit(f"--checkpoint {directory}: arch {cfg['arch']!r}, not a Transformer")
    what = f"checkpoint {directory} (step {cfg.get('step')}, {cfg['model_config']})"
    return model, data, what


def trained_base(args):
    """The base-shaped Transformer on the generated corpus: trained, loaded or random."""
    data = load_translation_data(None, num_pairs=args.pairs, seed=0)
    torch.manual_seed(0)
    model = build_transformer(BASE, V, V)
    what = "the base shape, random weights"
    if args.weights and Path(args.weights).is_file():
        model.load_state_dict(torch.load(args.weights, weights_only=True))
        what = f"the base shape, weights from {args.weights}"
    elif args.train_steps > 0:
        t = train(model, data, args.train_steps)
        what = (f"the base shape, trained {args.train_steps} steps on the generated corpus "
                f"({t['seconds']:.0f} s, last loss {t['loss']:.3f})")  # fmt: skip
        if args.weights:
            torch.save(model.state_dict(), args.weights)
    return model, data, what


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train-steps", type=int, default=300, help="0: random weights")
    ap.add_argument(
        "--weights", metavar="FILE", help="load the model's weights from FILE when it exists, "
        "else train and save them there (reruns time the same model)",
    )  # fmt: skip
    ap.add_argument("--pairs", type=int, default=20000, help="generated pairs (5%% test)")
    ap.add_argument("--checkpoint", metavar="DIR", help="time this trained translator on its "
                    "test split instead (the base recipe's run, say)")  # fmt: skip
    ap.add_argument("--limit", type=int, default=None, help="the first N test sentences")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--beam", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=3, help="timed rounds (median reported)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-ctranslate2", action="store_true", help="time attnkit only")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    if args.checkpoint:
        model, data, what = load_checkpoint_and_test_split(args.checkpoint)
    else:
        model, data, what = trained_base(args)
    model.eval()
    sentences = data.sources("test")[: args.limit]
    refs = data.references("test")[: args.limit]
    steps = data.max_len + 2  # translate()'s default
    print(f"model: {what}, {sum(p.numel() for p in model.parameters()):,} parameters; "
          f"{len(sentences)} test sentences, batch {args.batch_size}, {args.threads} threads, "
          f"torch {torch.__version__}")  # fmt: skip
    peer = None if args.no_ctranslate2 else _ctranslate2(model, data, args.threads)
    time_both(args, model, data, sentences, refs, steps, peer)


def time_both(args, model, data, sentences, refs, steps, peer) -> None:
    """attnkit (and CTranslate2) greedy and beam: the table."""
    counter = RowCounter(model.decoder)
    rows = []
    for beam in (None, args.beam):
        counter.beams = beam or 1

        def run(beam=beam):
            return translate(model, data, sentences, beam=beam, batch_size=args.batch_size)

        run()  # warm-up
        times, peer_times = [], []
        for _ in range(args.rounds):  # attnkit and CTranslate2 in turn
            counter.rows = counter.kept = 0
            t0 = time.perf_counter()
            hyps = run()
            times.append(time.perf_counter() - t0)
            if peer is not None:
                t0 = time.perf_counter()
                peer_ids = ct2_translate(peer, data, sentences, beam, steps, args.batch_size)
                peer_times.append(time.perf_counter() - t0)
        exact = sum(h.text == r for h, r in zip(hyps, refs)) / len(refs)
        speed = len(sentences) / statistics.median(times)
        row = [
            "greedy" if beam is None else f"beam {beam}", f"{speed:.1f}",
            f"{min(times):.2f}-{max(times):.2f}", f"{counter.rows:,}", f"{counter.kept:,}",
            f"{counter.kept / counter.rows:.1f}x", f"{exact:.0%}",
        ]  # fmt: skip
        if peer is not None:
            peer_speed = len(sentences) / statistics.median(peer_times)
            same = sum(h.ids == ids for h, ids in zip(hyps, peer_ids)) / len(hyps)
            row += [f"{peer_speed:.1f}", f"{speed / peer_speed:.2f}", f"{same:.0%}"]
        rows.append(row)
    headers = ["decoding", "attnkit sent/s", "time range s", "decoder rows (= useful)",
               "rows if kept to batch end", "fewer rows", "= reference"]  # fmt: skip
    if peer is not None:
        headers += ["CTranslate2 fp32 sent/s", "attnkit / CT2", "same ids as CT2"]
    print_table(headers, rows)
    print(f"sentences/s: medians of {args.rounds} rounds, indicative only on a shared or "
          "busy machine")  # fmt: skip


if __name__ == "__main__":
    main()
