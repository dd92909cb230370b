"""Acceptance runs of the chapter 9-10 translators: the book's code on fra.txt, and the
Bahdanau model on the generated corpus.

``book``: the book's Bahdanau (and, with ``--seq2seq``, plain seq2seq) chapter code run
unchanged on ``attnkit.d2l`` (600 examples, batch 64, 10 steps, 32 hiddens, 2 layers,
dropout 0.1, Adam lr 0.005, 250 / 300 epochs), printing the book's lines for
``go .``, ``i lost .``, ``he's calm .``, ``i'm home .`` and the wall time.

``generated``: ``attnkit translate train --arch bahdanau`` on the generated corpus
(20000 pairs, embed 64, hidden 128), then test BLEU/chrF and an attention heatmap of an
adjective-noun sentence (the adjective follows the noun in French: the alignment crosses).

    python -m benchmarks.book.translate_acceptance book [--data fra.txt] [--seq2seq]
    python -m benchmarks.book.translate_acceptance generated [--epochs 20] [--out runs/acceptance]

``--data`` defaults to ``$ATTNKIT_FRA`` or ../shared/data/fra-eng/fra.txt relative to the
repository root.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch

from benchmarks.harness import SHARED_DATA, set_threads

ENGS = ["go .", "i lost .", "he's calm .", "i'm home ."]
FRAS = ["va !", "j'ai perdu .", "il est calme .", "je suis chez moi ."]


def book_run(data: str, plain: bool, heatmap: Path) -> None:
    """The chapter's code, as printed in the book, against attnkit.d2l."""
    os.environ["ATTNKIT_FRA"] = data
    from attnkit import d2l

    embed_size, num_hiddens, num_layers, dropout = 32, 32, 2, 0.1
    batch_size, num_steps = 64, 10
    lr, device = 0.005, d2l.try_gpu()
    num_epochs = 300 if plain else 250
    train_iter, src_vocab, tgt_vocab = d2l.load_data_nmt(batch_size, num_steps)
    encoder = d2l.Seq2SeqEncoder(len(src_vocab), embed_size, num_hiddens, num_layers, dropout)
    Dec = d2l.Seq2SeqDecoder if plain else d2l.Seq2SeqAttentionDecoder
    decoder = Dec(len(tgt_vocab), embed_size, num_hiddens, num_layers, dropout)
    net = d2l.EncoderDecoder(encoder, decoder)
    start = time.perf_counter()
    d2l.train_seq2seq(net, train_iter, lr, num_epochs, tgt_vocab, device)
    seconds = time.perf_counter() - start
    sep = "" if plain else " "  # the book prints two spaces before "bleu" for Bahdanau
    for eng, fra in zip(ENGS, FRAS):
        translation, dec_attention_weight_seq = d2l.predict_seq2seq(
            net, eng, src_vocab, tgt_vocab, num_steps, device, not plain
        )
        print(f"{eng} => {translation},{sep} bleu {d2l.bleu(translation, fra, k=2):.3f}")
    print(f"({'seq2seq' if plain else 'Bahdanau'}: {num_epochs} epochs in {seconds:.1f} s)")
    if not plain:
        attention_weights = torch.cat(
            [step[0][0][0] for step in dec_attention_weight_seq], 0
        ).reshape((1, 1, -1, num_steps))
        fig = d2l.show_heatmaps(
            attention_weights[:, :, :, : len(ENGS[-1].split()) + 1].cpu(),
            xlabel="Key positions",
            ylabel="Query positions",
        )
        heatmap.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(heatmap, bbox_inches="tight")
        print(f"wrote {heatmap}")


def generated_run(epochs: int, out: Path) -> None:
    from attnkit.cli import main as cli

    ck = out / "bahdanau-generated"
    start = time.perf_counter()
    argv = ["translate", "train", "--arch", "bahdanau", "--epochs", str(epochs), "--out", str(ck)]
    argv += ["--embed-size", "64", "--num-hiddens", "128", "--batch-tokens", "4096"]
    assert cli([*argv, "--no-progress", "--overwrite"]) == 0  # a fresh run each time
    print(f"(training: {time.perf_counter() - start:.0f} s)")
    assert cli(["translate", "eval", "--checkpoint", str(ck)]) == 0
    sentence = "she finds the happy boy ."
    png = out / "bahdanau-generated-heatmap.png"
    assert cli(["translate", "run", "--checkpoint", str(ck), sentence, "--heatmap", str(png)]) == 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", choices=["book", "generated"])
    default = os.environ.get("ATTNKIT_FRA") or str(SHARED_DATA / "fra-eng" / "fra.txt")
    ap.add_argument("--data", default=default, help="fra.txt for the book run")
    ap.add_argument("--seq2seq", action="store_true", help="also the plain seq2seq (300 epochs)")
    ap.add_argument("--epochs", type=int, default=20, help="epochs of the generated run")
    ap.add_argument("--out", default="runs/acceptance")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    set_threads(args.threads)
    out = Path(args.out)
    if args.run == "book":
        if not Path(args.data).exists():
            raise SystemExit(f"{args.data} not found; pass --data or set ATTNKIT_FRA")
        book_run(args.data, False, out / "book-bahdanau-heatmap.png")
        if args.seq2seq:
            book_run(args.data, True, out / "unused.png")
    else:
        generated_run(args.epochs, out)


if __name__ == "__main__":
    main()
