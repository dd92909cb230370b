"""What ``attnkit lm train`` says and writes when it is done: the model's description, the
line of what trains on what, the perplexity plot and samples.txt (``attnkit.cli.lm``)."""

from __future__ import annotations

from pathlib import Path

from attnkit.i18n import _

__all__ = ["DEFAULT_PROMPTS", "describe_model", "model_kind", "plot_perplexity", "run_line",
           "write_samples"]  # fmt: skip

DEFAULT_PROMPTS = ("time traveller", "traveller")


def model_kind(arch: str, m) -> str:
    """The model's name in the log and the plot's title: "Transformer LM", "scratch GRU"."""
    if arch == "transformer":
        return "Transformer LM"
    return ("scratch " if m.scratch else "torch.nn ") + m.cell.upper()


def describe_model(arch: str, model, m) -> str:
    params = sum(p.numel() for p in model.parameters())
    kind = model_kind(arch, m)
    if arch == "transformer":
        return _(
            "{kind}: {layers} block(s), d_model {d_model}, {heads} heads ({kv} key/value), FFN "
            "{ffn}, {positions} positions, context {context}, {params:,} parameters"
        ).format(kind=kind, layers=m.num_layers, d_model=m.d_model, heads=m.num_heads,
                 kv=model.config.kv_heads, ffn=m.ffn_hidden, positions=m.positions,
                 context=m.context_length, params=params)  # fmt: skip
    if m.bidirectional:
        text = _("{kind}: {layers} layer(s), bidirectional, {hiddens} hiddens")
    else:
        text = _("{kind}: {layers} layer(s), {hiddens} hiddens")
    return text.format(kind=kind, layers=m.num_layers, hiddens=m.num_hiddens)


def run_line(model: str, vocab: int, tokens: int, held: int, source, c, unit: str) -> str:
    """The line that says what trains on what: the model, the corpus, the optimizer."""
    units = {"subword": _("subword"), "char": _("char"), "word": _("word")}
    if held:
        text = _(
            "{model}, vocab {vocab}, corpus {tokens} {unit} tokens ({held} held out for "
            "validation) from {source}; {optimizer} lr {lr}, clip {clip}, {epochs} epochs"
        )
    else:
        text = _("{model}, vocab {vocab}, corpus {tokens} {unit} tokens from {source}; "
                 "{optimizer} lr {lr}, clip {clip}, {epochs} epochs")  # fmt: skip
    return text.format(model=model, vocab=vocab, tokens=tokens, unit=units.get(unit, unit),
                       held=held, source=source, optimizer=c.optimizer, lr=c.lr, clip=c.clip,
                       epochs=c.epochs)  # fmt: skip


def plot_perplexity(out: Path, train: list[float], val: list[float], title: dict) -> None:
    """perplexity.png: the training (and validation) perplexity per epoch; ``title``:
    ``{"model": ..., "corpus": ...}``."""
    import matplotlib.pyplot as plt

    from attnkit.checkpoint import atomic_write
    from attnkit.viz import figure_text, plot_curves

    with figure_text():  # in the language figures are drawn in
        curves = {_("train"): train, **({_("validation"): val} if len(val) == len(train) else {})}
        ylabel, title = _("perplexity"), _("{model} on {corpus}").format(**title)
    fig = plot_curves(curves, ylabel=ylabel, title=title)
    atomic_write(out / "perplexity.png", lambda tmp: fig.savefig(tmp, format="png", dpi=120))
    plt.close(fig)  # written: do not keep it open in this process


def write_samples(a, out: Path, model, vocab, tokenizer, d, seed: int) -> None:
    """Greedy and sampled (temperature 0.8) continuations of a few prompts: samples.txt."""
    from attnkit.checkpoint import atomic_write
    from attnkit.data.lm import read_corpus_lines
    from attnkit.inference.generation import generate

    context = getattr(model, "context_length", None)  # a Transformer's prompts fit in it
    if tokenizer is not None:  # the text's first pieces
        first = next(
            (line for line in read_corpus_lines(d["source"], normalize=False) if line.strip()),
            "The",
        )
        first = tokenizer.decode(tokenizer.encode(first)[: min(4, (context or 8) // 2 or 1)])
        prompts, codec = [first], {"tokenizer": tokenizer}
    else:
        prompts = list(DEFAULT_PROMPTS) if d["token"] == "char" else ["the"]
        prompts = [p[-context:] for p in prompts] if context else prompts
        codec = {"vocab": vocab, "token": d["token"], "unknown": "unk"}
    n = a.sample_tokens
    greedy = generate(model, prompts, max_new_tokens=n, **codec)
    sampled = generate(model, prompts, max_new_tokens=n, temperature=0.8, seed=seed, **codec)
    samples = []
    for g, s in zip(greedy, sampled, strict=True):
        samples += [f"greedy          | {g}", f"temperature 0.8 | {s}"]
    atomic_write(
        out / "samples.txt",
        lambda tmp: Path(tmp).write_text("\n".join(samples) + "\n", encoding="utf-8"),
    )
    print("\n".join(samples))
