"""Named recipes, and the one resolution of a training run's settings.

A ``Recipe`` is what a run is meant to be trained with: a model config, training settings
(fields of the task's train config) and data settings. Two tasks use them:

- ``translate`` (``attnkit translate train --preset NAME``, ``attnkit demo``): the model is
  the arch's config dataclass (``TransformerConfig`` for the recipes here), the training
  settings ``TrainConfig`` fields, the data settings ``load_translation_data`` arguments
  (``vocab_size``, ``subword_type`` and ``joint_vocab`` apply to subword data only);
- ``lm`` (``attnkit lm train``): ``LMConfig``, ``LMTrainConfig`` fields and the
  ``load_lm_data`` arguments (``source``, ``token``, ``max_tokens``, ``batch_size``,
  ``num_steps``, ``use_random_iter``).

``resolve`` merges, each level over the one below: the task's ``DEFAULTS``, a preset, a
resumed checkpoint's config, the flags given on the command line; it returns the validated
configs and where each value came from. A preset does not combine with a checkpoint, and
a resumed run keeps its model, its data and the training settings marked
``resume="fixed"`` (a flag changing them is an error); other flags override the
checkpoint.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from attnkit._validate import boolean, integer, non_negative_int, one_of, positive_int, real
from attnkit.data.translation import load_translation_data
from attnkit.models.registry import LMConfig, arch_config, available_archs
from attnkit.models.transformer import TransformerConfig
from attnkit.training.lm import LMTrainConfig
from attnkit.training.translation import TrainConfig

__all__ = [
    "DEFAULTS", "PRESETS", "RECIPES", "Recipe", "Resolved", "flag_of", "get_recipe", "resolve",
]  # fmt: skip

TASKS = ("translate", "lm")
SECTIONS = ("model", "train", "data")
_TRAIN_CONFIGS: dict[str, type] = {"translate": TrainConfig, "lm": LMTrainConfig}
# data settings that apply to subword data only (--tokenizer sentencepiece)
_SUBWORD_KEYS = ("vocab_size", "subword_type", "joint_vocab")
# the schedule a recipe falls back to without a time budget (linear_to_budget needs one)
_WITHOUT_BUDGET = {"linear_to_budget": "inverse_sqrt"}
_UNSET = object()


def _text(name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, got {value!r} ({type(value).__name__})")
    return value


def _choice(*choices: str) -> Callable[[str, Any], Any]:
    return lambda name, value: one_of(name, value, choices)


def _or_none(check: Callable[..., Any], **bounds: Any) -> Callable[[str, Any], Any]:
    return lambda name, value: None if value is None else check(name, value, **bounds)


# data setting -> its check (name, value), per task
# fmt: off
_DATA_CHECKS: dict[str, dict[str, Callable[[str, Any], Any]]] = {
    "translate": {
        "data": _or_none(_text), "num_examples": _or_none(positive_int),
        "num_pairs": positive_int, "max_len": _or_none(integer, minimum=2),
        "min_freq": non_negative_int, "tokenizer": _choice("word", "sentencepiece"),
        "val_fraction": _or_none(real, at_least=0.0, below=1.0),
        "test_fraction": _or_none(real, at_least=0.0, below=1.0),
        "vocab_size": positive_int, "subword_type": _choice("unigram", "bpe"),
        "joint_vocab": boolean,
    },
    "lm": {
        "source": _text, "token": _choice("char", "word"),
        "max_tokens": _or_none(integer, minimum=-1), "batch_size": positive_int,
        "num_steps": positive_int, "use_random_iter": boolean,
    },
}
# fmt: on
# how the CLI spells a data setting, where not --KEY-WITH-DASHES
_DATA_FLAGS = {
    "translate": {"joint_vocab": "--separate-vocab"},
    "lm": {"source": "--data/--dataset", "use_random_iter": "--random-iter"},
}


def _build_train(task: str, values: Mapping[str, Any]) -> Any:
    """The task's train config from ``values`` (unknown keys named)."""
    cls = _TRAIN_CONFIGS[task]
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        raise ValueError(f"unknown {cls.__name__} keys {unknown}; expected some of {sorted(names)}")
    return cls(**values)


@dataclass(frozen=True)
class Recipe:
    """A named recipe of ``task``; validated on creation (``TypeError``/``ValueError``
    naming the field).

    ``model``: the model config (a translator's also names its ``arch``); None only for
    the translator's defaults, whose model is the arch's registered default config.
    ``train``: training settings by field name; ``data``: data settings. ``doc``: what the
    recipe is for and why it is what it is.
    """

    name: str
    task: str
    model: Any = None
    train: Mapping[str, Any] = field(default_factory=dict)
    data: Mapping[str, Any] = field(default_factory=dict)
    arch: str | None = None
    doc: str = ""

    def __post_init__(self) -> None:
        if not _text("Recipe.name", self.name):
            raise ValueError("Recipe.name must be a non-empty str, got ''")
        one_of("Recipe.task", self.task, TASKS)
        where = f"recipe {self.name!r}"
        _text(f"{where}: doc", self.doc)
        self._check_model(where)
        for section in ("train", "data"):
            values = getattr(self, section)
            if not isinstance(values, Mapping):
                raise TypeError(
                    f"{where}: {section} must be a mapping of setting names to values, "
                    f"got {type(values).__name__}"
                )
            object.__setattr__(self, section, MappingProxyType(dict(values)))
        try:
            train = dict(self.train)
            if train.get("schedule") in _WITHOUT_BUDGET and train.get("time_budget_s") is None:
                _build_train(self.task, {**train, "schedule": _WITHOUT_BUDGET[train["schedule"]]})
                train["time_budget_s"] = 60.0  # and with a budget, as given
            _build_train(self.task, train)
        except (TypeError, ValueError) as e:
            raise type(e)(f"{where}: train: {e}") from None
        checks = _DATA_CHECKS[self.task]
        unknown = sorted(set(self.data) - set(checks))
        if unknown:
            raise ValueError(
                f"{where}: unknown data setting(s) {unknown}; expected some of {sorted(checks)}"
            )
        for key, value in self.data.items():
            checks[key](f"{where}: data.{key}", value)

    def _check_model(self, where: str) -> None:
        if self.task == "lm" and self.arch is not None:
            raise ValueError(f"{where}: arch is for translators, got {self.arch!r}")
        if self.arch is not None:
            one_of(f"{where}: arch", self.arch, available_archs())
        if self.task == "translate" and self.model is not None and self.arch is None:
            raise ValueError(f"{where}: arch is required with a model config")
        if self.model is None and self.task == "translate":
            return  # the defaults: the arch's registered config
        expected = LMConfig if self.task == "lm" else type(arch_config(self.arch))
        if not isinstance(self.model, expected):
            raise TypeError(
                f"{where}: model must be a {expected.__name__}, got {type(self.model).__name__}"
            )


# ----------------------------------------------------------------------------- the recipes

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
        "num_steps": 35, "use_random_iter": False,
    },
    doc="The book's chapter 8-9 runs, the defaults of ``attnkit lm train``: batch 32, 35 "
    "steps, 256 hiddens, the first 10000 characters, SGD at lr 1 (Adam: 0.01), clipping at "
    "1, 500 epochs; the same for every --cell. The corpus is the one every Python ships "
    "(offline); --data timemachine.txt trains on the book's.",
)  # fmt: skip

RECIPES: Mapping[str, Mapping[str, Recipe]] = MappingProxyType({
    "translate": MappingProxyType({r.name: r for r in (BOOK, SMALL, BASE, DEMO)}),
    "lm": MappingProxyType({LM_BOOK.name: LM_BOOK}),
})  # fmt: skip
# the level below every preset: what a run takes where nothing else says otherwise
DEFAULTS: Mapping[str, Recipe] = MappingProxyType({"translate": TRANSLATE_DEFAULTS, "lm": LM_BOOK})
# the Transformer configs of the translator recipes, by name (``attnkit.PRESETS``)
PRESETS: Mapping[str, TransformerConfig] = MappingProxyType(
    {n: r.model for n, r in RECIPES["translate"].items() if r.arch == "transformer"}
)


def flag_of(f: dataclasses.Field) -> str | None:
    """The command-line flag of a config field: its ``flag`` metadata (None: it has none),
    else ``--name-with-dashes``."""
    return f.metadata.get("flag", "--" + f.name.replace("_", "-"))


def get_recipe(task: str, name: str) -> Recipe:
    """The recipe ``name`` of ``task`` (ValueError listing the names if there is none)."""
    one_of("task", task, TASKS)
    if name not in RECIPES[task]:
        raise ValueError(f"unknown preset {name!r}; expected one of {sorted(RECIPES[task])}")
    return RECIPES[task][name]


# ----------------------------------------------------------------------------- resolution


@dataclass(frozen=True)
class Resolved:
    """A run's validated settings and where each came from.

    ``train``: ``TrainConfig``/``LMTrainConfig``; ``data``: the data loader's arguments (a
    translator's as its checkpoint records them: those set, and the seed). ``sources``:
    ``"section.name"`` -> ``"default"``, ``"preset NAME"``, ``"checkpoint"`` or ``"flag"``
    (a preset's value equal to the default's stays ``"default"``).
    """

    task: str
    arch: str | None
    preset: str | None
    model: Any
    train: Any
    data: Mapping[str, Any]
    sources: Mapping[str, str]


def resolve(
    task: str,
    *,
    arch: str | None = None,
    preset: str | Recipe | None = None,
    checkpoint: Mapping[str, Any] | None = None,
    flags: Mapping[str, Mapping[str, Any]] | None = None,
    where: str = "the checkpoint",
) -> Resolved:
    """The settings of a ``task`` run: defaults < ``preset`` < ``checkpoint`` < ``flags``.

    ``arch``: the translator's registered arch. ``preset``: a recipe or its name.
    ``checkpoint``: the config (``config.json``) of the checkpoint a run resumes.
    ``flags``: ``{"model"|"train"|"data": {name: value}}``, the values given on the
    command line (None: not given). ``where`` names the checkpoint in errors. Raises
    ``ValueError`` for a preset with a checkpoint, an unknown preset or one of another
    arch, a flag that would change a resumed run's model, data or fixed setting, and
    (with ``TypeError``) any invalid value.
    """
    one_of("task", task, TASKS)
    unknown = sorted(set(flags or {}) - set(SECTIONS))
    if unknown:
        raise ValueError(f"flags has unknown section(s) {unknown}; expected some of {SECTIONS}")
    given = {
        s: {k: v for k, v in (flags or {}).get(s, {}).items() if v is not None} for s in SECTIONS
    }
    if preset is not None and checkpoint is not None:
        raise ValueError("--preset cannot be combined with --resume (the checkpoint has one)")
    recipe = get_recipe(task, preset) if isinstance(preset, str) else preset
    if recipe is not None and recipe.task != task:
        raise ValueError(f"preset {recipe.name!r} is a recipe of {recipe.task!r}, not {task!r}")
    if task == "translate":
        one_of("arch", arch, available_archs())
        if recipe is not None and recipe.arch not in (None, arch):
            raise ValueError(f"--preset is for --arch {recipe.arch}, not {arch!r}")
    defaults = _layer(DEFAULTS[task], arch, everything=True)
    layers = [("default", defaults)]
    if recipe is not None:
        layers.append((f"preset {recipe.name}", _layer(recipe, arch)))
    saved = None if checkpoint is None else _read_checkpoint(task, checkpoint)
    if saved is not None:
        _check_kept(task, given, saved, defaults, where)
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
    model = (
        arch_config(arch, values["model"]) if task == "translate" else LMConfig(**values["model"])
    )
    train_values, schedule = values["train"], values["train"].get("schedule")
    recipes = sources.get("train.schedule") not in ("flag", "checkpoint")  # a recipe's
    if schedule in _WITHOUT_BUDGET and train_values.get("time_budget_s") is None and recipes:
        train_values["schedule"] = _WITHOUT_BUDGET[schedule]
    train = _build_train(task, train_values)
    data = values["data"]
    if task == "translate" and saved is None:
        data = _translation_data(data, given["data"], sources, train.seed)
    return Resolved(
        task, arch, None if recipe is None else recipe.name, model, train,
        MappingProxyType(data), MappingProxyType(sources),
    )  # fmt: skip


def _layer(recipe: Recipe, arch: str | None, everything: bool = False) -> dict[str, dict]:
    """A recipe's settings by section; ``everything``: with every default (the bottom)."""
    if recipe.model is not None:
        model = dataclasses.asdict(recipe.model)
    else:
        model = dataclasses.asdict(arch_config(arch)) if everything else {}
    train = dict(recipe.train)
    if everything:  # the fields' own defaults (not derived ones: lm's lr follows its optimizer)
        fields = dataclasses.fields(_TRAIN_CONFIGS[recipe.task])
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
    keys = {"model": [f.name for f in dataclasses.fields(LMConfig)],
            "train": [f.name for f in dataclasses.fields(LMTrainConfig)],
            "data": list(_DATA_CHECKS["lm"])}  # fmt: skip
    return {s: {k: config[k] for k in names if k in config} for s, names in keys.items()}


def _check_kept(task, given, saved, defaults, where: str) -> None:
    """Refuse flags that change what a resumed run keeps: its model, its data and the
    training settings marked ``resume="fixed"``."""
    if task == "translate":  # the checkpoint records the data settings given only
        params = inspect.signature(load_translation_data).parameters.values()
        defaults = {**defaults, "data": {p.name: p.default for p in params}}
    fields = dataclasses.fields(_TRAIN_CONFIGS[task])
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
            raise ValueError(f"cannot change the model config of a checkpoint: {model}")
        for _, key, value, before in changed:
            if key == "data":
                raise ValueError(f"checkpoint {where} was trained on {before!r}, not {value!r}")
    if changed:
        said = ", ".join(
            f"{_flag(task, section, key)} {value!r} (checkpoint: {before!r})"
            for section, key, value, before in changed
        )
        raise ValueError(
            f"cannot resume {where} with other model/data options: {said}; leave them out "
            "(they are read from the checkpoint), or train into a new --out"
        )


def _flag(task: str, section: str, key: str) -> str:
    """How the command line spells ``section.key``."""
    cls = {"model": LMConfig if task == "lm" else None, "train": _TRAIN_CONFIGS[task]}
    fields = {f.name: f for f in dataclasses.fields(cls[section])} if cls.get(section) else {}
    if key in fields:
        return flag_of(fields[key]) or key
    return _DATA_FLAGS[task].get(key, "--" + key.replace("_", "-"))


def _translation_data(
    data: dict[str, Any], given: dict[str, Any], sources: dict[str, str], seed: int
) -> dict[str, Any]:
    """A new translator's data arguments: subword settings only for subword data (a
    preset's are dropped for words, given ones refused), and the run's seed."""
    if data.get("tokenizer") != "sentencepiece":
        flags = [_flag("translate", "data", k) for k in _SUBWORD_KEYS if k in given]
        if flags:
            raise ValueError(f"{', '.join(flags)}: only with --tokenizer sentencepiece")
        data = {k: v for k, v in data.items() if k not in _SUBWORD_KEYS}
    sources["data.seed"] = sources["train.seed"]
    return {**data, "seed": seed}
