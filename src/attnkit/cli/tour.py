"""``attnkit tour``: the attention chapter's arguments, run (``attnkit.tour``).

``attnkit tour --list`` names the topics and, under each, the claims its test asserts
with the value that carries each; ``attnkit tour TOPIC --out DIR`` runs one,
prints its finding and writes its figures; ``attnkit tour all`` runs every topic.
``attnkit tour`` with no topic runs the original three examples (``run_tour``: Nadaraya-
Watson, the scoring toy example, positional encoding), as ``attnkit demo --tour`` does.
"""

from __future__ import annotations

import time
from pathlib import Path

import torch

from attnkit.i18n import _

__all__ = ["register", "run_topics", "run_tour"]


def register(sub) -> None:
    p = sub.add_parser(
        "tour",
        help=_("the attention chapter's arguments as experiments (attnkit tour --list)"),
        description=_("Run the chapter's arguments: each topic prints its finding and writes "
                      "its figures. Without TOPIC: Nadaraya-Watson, scoring functions, "
                      "positional encoding."),
    )  # fmt: skip
    p.add_argument("topic", nargs="?", default=None, help=_("a topic from --list, or 'all'"))
    p.add_argument(
        "--list", action="store_true", help=_("list the topics and the claims each asserts")
    )
    p.add_argument("--out", default="runs/tour",
                   help=_("folder for the figures (default runs/tour)"))  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--small", action="store_true", help=_("small, fast sizes (as the tests)"))
    p.set_defaults(func=_main)


def _main(a) -> int:
    if a.list:
        from attnkit.tour import TOPICS

        width = max(map(len, TOPICS))
        for name, entry in TOPICS.items():
            # the topics' text is the tour's (its area of the catalog): shown translated
            print(f"{name:<{width}}  {_(entry.description)}")
            for key, claim in entry.claims:
                print(_("    asserted: {claim} [{key}]").format(claim=_(claim), key=key))
        return 0
    if a.topic is None:
        return run_tour(Path(a.out), a.seed)
    return run_topics(a.topic, Path(a.out), seed=a.seed, small=a.small)


def run_topics(topic: str, out: Path, *, seed: int = 0, small: bool = False) -> int:
    """Run ``topic`` (or every topic for ``"all"``): print findings, write figures."""
    from attnkit.tour import TOPICS, run_topic

    if not isinstance(topic, str):
        raise TypeError(_("topic must be a str, got {type}").format(type=type(topic).__name__))
    names = list(TOPICS) if topic == "all" else [topic]
    if topic != "all" and topic not in TOPICS:
        raise ValueError(_("unknown topic {topic}; choose one of: all, {topics}")
                         .format(topic=repr(topic), topics=", ".join(TOPICS)))  # fmt: skip
    t0 = time.perf_counter()
    for name in names:
        result = run_topic(name, small=small, seed=seed)
        written = result.save(out)
        result.close()
        print(_("[{name}] ({seconds:.1f} s) {finding}").format(name=name, seconds=result.seconds,
                                                              finding=result.finding))  # fmt: skip
        for p in written:
            print(f"  {p}")
    if len(names) > 1:
        print(_("{n} topics in {seconds:.1f} s").format(n=len(names),
                                                       seconds=time.perf_counter() - t0))  # fmt: skip
    return 0


def run_tour(out: Path, seed: int = 0) -> int:
    import matplotlib.pyplot as plt

    from attnkit.attention import (
        AdditiveAttention,
        DotProductAttention,
        NadarayaWatson,
        sinusoidal_table,
    )
    from attnkit.attention.kernel_regression import fit_nadaraya_watson, make_nw_data
    from attnkit.viz import figure_text, plot_curves, show_heatmaps

    with figure_text():  # the figures' words, in the language figures are drawn in
        text = {
            "truth": _("truth"), "prediction": _("prediction"),
            "training points": _("training points"),
            "nonparametric": _("Nadaraya-Watson (nonparametric), w = {w:.2f}"),
            "parametric": _("Nadaraya-Watson (parametric), w = {w:.2f}"),
            "sorted training inputs": _("sorted training inputs"),
            "sorted testing inputs": _("sorted testing inputs"),
            "Keys": _("Keys"), "Queries": _("Queries"), "col": _("col {d}"),
            "row (position)": _("row (position)"),
            "sinusoidal positional encoding": _("sinusoidal positional encoding"),
            "column (encoding dimension)": _("column (encoding dimension)"),
        }  # fmt: skip
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    figures = []
    torch.manual_seed(seed)
    data = make_nw_data(seed=seed)

    # 1. Nadaraya-Watson, non-parametric (w = 1) and parametric (learned w)
    fixed = NadarayaWatson(learnable=False, width=1.0)
    with torch.no_grad():
        y_fixed = fixed(data.x_test, data.x_train, data.y_train)
    mse_fixed = float(((y_fixed - data.y_truth) ** 2).mean())
    net, losses = fit_nadaraya_watson(data, seed=seed)
    with torch.no_grad():
        y_param = net(data.x_test, data.x_train, data.y_train)
    mse_param = float(((y_param - data.y_truth) ** 2).mean())
    for name, y, model in (("nonparametric", y_fixed, fixed), ("parametric", y_param, net)):
        fig = plot_curves(
            {text["truth"]: data.y_truth.tolist(), text["prediction"]: y.tolist()},
            xlabel="x",
            ylabel="y",
            x=data.x_test.tolist(),
            title=text[name].format(w=model.w.item()),
        )
        fig.axes[0].plot(data.x_train, data.y_train, "o", alpha=0.5, label=text["training points"])
        fig.axes[0].legend()
        p = out / f"nw_{name}.png"
        fig.savefig(p, bbox_inches="tight", dpi=120)
        figures.append(fig)
        written.append(p)
        p = out / f"nw_{name}_attention.png"
        figures.append(
            show_heatmaps(
                model.attention_weights.unsqueeze(0).unsqueeze(0),
                xlabel=text["sorted training inputs"],
                ylabel=text["sorted testing inputs"],
                path=p,
            )
        )
        written.append(p)
    print(_("Nadaraya-Watson test MSE: non-parametric {fixed:.3f}, parametric {param:.3f}")
          .format(fixed=mse_fixed, param=mse_param))  # fmt: skip
    print(_("  training loss per epoch: {losses}").format(
        losses=", ".join(f"{v:.3f}" for v in losses)))  # fmt: skip

    # 2. Scoring functions on the book's toy example
    keys = torch.ones(2, 10, 2)
    values = torch.arange(40, dtype=torch.float32).reshape(1, 10, 4).repeat(2, 1, 1)
    valid_lens = torch.tensor([2, 6])
    additive = AdditiveAttention(key_size=2, query_size=20, num_hiddens=8, dropout=0.1).eval()
    dot = DotProductAttention(dropout=0.5, record_weights=True).eval()
    with torch.no_grad():
        out_add = additive(torch.normal(0, 1, (2, 1, 20)), keys, values, valid_lens)
        out_dot = dot(torch.normal(0, 1, (2, 1, 2)), keys, values, valid_lens)
    print(_("additive attention output: {values}").format(values=out_add.squeeze(1).tolist()))
    print(_("dot-product attention output: {values}").format(values=out_dot.squeeze(1).tolist()))
    for name, module in (("additive", additive), ("dot_product", dot)):
        p = out / f"scoring_{name}.png"
        figures.append(
            show_heatmaps(
                module.attention_weights.reshape(1, 1, 2, 10),
                xlabel=text["Keys"],
                ylabel=text["Queries"],
                path=p,
            )
        )
        written.append(p)

    # 3. Positional encoding
    P = sinusoidal_table(60, 32)
    p = out / "positional_encoding.png"
    figures.append(
        plot_curves(
            {text["col"].format(d=d): P[:, d].tolist() for d in range(6, 10)},
            xlabel=text["row (position)"],
            title=text["sinusoidal positional encoding"],
            path=p,
        )
    )
    written.append(p)
    p = out / "positional_encoding_heatmap.png"
    figures.append(
        show_heatmaps(
            P.unsqueeze(0).unsqueeze(0),
            xlabel=text["column (encoding dimension)"],
            ylabel=text["row (position)"],
            figsize=(3.5, 4),
            cmap="Blues",
            path=p,
        )
    )
    written.append(p)
    for fig in figures:  # all written: do not keep them open in this process
        plt.close(fig)
    print(_("wrote {n} figures:").format(n=len(written)))
    for p in written:
        print(f"  {p}")
    return 0
