"""``attnkit demo``: the main job (``make demo``).

Trains the ``demo`` recipe (``attnkit.training.recipes``: the small Transformer on the
generated English-French corpus; no network, a few minutes on 2 CPU cores), then reports test BLEU and chrF (sacrebleu), shows
example translations, and writes the checkpoint, the training curve and attention
heatmaps. A second run finds the finished checkpoint and only reports (``--fresh``
trains again).
"""

from __future__ import annotations

import dataclasses
import shutil
import sys
import time
from pathlib import Path

from attnkit.i18n import _

__all__ = ["register", "run_demo"]

DEMO_SENTENCES = [
    "the red car is big .",
    "we do not like the small green cars .",
    "she goes to the beautiful museum .",
]


def register(sub) -> None:
    from attnkit.training.recipes import RECIPES

    demo = RECIPES["translate"]["demo"]
    p = sub.add_parser(
        "demo",
        help=_("the main job: train the default Transformer translator, report BLEU, draw "
               "attention"),
    )  # fmt: skip
    p.add_argument("--out", default="runs/demo", help=_("output folder (default runs/demo)"))
    p.add_argument("--epochs", type=int, default=None,
                   help=_("training epochs (default {n})").format(n=demo.train["epochs"]))  # fmt: skip
    p.add_argument("--num-pairs", type=int, default=None,
                   help=_("generated pairs (default {n})").format(n=demo.data["num_pairs"]))  # fmt: skip
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--fresh", action="store_true", help=_("retrain even if a checkpoint exists"))
    p.add_argument("--tour", action="store_true", help=_("also run the attention tour"))
    p.add_argument("--no-progress", action="store_true", help=_("no progress bar"))
    p.set_defaults(
        func=lambda a: run_demo(
            Path(a.out),
            epochs=a.epochs,
            num_pairs=a.num_pairs,
            seed=a.seed,
            fresh=a.fresh,
            tour=a.tour,
            progress=not a.no_progress,
        )
    )


def _encodable(data, sentence: str) -> bool:
    try:
        src, _valid = data.encode_source([sentence])
    except ValueError:
        return False
    return bool((src != data.src_vocab.unk).all())


def run_demo(
    out: Path,
    *,
    epochs: int | None = None,
    num_pairs: int | None = None,
    seed: int = 0,
    fresh: bool = False,
    tour: bool = False,
    progress: bool = True,
) -> int:
    import shutil

    import torch

    from attnkit.data.translation import load_translation_data
    from attnkit.inference.attention_maps import plot_attention_maps
    from attnkit.inference.translator import Translator
    from attnkit.models.registry import build_model
    from attnkit.training.recipes import resolve
    from attnkit.training.translation import Trainer

    if epochs is not None and epochs < 1:
        raise ValueError(_("--epochs must be >= 1, got {epochs}").format(epochs=epochs))
    start = time.perf_counter()
    ckpt = out / "transformer"
    # the demo recipe, with the epochs, pairs and seed asked for
    train = {"epochs": epochs, "seed": seed, "out_dir": str(ckpt), "progress": progress}
    flags = {"train": train, "data": {"num_pairs": num_pairs}}
    resolved = resolve("translate", arch="transformer", preset="demo", flags=flags)
    train_cfg, data_args = resolved.train, dict(resolved.data)
    epochs = train_cfg.epochs
    if fresh and ckpt.exists():
        shutil.rmtree(ckpt)
    print(_("attnkit demo: English -> French Transformer on the generated corpus (seed {seed})")
          .format(seed=seed))  # fmt: skip
    data = load_translation_data(**data_args)
    print(
        _("  data: {train:,} train / {val:,} val / {test:,} test pairs, vocabularies {src} (en) "
          "/ {tgt} (fr)").format(train=len(data.train), val=len(data.val), test=len(data.test),
                                 src=len(data.src_vocab), tgt=len(data.tgt_vocab))
    )  # fmt: skip
    model_config = dataclasses.asdict(resolved.model)
    torch.manual_seed(seed)
    model = build_model("transformer", model_config, len(data.src_vocab), len(data.tgt_vocab))
    n_params = sum(p.numel() for p in model.parameters())
    print(
        _("  model: Transformer, recipe 'demo' ({width} wide, {layers} layers, {heads} heads), "
          "{params:,} parameters").format(width=model_config["d_model"], params=n_params,
                                          layers=model_config["num_layers"],
                                          heads=model_config["num_heads"])
    )  # fmt: skip
    trainer = Trainer(
        model, data, train_cfg, arch="transformer", model_config=model_config, data_args=data_args
    )
    if trainer.resume():
        print(_("  resuming {ckpt} at epoch {epoch}/{epochs}").format(
            ckpt=ckpt, epoch=trainer.epoch, epochs=epochs))  # fmt: skip
    if trainer.epoch < epochs:
        trainer.fit()
    else:
        print(_("  already trained (pass --fresh to train again)"))
    trainer.plot(ckpt / "curves.png")
    train_s = time.perf_counter() - start

    # -- report on the test split
    translator = Translator(model, data, model_config=model_config, arch="transformer")
    t0 = time.perf_counter()
    ev = translator.evaluate("test")
    decode_s = time.perf_counter() - t0
    srcs, hyps, refs, bleu, chrf = ev.sources, ev.hyps, ev.refs, ev.bleu, ev.chrf
    exact = sum(h == r for h, r in zip(hyps, refs)) / max(len(refs), 1)
    print("\n" + _(
        "test BLEU {bleu:.1f}, chrF {chrf:.1f} (sacrebleu), exact match {exact:.1%} on {n:,} "
        "sentences ({speed:,.0f} sentences/s, batched greedy)"
    ).format(bleu=bleu, chrf=chrf, exact=exact, n=len(refs), speed=len(refs) / decode_s))  # fmt: skip
    print("\n" + _("examples (test split):"))
    for i in range(min(6, len(srcs))):
        mark = _("ok") if hyps[i] == refs[i] else _("reference: {ref}").format(ref=refs[i])
        print(f"  {srcs[i]}  =>  {hyps[i]}   [{mark}]")

    # -- pictures
    pics = []
    shown = [s for s in DEMO_SENTENCES if _encodable(data, s)] or srcs[:1]
    print("\n" + _("attention pictures of (crossing alignments, negation):"))
    for i, sentence in enumerate(shown):
        maps = translator.maps(sentence)
        mean_path = ckpt / f"attention_{i + 1}.png"
        plot_attention_maps(maps, mean_path)
        pics.append(mean_path)
        if i == 0:
            grid = ckpt / "attention_all_heads.png"
            plot_attention_maps(maps, grid, all_heads=True)
            pics.append(grid)
        print(f"  {sentence}  =>  {maps.translation}")
    print("\n" + _("checkpoint:  {path}/ (config.json, weights, optimizer and RNG state)")
          .format(path=ckpt))  # fmt: skip
    print(_("curve:       {path}").format(path=ckpt / "curves.png"))
    for p in pics:
        print(_("heatmaps:    {path}").format(path=p))
    if tour:
        from attnkit.cli.tour import run_tour

        run_tour(out / "tour", seed)
    print("\n" + _("done in {total:.0f} s (training and loading {train:.0f} s)").format(
        total=time.perf_counter() - start, train=train_s))  # fmt: skip
    exe = _attnkit_command()
    print(_("next:"))
    print(f'  {exe} translate run --checkpoint {ckpt} "{shown[0]}" --heatmap attention.png')
    print(f"  {exe} translate eval --checkpoint {ckpt}")
    explore = _("explore its attention in a browser")
    print(f"  {exe} serve --checkpoint {ckpt}    # {explore}")
    print(_("real English in, real French out: the Tatoeba fra.txt, subwords, 30 minutes on 2 "
            "cores"))  # fmt: skip
    print(f"  {exe} translate train --arch transformer --preset base --data fra.txt "
          "--tokenizer sentencepiece --time-budget 1800 --out runs/fr")  # fmt: skip
    print(f'  {exe} translate run --checkpoint runs/fr "Where is the train station?"')
    return 0


def _attnkit_command() -> str:
    """How to call attnkit again: plain ``attnkit`` if it is on PATH, else the venv's script."""
    script = Path(sys.prefix) / "bin" / "attnkit"
    if shutil.which("attnkit") == str(script) or not script.exists():
        return "attnkit"
    try:
        return str(script.relative_to(Path.cwd()))
    except ValueError:
        return str(script)
