"""The named recipes, and the one resolution of a training run's settings.

What a recipe is (``Recipe``: a model config, training and data settings of one task) is
``attnkit.training.recipe``; here are the recipes of ``attnkit translate train``,
``attnkit demo`` and ``attnkit lm train`` (each with why it is what it is), and
``resolve``.

``resolve`` merges, each level over the one below: the task's defaults (a language
model's: those of its arch, ``LM_DEFAULTS``), a preset, a resumed checkpoint's config, the
flags given on the command line; it returns the validated configs and where each value
came from. A preset does not combine with a checkpoint, and a resumed run keeps its
model (its arch too), its data and the training settings marked ``resume="fixed"`` (a
flag changing them is an error); other flags override the checkpoint.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from attnkit._validate import one_of
from attnkit.attention.positional import EXTRAPOLATING
from attnkit.data.translation import load_translation_data
from attnkit.i18n import N_, _
from attnkit.models.decoder_lm import DecoderLMConfig
from attnkit.models.registry import (
    LM_ARCHS,
    LMConfig,
    arch_config,
    available_archs,
    lm_arch,
    lm_config,
)
from attnkit.models.transformer import TransformerConfig
from attnkit.training.recipe import (
    DATA_CHECKS,
    DATA_FLAGS,
    SECTIONS,
    SUBWORD_KEYS,
    TASKS,
    TRAIN_CONFIGS,
    WITHOUT_BUDGET,
    Recipe,
    Resolved,
    build_train,
    flag_of,
)

__all__ = [
    "DEFAULTS", "LM_DEFAULTS", "PRESETS", "RECIPES", "Recipe", "Resolved", "flag_of",
    "get_recipe", "resolve",
]  # fmt: skip

_UNSET = object()

# ----------------------------------------------------------------------------- the recipes

TRANSFORMER_DOC = """\
The Transformer language model's defaults (``attnkit lm train --arch transformer``), sized
for The Time Machine's characters and a few minutes on 2 CPU cores: d_model 128, 4 heads,
4 pre-norm blocks, FFN 512, RoPE, context 128 (0.8 M parameters, tied embeddings); windows
of 128 characters drawn at random (independent windows: nothing is carried), 16 a batch,
the whole corpus, its last 10% held out for the validation perplexity. Adam at 2e-3, warmed
up over 100 steps, then decayed linearly to 0 when ``--time-budget`` runs out (without a
budget: the inverse square root); clipping at 1. Measured on The Time Machine, 2 cores, at
equal tokens (4 epochs): batches of 32 with dropout 0.1 reach validation perplexity 7.29,
of 16 with dropout 0.1 6.60, of 16 without dropout 6.38: more steps per token count more
than their noise, and a few minutes (~15 epochs) do not overfit 0.8 M parameters, so no
dropout. ``--time-budget 120``: 1040 steps, validation perplexity 4.78 (train 3.94).
"""

BOOK = Recipe(
    "book", "translate", arch="transformer",
    model=TransformerConfig(d_model=32, num_heads=4, num_layers=2, d_ff=64, dropout=0.1),
    doc="The book's Transformer: 32 wide, 2 layers, 4 heads, FFN 64, dropout 0.1 (the "
    "registry's default config); trained with the defaults.",
)  # fmt: skip
SMALL = Recipe(
    "small", "translate", arch="transformer",
    model=TransformerConfig(d_model=64, num_heads=4, num_layers=2, d_ff=128, dropout=0.1),
    doc="Small enough to train in minutes on 2 CPU cores (the demo's model); trained with "
    "the defaults.",
)  # fmt: skip
BASE = Recipe(
    "base", "translate", arch="transformer",
    model=TransformerConfig(
        d_model=256, num_heads=4, num_layers=2, d_ff=1024, dropout=0.0, pre_norm=True
    ),
    train={
        "schedule": "linear_to_budget",  # "inverse_sqrt" when no time budget is given
        "lr": 2e-3, "warmup_steps": 300, "batch_tokens": 3000, "label_smoothing": 0.1,
        "precision": "bf16",
    },
    data={"vocab_size": 4000},
    doc="""\
``base`` is sized for the real corpus (Tatoeba EN-FR, 167,130 pairs) and a budget of 30
minutes on 2 CPU cores (``--time-budget 1800``). In 30 minutes on this machine a model sees
the corpus only a few times, so the recipe is the model that learns the most per second,
not the largest that fits:

- **vocabulary**: 4000 joint SentencePiece pieces. The output layer (d_model x V) and the
  embeddings are a large share of a step at these sizes: 4000 pieces instead of 8000 make
  a step ~23% faster (measured), for sentences ~10% longer in pieces.
- **width and depth**: d_model 256, 4 heads of 64, FFN 1024, 2 + 2 layers (6.8 M
  parameters), pre-norm. Against the first recipe (3 + 3 layers, 8000 pieces, 11.7 M
  parameters): ~1.9x the optimizer steps in the same 30 minutes (6,214 against 3,244),
  and test BLEU 28.2 against 25.4 (greedy, whole test split; see the README).
- **dropout 0**: in 30 minutes the model sees the corpus ~5 times and does not overfit
  it; without dropout, test BLEU 28.8 greedy and 30.5 with a beam of 4 (28.2 with 0.1;
  one run each).
- **optimization**: Adam (0.9, 0.98), warm-up over 300 steps to a peak learning rate of
  2e-3; with ``--time-budget`` the rate then decays linearly to 0 when the budget runs
  out (``linear_to_budget``: the model at the deadline is an annealed one), without a
  budget the inverse square root. Batches of 3000 padded source + target tokens; label
  smoothing 0.1; bf16 autocast (1.37x the fp32 steps in the same time on this
  CPU, and a lower loss). Pre-norm is what allows the high learning rate: in 7-minute
  pilots, post-norm at 1e-3 reached val loss 2.96, pre-norm at 2e-3 val loss 2.42.
""",
)  # fmt: skip
DEMO = Recipe(
    "demo", "translate", arch="transformer", model=SMALL.model,
    train={
        "epochs": 16, "lr": 0.003, "batch_tokens": 2000, "schedule": "inverse_sqrt",
        "warmup_steps": 200, "label_smoothing": 0.1, "bleu_sentences": 300,
    },
    data={"num_pairs": 20000},
    doc="``attnkit demo`` (``make demo``): the small Transformer on 20,000 generated pairs, "
    "a few minutes on 2 CPU cores (see the README for the measured BLEU and time).",
)  # fmt: skip
TRANSLATE_DEFAULTS = Recipe(
    "defaults", "translate", train={"epochs": 30, "batch_tokens": 2048, "lr": 0.005},
    doc="What ``attnkit translate train`` takes where no preset, checkpoint or flag says "
    "otherwise: these training settings over TrainConfig's defaults, the arch's registered "
    "default model config, and load_translation_data's defaults.",
)  # fmt: skip
LM_BOOK = Recipe(
    "book", "lm", model=LMConfig(cell="gru", num_hiddens=256, num_layers=1),
    train={"epochs": 500, "lr": None, "optimizer": "sgd", "clip": 1.0, "seed": 0},
    data={
        "source": "builtin", "token": "char", "max_tokens": 10000, "batch_size": 32,
        "num_steps": 35, "use_random_iter": False, "val_fraction": 0.0, "val_steps": None,
        "tokenizer": "book",
        "subword_vocab": 1000,
    },
    doc="The book's chapter 8-9 runs, the defaults of ``attnkit lm train``: batch 32, 35 "
    "steps, 256 hiddens, the first 10000 characters, SGD at lr 1 (Adam: 0.01), clipping at "
    "1, 500 epochs; the same for every --cell. The corpus is the one every Python ships "
    "(offline); --data timemachine.txt trains on the book's.",
)  # fmt: skip

LM_TRANSFORMER = Recipe(
    "transformer", "lm", arch="transformer",
    model=DecoderLMConfig(
        d_model=128, num_heads=4, num_layers=4, ffn_hidden=512, dropout=0.0,
        context_length=128, positions="rope",
    ),
    train={
        "epochs": 40, "optimizer": "adam", "lr": 2e-3, "clip": 1.0, "seed": 0,
        "schedule": "linear_to_budget", "warmup_steps": 100,  # inverse_sqrt without a budget
    },
    data={
        "source": "builtin", "token": "char", "max_tokens": -1, "batch_size": 16,
        "num_steps": None, "use_random_iter": True, "val_fraction": 0.1, "val_steps": None,
        "tokenizer": "book",
        "subword_vocab": 1000,
    },
    doc=TRANSFORMER_DOC,
)  # fmt: skip

RECIPES: Mapping[str, Mapping[str, Recipe]] = MappingProxyType({
    "translate": MappingProxyType({r.name: r for r in (BOOK, SMALL, BASE, DEMO)}),
    "lm": MappingProxyType({r.name: r for r in (LM_BOOK, LM_TRANSFORMER)}),
})  # fmt: skip
# the level below every preset: what a run takes where nothing else says otherwise
DEFAULTS: Mapping[str, Recipe] = MappingProxyType({"translate": TRANSLATE_DEFAULTS, "lm": LM_BOOK})
# a language model's, by arch
LM_DEFAULTS: Mapping[str, Recipe] = MappingProxyType(
    {"rnn": LM_BOOK, "transformer": LM_TRANSFORMER}
)
# the Transformer configs of the translator recipes, by name (``attnkit.PRESETS``)
PRESETS: Mapping[str, TransformerConfig] = MappingProxyType(
    {n: r.model for n, r in RECIPES["translate"].items() if r.arch == "transformer"}
)


def get_recipe(task: str, name: str) -> Recipe:
    """The recipe ``name`` of ``task`` (ValueError listing the names if there is none)."""
    one_of("task", task, TASKS)
    if name not in RECIPES[task]:
        message = _("unknown preset {name!r}; expected one of {recipes}")
        raise ValueError(message.format(name=name, recipes=sorted(RECIPES[task])))
    return RECIPES[task][name]


# ----------------------------------------------------------------------------- resolution


def resolve(
    task: str,
    *,
    arch: str | None = None,
    preset: str | Recipe | None = None,
    checkpoint: Mapping[str, Any] | None = None,
    flags: Mapping[str, Mapping[str, Any]] | None = None,
    where: str = N_("the checkpoint"),
) -> Resolved:
    """The settings of a ``task`` run: defaults < ``preset`` < ``checkpoint`` < ``flags``.

    ``arch``: the translator's registered arch; a language model's ("rnn" or
    "transformer"; None: the preset's, the checkpoint's, else "rnn"). ``preset``: a recipe
    or its name. ``checkpoint``: the config (``config.json``) of the checkpoint a run
    resumes. ``flags``: ``{"model"|"train"|"data": {name: value}}``, the values given on
    the command line (None: not given). ``where`` names the checkpoint in errors. Raises
    ``ValueError`` for a preset with a checkpoint, an unknown preset or one of another
    arch, a flag that would change a resumed run's model, data or fixed setting, model
    flags of another arch, and (with ``TypeError``) any invalid value.
    """
    one_of("task", task, TASKS)
    where = _(where)  # the default in the language in force
    unknown = sorted(set(flags or {}) - set(SECTIONS))
    if unknown:
        message = _("flags has unknown section(s) {unknown}; expected some of {sections}")
        raise ValueError(message.format(unknown=unknown, sections=SECTIONS))
    given = {
        s: {k: v for k, v in (flags or {}).get(s, {}).items() if v is not None} for s in SECTIONS
    }
    if preset is not None and checkpoint is not None:
        raise ValueError(_("--preset cannot be combined with --resume (the checkpoint has one)"))
    recipe = get_recipe(task, preset) if isinstance(preset, str) else preset
    if recipe is not None and recipe.task != task:
        message = _("preset {name!r} is a recipe of {recipe_task!r}, not {task!r}")
        raise ValueError(message.format(name=recipe.name, recipe_task=recipe.task, task=task))
    if task == "translate":
        one_of("arch", arch, available_archs())
        if recipe is not None and recipe.arch not in (None, arch):
            message = _("--preset is for --arch {recipe_arch}, not {arch!r}")
            raise ValueError(message.format(recipe_arch=recipe.arch, arch=arch))
        bottom = DEFAULTS[task]
    else:
        arch = _lm_arch(arch, recipe, checkpoint, where)
        _check_lm_model_flags(arch, given["model"])
        bottom = LM_DEFAULTS[arch]
    checks = DATA_CHECKS[task]
    for key, value in given["data"].items():  # presets are checked when they are made
        if key in checks:
            checks[key](_flag(task, "data", key), value)
    defaults = _layer(bottom, arch, everything=True)
    layers = [("default", defaults)]
    if recipe is not None:
        layers.append((f"preset {recipe.name}", _layer(recipe, arch)))
    saved = None if checkpoint is None else _read_checkpoint(task, checkpoint)
    if saved is not None:
        _check_kept(task, arch, given, saved, defaults, where)
        layers.append(("checkpoint", saved))
    layers.append(("flag", given))
    values: dict[str, dict[str, Any]] = {s: {} for s in SECTIONS}
    sources: dict[str, str] = {}
    for label, layer in layers:
        for section in SECTIONS:
            for key, value in layer[section].items():
                if not label.startswith("preset ") or values[section].get(key, _UNSET) != value:
                    values[section][key] = value  # a preset's value that is the default's
                    sources[f"{section}.{key}"] = label  # stays the default's
    if task == "translate":
        model = arch_config(arch, values["model"])
    else:
        model = lm_config(arch, values["model"])
    train_values, schedule = values["train"], values["train"].get("schedule")
    recipes = sources.get("train.schedule") not in ("flag", "checkpoint")  # a recipe's
    if schedule in WITHOUT_BUDGET and train_values.get("time_budget_s") is None and recipes:
        train_values["schedule"] = WITHOUT_BUDGET[schedule]
    train = build_train(task, train_values)
    data = values["data"]
    if task == "translate" and saved is None:
        data = _translation_data(data, given["data"], sources, train.seed)
    elif task == "lm":
        data = _lm_data(arch, model, data, given["data"])
    return Resolved(
        task, arch, None if recipe is None else recipe.name, model, train,
        MappingProxyType(data), MappingProxyType(sources),
    )  # fmt: skip


def _lm_arch(arch, recipe: Recipe | None, checkpoint, where: str) -> str:
    """A language model's arch: given, else the preset's or the checkpoint's, else "rnn"
    (a given one must be theirs)."""
    if arch is not None:
        one_of("arch", arch, LM_ARCHS)
    if recipe is not None:
        if arch not in (None, recipe.lm_arch):
            message = _("--preset {name} is for --arch {lm_arch}, not {arch!r}")
            raise ValueError(message.format(name=recipe.name, lm_arch=recipe.lm_arch, arch=arch))
        return recipe.lm_arch
    if checkpoint is not None:
        saved = lm_arch(checkpoint)
        if arch not in (None, saved):
            message = _(
                "cannot resume {where} with other model/data options: --arch {arch!r} "
                "(checkpoint: {saved!r}); leave it out, or train into a new --out"
            )
            raise ValueError(message.format(where=where, arch=arch, saved=saved))
        return saved
    return arch or "rnn"


def _check_lm_model_flags(arch: str, given: Mapping[str, Any]) -> None:
    """Model flags of the other arch are an error that says which arch they are for."""
    names = {f.name for f in dataclasses.fields(LM_ARCHS[arch])}
    foreign = [key for key in given if key not in names]
    if foreign:
        said = ", ".join(_flag("lm", "model", key) for key in foreign)
        other = next(a for a, cls in LM_ARCHS.items() if a != arch)
        message = _("{said}: not an option of --arch {arch} (only of --arch {other})")
        raise ValueError(message.format(said=said, arch=arch, other=other))


def _lm_data(arch: str, model, data: dict[str, Any], given: dict[str, Any]) -> dict[str, Any]:
    """A language model's data arguments: the subword size for subword data only (given
    otherwise: refused), ``--token`` for characters or words only, ``num_steps`` None:
    the Transformer's context, ``val_steps`` None: ``num_steps``; neither past the
    positions a learned or sinusoidal table was trained on."""
    data = dict(data)
    if data.get("tokenizer") != "sentencepiece":
        flags = [_flag("lm", "data", k) for k in SUBWORD_KEYS["lm"] if k in given]
        if flags:
            message = _("{listed}: only with --tokenizer sentencepiece")
            raise ValueError(message.format(listed=", ".join(flags)))
    elif "token" in given:
        raise ValueError(
            _("--token is for --tokenizer book (characters or words), not sentencepiece")
        )
    if data.get("num_steps") is None:
        if arch != "transformer":
            raise ValueError(_("num_steps must be set for --arch rnn (--num-steps)"))
        data["num_steps"] = model.context_length
    if data.get("val_steps") is None:
        data["val_steps"] = data["num_steps"]
    for key in ("num_steps", "val_steps") if arch == "transformer" else ():
        steps, context, flag = data[key], model.context_length, _flag("lm", "data", key)
        if steps > context and model.positions not in EXTRAPOLATING:
            message = _(
                "{flag} {steps} is longer than --context {context}: "
                "positions={positions!r} has no position past the context; use {flag} "
                "{context} or less, or a larger --context"
            )
            raise ValueError(
                message.format(flag=flag, steps=steps, context=context, positions=model.positions)
            )
    return data


def _layer(recipe: Recipe, arch: str | None, everything: bool = False) -> dict[str, dict]:
    """A recipe's settings by section; ``everything``: with every default (the bottom)."""
    if recipe.model is not None:
        model = dataclasses.asdict(recipe.model)
    else:
        model = dataclasses.asdict(arch_config(arch)) if everything else {}
    train = dict(recipe.train)
    if everything:  # the fields' own defaults (not derived ones: lm's lr follows its optimizer)
        fields = dataclasses.fields(TRAIN_CONFIGS[recipe.task])
        train = {**{f.name: f.default for f in fields}, **train}
    return {"model": model, "train": train, "data": dict(recipe.data)}


def _read_checkpoint(task: str, config: Mapping[str, Any]) -> dict[str, dict]:
    """A checkpoint's settings by section."""
    if task == "translate":
        return {
            "model": dict(config.get("model_config") or {}),
            "train": dict(config.get("train_config") or {}),
            "data": dict(config.get("data_args") or {}),
        }
    config = {"source" if k == "data" else k: v for k, v in config.items()}  # data: the source
    keys = {"model": [f.name for f in dataclasses.fields(LM_ARCHS[lm_arch(config)])],
            "train": [f.name for f in dataclasses.fields(TRAIN_CONFIGS["lm"])],
            "data": list(DATA_CHECKS["lm"])}  # fmt: skip
    return {s: {k: config[k] for k in names if k in config} for s, names in keys.items()}


def _check_kept(task, arch, given, saved, defaults, where: str) -> None:
    """Refuse flags that change what a resumed run keeps: its model, its data and the
    training settings marked ``resume="fixed"``."""
    if task == "translate":  # the checkpoint records the data settings given only
        params = inspect.signature(load_translation_data).parameters.values()
        defaults = {**defaults, "data": {p.name: p.default for p in params}}
    fields = dataclasses.fields(TRAIN_CONFIGS[task])
    fixed = {f.name for f in fields if f.metadata.get("resume") == "fixed"}
    changed = [
        (section, key, value, saved[section].get(key, defaults[section].get(key)))
        for section in SECTIONS
        for key, value in given[section].items()
        if section != "train" or key in fixed
    ]
    changed = [c for c in changed if c[2] != c[3]]
    if task == "translate" and changed:
        model = {key: value for section, key, value, _ in changed if section == "model"}
        if model:
            message = _("cannot change the model config of a checkpoint: {model}")
            raise ValueError(message.format(model=model))
        for _section, key, value, before in changed:
            if key == "data":
                message = _("checkpoint {where} was trained on {before!r}, not {value!r}")
                raise ValueError(message.format(where=where, before=before, value=value))
    if changed:
        said = ", ".join(
            _("{flag} {value!r} (checkpoint: {before!r})").format(
                flag=_flag(task, section, key, arch), value=value, before=before
            )
            for section, key, value, before in changed
        )
        message = _(
            "cannot resume {where} with other model/data options: {said}; leave "
            "them out (they are read from the checkpoint), or train into a new "
            "--out"
        )
        raise ValueError(message.format(where=where, said=said))


def _flag(task: str, section: str, key: str, arch: str | None = None) -> str:
    """How the command line spells ``section.key`` (a language model's model flags: its
    arch's, else either arch's)."""
    classes = []
    if section == "train":
        classes = [TRAIN_CONFIGS[task]]
    elif section == "model" and task == "lm":
        classes = [LM_ARCHS[arch]] if arch in LM_ARCHS else list(LM_ARCHS.values())
    for cls in classes:
        fields = {f.name: f for f in dataclasses.fields(cls)}
        if key in fields:
            return flag_of(fields[key]) or key
    return DATA_FLAGS[task].get(key, "--" + key.replace("_", "-"))


def _translation_data(
    data: dict[str, Any], given: dict[str, Any], sources: dict[str, str], seed: int
) -> dict[str, Any]:
    """A new translator's data arguments: subword settings only for subword data (a
    preset's are dropped for words, given ones refused), and the run's seed."""
    if data.get("tokenizer") != "sentencepiece":
        flags = [_flag("translate", "data", k) for k in SUBWORD_KEYS["translate"] if k in given]
        if flags:
            message = _("{listed}: only with --tokenizer sentencepiece")
            raise ValueError(message.format(listed=", ".join(flags)))
        data = {k: v for k, v in data.items() if k not in SUBWORD_KEYS["translate"]}
    sources["data.seed"] = sources["train.seed"]
    return {**data, "seed": seed}
