"""Exercise 8.6.1 of d2l 0.17 (1.0's 9.6.1): making the concise RNN (``nn.RNN``) overfit:
many hidden units, little text."""

from __future__ import annotations

from attnkit.exercises.glossary import data_label
from attnkit.exercises.rnn.lm import char_data, evaluate_perplexity, make_lm, train_char_lm
from attnkit.i18n import gettext
from attnkit.tour.base import TopicResult, topic

__all__ = ["overfit_gap"]


@topic
def overfit_gap(*, small: bool = False, seed: int = 0) -> TopicResult:
    """``nn.RNN`` language models with 64 and with 16 hidden units, trained with Adam
    (lr 0.01, clipping θ = 1) on only 2,000 characters: training and held-out perplexity
    every ``chunk`` steps; the gap at the end and how far held-out perplexity rose from
    its lowest point."""
    from attnkit.viz import plot_curves

    chunks, chunk = (5, 20) if small else (10, 25)
    name, train, held, vocab = char_data(small, 30000)
    little, held = train[:2000], held[:2000]
    curves, summary = {}, {}
    for hidden in (64, 16):
        model = make_lm(len(vocab), hidden, seed=seed)
        tr, te = [], []
        for c in range(chunks):  # training continues; each chunk reshuffles the offset
            model.train()
            train_char_lm(model, little, steps=chunk, lr=0.01, optimizer="adam",
                          batch_size=16, num_steps=35, seed=seed + c)  # fmt: skip
            model.eval()
            tr.append(evaluate_perplexity(model, little))
            te.append(evaluate_perplexity(model, held))
        curves[f"train, {hidden} hidden"], curves[f"held-out, {hidden} hidden"] = tr, te
        summary[hidden] = {"train": tr[-1], "held_out": te[-1], "held_out_min": min(te),
                           "gap": te[-1] - tr[-1], "rise": te[-1] - min(te)}  # fmt: skip
    label = {f"train, {h} hidden": gettext("train, {hidden} hidden").format(hidden=h)
             for h in (64, 16)}  # fmt: skip
    label |= {f"held-out, {h} hidden": gettext("held-out, {hidden} hidden").format(hidden=h)
              for h in (64, 16)}  # fmt: skip
    title = gettext("2,000 characters of {data}").format(data=data_label(name))
    fig = plot_curves({label[k]: v for k, v in curves.items()},
                      gettext("x{chunk} Adam steps").format(chunk=chunk),
                      gettext("perplexity"), logy=True, title=title)  # fmt: skip
    big, small_net = summary[64], summary[16]
    values = {
        "data": name, "train_chars": len(little), "steps": chunks * chunk,
        "big": big, "small": small_net, "curves": curves,
        "big_gap": big["gap"], "small_gap": small_net["gap"], "big_rise": big["rise"],
        "big_train": big["train"], "big_held_out": big["held_out"],
    }  # fmt: skip
    finding = (
        f"2,000 characters of {name}, {chunks * chunk} Adam steps: 64 hidden units reach "
        f"training perplexity {big['train']:.2f} against held-out {big['held_out']:.2f} (lowest "
        f"{big['held_out_min']:.2f} on the way); 16 hidden units: {small_net['train']:.2f} "
        f"against {small_net['held_out']:.2f}."
    )
    return TopicResult("rnn_overfit_overfit_gap", finding, values, {"curves": fig})
