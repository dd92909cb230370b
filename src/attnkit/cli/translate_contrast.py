"""``attnkit translate contrast``: contrastive evaluation of a translator on a TSV of minimal
pairs (:mod:`attnkit.inference.contrast`), with the head analysis and ablation.

    attnkit translate contrast --checkpoint runs/coref --pairs held_out.tsv
    attnkit translate contrast --checkpoint runs/tatoeba --pairs BUNDLED --json

``--pairs BUNDLED`` is the English-French set shipped with attnkit
(:func:`attnkit.data.coreference.bundled_contrast_set`).
"""

from __future__ import annotations

import argparse
import json

from attnkit.i18n import _

__all__ = ["format_report", "register_contrast", "run_contrast"]

BUNDLED = "BUNDLED"


def register_contrast(verbs) -> None:
    """Add the ``contrast`` verb to ``attnkit translate``'s sub-parsers ``verbs``."""
    c = verbs.add_parser(
        "contrast",
        help=_("score correct against contrastive translations (minimal pairs): accuracy, "
               "baselines, which head attends to the antecedent, ablation"),
    )  # fmt: skip
    c.add_argument("--checkpoint", required=True, metavar="DIR",
                   help=_("a translator checkpoint or a MarianMT folder"))  # fmt: skip
    c.add_argument("--pairs", required=True, metavar="FILE",
                   help=_("UTF-8 TSV with a header holding source, correct, contrastive "
                          "(optional: antecedent, distractor, pronoun, antecedent_target, "
                          "distractor_target, group); BUNDLED: attnkit's English-French "
                          "set"))  # fmt: skip
    c.add_argument("--json", action="store_true",
                   help=_("print every number as JSON (every row's scores included)"))  # fmt: skip
    c.add_argument("--no-heads", action="store_true",
                   help=_("skip the head analysis (attention to the antecedent)"))  # fmt: skip
    c.add_argument(
        "--no-ablation",
        action="store_true",
        help=_("skip the ablation (every head zeroed in turn, rows rescored)"),
    )
    c.add_argument(
        "--allow-unknown",
        action="store_true",
        help=_("score words the model does not know as <unk> (default: error)"),
    )
    c.add_argument("--batch-size", type=int, default=64,
                   help=_("rows scored together (default 64)"))  # fmt: skip
    c.add_argument("--device", default="cpu")
    c.add_argument("--debug", action="store_true", help=_("show tracebacks"))
    c.set_defaults(func=run_contrast)


def run_contrast(args: argparse.Namespace) -> int:
    """Score ``args.pairs`` with ``args.checkpoint``; print the report (or its JSON)."""
    from attnkit.cli.translate_trained import check_device
    from attnkit.data.coreference import bundled_contrast_set
    from attnkit.inference.contrast import evaluate_contrast
    from attnkit.inference.translator import Translator

    if args.batch_size < 1:
        raise ValueError(_("--batch-size must be at least 1, got {n}").format(n=args.batch_size))
    check_device(args.device)
    pairs = bundled_contrast_set() if args.pairs == BUNDLED else args.pairs
    translator = Translator.load(args.checkpoint, args.device)
    report = evaluate_contrast(
        translator, pairs, heads=not args.no_heads, ablation=not args.no_ablation,
        batch_size=args.batch_size, allow_unknown=args.allow_unknown,
    )  # fmt: skip
    if args.json:
        print(json.dumps(report.to_json(), ensure_ascii=False, indent=1))
    else:
        print(format_report(report, args.checkpoint))
    return 0


def _rate(rate) -> str:
    lo, hi = rate.interval
    return _("{value:.1%} ({k}/{n}), 95% interval [{low:.1%}, {high:.1%}]").format(
        value=rate.value, k=rate.k, n=rate.n, low=lo, high=hi
    )


def _kind(kind: str) -> str:
    names = {
        "encoder": _("encoder self-attention (from the pronoun)"),
        "cross": _("encoder-decoder attention (at the step choosing the pronoun)"),
        "decoder": _("decoder self-attention (at the step choosing the pronoun)"),
    }
    return names[kind]


def format_report(report, checkpoint: str = "") -> str:
    """The report in words, in the language in force."""
    lines = [
        _("{file}: {n} rows, scored by {checkpoint}").format(file=report.where, n=report.n,
                                                            checkpoint=checkpoint),
        _("score: the summed log-probability (nats) of the target's tokens and <eos>"),
        _("accuracy (correct scores higher): {rate}; ties: {ties}").format(
            rate=_rate(report.accuracy()), ties=report.ties()),
        _("mean margin, correct - contrastive: {margin:.3f} nats").format(
            margin=report.mean_margin),
        _("length-normalised (per token): {rate}; ties: {ties}").format(
            rate=_rate(report.accuracy(True)), ties=report.ties(True)),
    ]  # fmt: skip
    groups = report.groups()
    if groups:
        lines.append(_("per group:"))
        lines += [_("  {name}: {rate}").format(name=g, rate=_rate(r)) for g, r in groups.items()]
    names = {"masculine": _("always the masculine form"), "first": _("the first noun"),
             "nearest": _("the nearest noun")}  # fmt: skip
    lines.append(_("baselines (a model ignoring meaning):"))
    for key, rate in report.baselines.items():
        shown = _rate(rate) if rate.n else _("no row to judge by")
        lines.append(_("  {name}: {rate}").format(name=names[key], rate=shown))
    lines += _heads_lines(report.heads)
    lines += _ablation_lines(report.ablation, found=report.heads is not None)
    return "\n".join(lines)


def _heads_lines(heads: dict | None) -> list[str]:
    if not heads:
        return []
    lines = [_("attention to the antecedent more than to the distractor, per layer (rows) "
               "and head (columns):")]  # fmt: skip
    for kind, table in heads["kinds"].items():
        lines.append(_("  {kind}, {n} rows:").format(kind=_kind(kind), n=table["rows"]))
        for i, row in enumerate(table["cells"]):
            cells = "  ".join(f"{c['accuracy']:6.1%}" for c in row)
            lines.append(_("    layer {layer}: {cells}").format(layer=i + 1, cells=cells))
    b = heads["best"]
    lines.append(
        _("best head: {kind}, layer {layer} head {head}: {accuracy:.1%} [{low:.1%}, {high:.1%}] "
          "to the antecedent, {distractor:.1%} to the distractor (sign test p = {p:.2g}; "
          "Bonferroni over the heads: {pb:.2g})").format(
            kind=_kind(b["kind"]), layer=b["layer"], head=b["head"], accuracy=b["accuracy"],
            low=b["low"], high=b["high"], distractor=b["distractor_rate"], p=b["p_value"],
            pb=b["p_bonferroni"])
    )  # fmt: skip
    return lines


def _ablation_lines(a: dict | None, found: bool = True) -> list[str]:
    if not a:
        return []
    b, m, mm = a["best"], a["median"], a["median_margin"]
    which = _("the head found") if found else _("the costliest head")
    return [
        _("ablation (each of {n} heads zeroed in turn): {which}, {kind} layer {layer} head "
          "{head}, changes accuracy by {change:+.1%} and the mean margin by {margin:+.3f} "
          "nats").format(
            n=len(a["heads"]), which=which, kind=_kind(b["kind"]), layer=b["layer"],
            head=b["head"], change=0.0 - b["cost"], margin=0.0 - b["margin_cost"]),
        _("  the median head: accuracy {change:+.1%} (McNemar's exact test, one-sided: "
          "p = {p:.2g}), mean margin {margin:+.3f} nats (paired sign test over rows, "
          "one-sided: p = {pm:.2g})").format(
            change=0.0 - m["cost"], p=a["p_value"], margin=0.0 - mm["margin_cost"],
            pm=a["margin_p_value"]),
    ]  # fmt: skip
