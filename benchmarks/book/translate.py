"""Bahdanau attention at the book's settings: attnkit vs the book's model and loop.

Training (target tokens/s, epochs interleaved in one run, same pairs and vocabularies):
the book's ``train_seq2seq`` loop on the book's model, the same loop on attnkit's model,
and attnkit's ``Trainer`` (length-bucketed batches of ~64 sentences, fused Adam,
``clip_grad_norm_``). Decoding (sentences/s, same weights): the book's one-sentence
``predict_seq2seq`` on the book's model, ``attnkit.d2l.predict_seq2seq`` (one at a time)
and attnkit's batched greedy decoding, with their outputs compared.

    python -m benchmarks.book.translate [--data fra.txt] [--epochs 20] [--threads 1]
    python -m benchmarks.book.translate --arch transformer [--data fra.txt] [--threads 2]
"""

from __future__ import annotations

import argparse
import time

import torch

from attnkit import d2l
from attnkit.data.translation import load_translation_data
from attnkit.inference.decoding import translate
from attnkit.models.registry import build_model
from attnkit.training.translation import TrainConfig, Trainer
from benchmarks.book import bahdanau_model as book
from benchmarks.book import transformer_model as book_loop
from benchmarks.book.translate_transformer import corpus_file
from benchmarks.harness import print_table

NUM_STEPS, BATCH, LR = 10, 64, 0.005
BOOK_CONFIG = {"embed_size": 32, "num_hiddens": 32, "num_layers": 2, "dropout": 0.1}


def book_arrays(lines, vocab):
    """The book's ``build_array_nmt``: ids + <eos>, truncated/padded to NUM_STEPS."""
    rows = [vocab[line] + [vocab["<eos>"]] for line in lines]
    rows = [(r + [vocab["<pad>"]] * NUM_STEPS)[:NUM_STEPS] for r in rows]
    array = torch.tensor(rows)
    return array, (array != vocab["<pad>"]).type(torch.int32).sum(1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="fra.txt (default: the generated corpus)")
    ap.add_argument("--epochs", type=int, default=20, help="epochs timed per contender")
    ap.add_argument("--num-examples", type=int, default=600, help="pairs (the book: 600)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--arch",
        choices=["bahdanau", "transformer"],
        default="bahdanau",
        help="transformer: see benchmarks/book/translate_transformer.py",
    )
    args = ap.parse_args()
    if args.arch == "transformer":
        from benchmarks.book import translate_transformer

        translate_transformer.run(args)
        return
    torch.set_num_threads(args.threads)

    path = corpus_file(args.data, args.num_examples)
    data = load_translation_data(
        path, num_examples=args.num_examples, val_fraction=0.0, test_fraction=0.0, max_len=NUM_STEPS
    )
    pairs, src_vocab, tgt_vocab = data.train, data.src_vocab, data.tgt_vocab
    src, src_len = book_arrays([s for s, _ in pairs], src_vocab)
    tgt, tgt_len = book_arrays([t for _, t in pairs], tgt_vocab)
    dataset = torch.utils.data.TensorDataset(src, src_len, tgt, tgt_len)
    book_iter = torch.utils.data.DataLoader(dataset, BATCH, shuffle=True)

    def book_setup(net):
        net.apply(book.xavier_init_weights)
        net.train()
        return net, torch.optim.Adam(net.parameters(), lr=LR)

    torch.manual_seed(0)
    book_net, book_opt = book_setup(book.book_bahdanau(src_vocab, tgt_vocab))
    torch.manual_seed(0)
    ours_in_book_loop, ours_opt = book_setup(
        build_model("bahdanau", BOOK_CONFIG, len(src_vocab), len(tgt_vocab))
    )
    torch.manual_seed(0)
    ours = build_model("bahdanau", BOOK_CONFIG, len(src_vocab), len(tgt_vocab))
    mean_len = sum(len(s) + len(t) + 2 for s, t in pairs) / len(pairs)
    batch_tokens = int(BATCH * mean_len * 1.15)  # ~64 sentences, without padding to 10
    trainer = Trainer(
        ours,
        data,
        TrainConfig(epochs=args.epochs, lr=LR, batch_tokens=batch_tokens, progress=False),
        arch="bahdanau",
    )
    n_batches = len(data.batches("train", batch_tokens))
    loss = book_loop.MaskedSoftmaxCELoss()
    target_tokens = float(sum(len(t) + 1 for _, t in pairs))

    names = ["book", "ours_book_loop", "trainer"]
    times, tokens = dict.fromkeys(names, 0.0), dict.fromkeys(names, 0.0)
    for _ in range(args.epochs):  # interleaved: one epoch of each, in turn
        for name in names:
            t0 = time.perf_counter()
            if name == "trainer":
                trainer.train_epoch()
                n = target_tokens
            else:
                net, opt = (book_net, book_opt) if name == "book" else (ours_in_book_loop, ours_opt)
                _, n = book_loop.train_epoch_seq2seq(net, book_iter, opt, loss, tgt_vocab, "cpu")
            times[name] += time.perf_counter() - t0
            tokens[name] += n
    tps = {k: tokens[k] / times[k] for k in names}
    source = "the generated corpus" if not args.data else path
    print(f"torch {torch.__version__}, {args.threads} thread(s); {len(pairs)} pairs from {source}")
    print(f"Bahdanau, book settings {BOOK_CONFIG}, lr {LR}\n")
    print(f"training, {args.epochs} epochs each, interleaved (target tokens/s)")
    print_table(
        ["contender", "batches/epoch", "tokens/s", "ratio"],
        [
            [
                "book: train_seq2seq + its model",
                -(-len(pairs) // BATCH),
                f"{tps['book']:,.0f}",
                "1.00x",
            ],
            [
                "book's loop + attnkit's model",
                -(-len(pairs) // BATCH),
                f"{tps['ours_book_loop']:,.0f}",
                f"{tps['ours_book_loop'] / tps['book']:.2f}x",
            ],
            [
                "attnkit: Trainer + model",
                n_batches,
                f"{tps['trainer']:,.0f}",
                f"{tps['trainer'] / tps['book']:.2f}x",
            ],
        ],
    )

    # decoding with the weights the Trainer learned, in all three contenders
    book_net.load_state_dict(ours.state_dict())
    ours.eval()
    book_net.eval()
    sentences = [" ".join(s) for s, _ in pairs]
    with torch.inference_mode():
        t0 = time.perf_counter()
        book_out = [
            book_loop.predict_seq2seq(book_net, s, src_vocab, tgt_vocab, NUM_STEPS, "cpu")
            for s in sentences
        ]
        t_book = time.perf_counter() - t0
        t0 = time.perf_counter()
        single = [
            d2l.predict_seq2seq(ours, s, src_vocab, tgt_vocab, NUM_STEPS, "cpu")[0]
            for s in sentences
        ]
        t_single = time.perf_counter() - t0
        t0 = time.perf_counter()
        batched = [h.text for h in translate(ours, data, sentences, max_len=NUM_STEPS)]
        t_batched = time.perf_counter() - t0
    refs = [" ".join(t) for _, t in pairs]
    same_book = sum(a == b for a, b in zip(book_out, batched))
    same_single = sum(a == b for a, b in zip(single, batched))
    print(f"\ngreedy translation of {len(sentences)} training sentences (sentences/s)")
    print_table(
        ["contender", "sentences/s", "ratio", "outputs equal to batched", "exact matches"],
        [
            [
                "book: predict_seq2seq + its model",
                f"{len(sentences) / t_book:,.0f}",
                "1.00x",
                f"{same_book}/{len(sentences)}",
                sum(a == r for a, r in zip(book_out, refs)),
            ],
            [
                "attnkit.d2l.predict_seq2seq, one at a time",
                f"{len(sentences) / t_single:,.0f}",
                f"{t_book / t_single:.2f}x",
                f"{same_single}/{len(sentences)}",
                sum(a == r for a, r in zip(single, refs)),
            ],
            [
                "attnkit: batched greedy",
                f"{len(sentences) / t_batched:,.0f}",
                f"{t_book / t_batched:.1f}x",
                "-",
                sum(a == r for a, r in zip(batched, refs)),
            ],
        ],
    )


if __name__ == "__main__":
    main()
