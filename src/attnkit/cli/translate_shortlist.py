"""``attnkit translate shortlist``: learn a vocabulary shortlist from a checkpoint's
training pairs (``attnkit.inference.shortlist``), for ``translate run/eval --shortlist``.

    attnkit translate shortlist --checkpoint runs/fr --data fra.txt --out runs/fr/shortlist.pt
    attnkit translate eval --checkpoint runs/fr --data fra.txt --shortlist runs/fr/shortlist.pt
"""

from __future__ import annotations

import argparse
from pathlib import Path

from attnkit.i18n import _

__all__ = ["register_shortlist", "run_shortlist"]


def register_shortlist(verbs) -> None:
    s = verbs.add_parser(
        "shortlist",
        help=_("learn a vocabulary shortlist from a checkpoint's training pairs (for "
               "run/eval --shortlist)"),
    )  # fmt: skip
    s.add_argument("--checkpoint", required=True, metavar="DIR")
    s.add_argument("--data", metavar="FILE", help=_("override the data file recorded in DIR"))
    s.add_argument("--per-source", type=int, default=50, metavar="K",
                   help=_("target words kept per source word (default 50)"))  # fmt: skip
    s.add_argument("--frequent", type=int, default=100, metavar="F",
                   help=_("most frequent target words kept for every batch (default 100)"))  # fmt: skip
    s.add_argument("--min-count", type=int, default=2, metavar="N",
                   help=_("pairs a source and a target word must share (default 2)"))  # fmt: skip
    s.add_argument("--out", metavar="FILE",
                   help=_("where to write it (default DIR/shortlist.pt)"))  # fmt: skip
    s.add_argument("--debug", action="store_true", help=_("show tracebacks"))
    s.set_defaults(func=run_shortlist)


def run_shortlist(args: argparse.Namespace) -> int:
    from attnkit.checkpoint import read_checkpoint_config
    from attnkit.cli.translate_trained import checkpoint_data
    from attnkit.inference.shortlist import Shortlist

    for flag, value, least in (("--per-source", args.per_source, 1),
                               ("--frequent", args.frequent, 0),
                               ("--min-count", args.min_count, 1)):  # fmt: skip
        if value < least:
            raise ValueError(_("{flag} must be at least {least}, got {n}")
                             .format(flag=flag, least=least, n=value))  # fmt: skip
    cfg = read_checkpoint_config(args.checkpoint)
    data = checkpoint_data(args.checkpoint, cfg, args.data)
    sources, targets = data.encoded("train")
    shortlist = Shortlist.learn(
        sources, targets, len(data.src_vocab), len(data.tgt_vocab),
        per_source=args.per_source, frequent=args.frequent, min_count=args.min_count,
    )  # fmt: skip
    out = Path(args.out) if args.out else Path(args.checkpoint) / "shortlist.pt"
    shortlist.save(out)
    print(_("learned from {n} training pairs: {path}").format(n=len(sources), path=out))
    src, tgt = data.encoded("val")
    if src:  # what it keeps on the validation pairs
        words, batch, cover = shortlist.coverage(src, tgt, (data.special_ids["eos"],))
        print(
            _("validation pairs: {words:.0f} target words per sentence, {batch:.0f} per 64 "
              "sentences (of {vocab}); {cover:.2%} of the references' words inside")
            .format(words=words, batch=batch, vocab=len(data.tgt_vocab), cover=cover)
        )  # fmt: skip
    return 0
