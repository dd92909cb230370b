"""What a recipe is: ``Recipe``, a named set of settings of one task, validated on creation.

A ``Recipe`` is what a run is meant to be trained with: a model config, training settings
(fields of the task's train config) and data settings. Two tasks use them:

- ``translate`` (``attnkit translate train --preset NAME``, ``attnkit demo``): the model is
  the arch's config dataclass (``TransformerConfig`` for the recipes here), the training
  settings ``TrainConfig`` fields, the data settings ``load_translation_data`` arguments
  (``vocab_size``, ``subword_type`` and ``joint_vocab`` apply to subword data only);
- ``lm`` (``attnkit lm train``): the arch's config (``LMConfig`` for ``rnn``, the default,
  ``DecoderLMConfig`` for ``transformer``), ``LMTrainConfig`` fields and the data
  settings: ``source``, ``token``, ``max_tokens``, ``batch_size``, ``num_steps`` (None:
  the Transformer's context), ``use_random_iter``, ``val_fraction``, ``val_steps`` (the
  validation windows; None: ``num_steps``), ``tokenizer`` and
  ``subword_vocab`` (``--vocab-size``, subword data only).

The recipes themselves and ``resolve`` (its result: ``Resolved``) are in
``attnkit.training.recipes``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from attnkit._validate import boolean, integer, non_negative_int, one_of, positive_int, real
from attnkit.i18n import _
from attnkit.models.registry import LM_ARCHS, arch_config, available_archs
from attnkit.training.lm import LMTrainConfig
from attnkit.training.translation import TrainConfig

__all__ = ["SECTIONS", "TASKS", "Recipe", "Resolved", "flag_of"]

TASKS = ("translate", "lm")
SECTIONS = ("model", "train", "data")
TRAIN_CONFIGS: Mapping[str, type] = MappingProxyType(
    {"translate": TrainConfig, "lm": LMTrainConfig}
)
# data settings that apply to subword data only (--tokenizer sentencepiece)
SUBWORD_KEYS = {
    "translate": ("vocab_size", "subword_type", "joint_vocab"),
    "lm": ("subword_vocab",),
}
# the schedule a recipe falls back to without a time budget (linear_to_budget needs one)
WITHOUT_BUDGET = {"linear_to_budget": "inverse_sqrt"}


def _text(name: str, value: object) -> str:
    if not isinstance(value, str):
        message = _("{name} must be a str, got {value!r} ({type})")
        raise TypeError(message.format(name=name, value=value, type=type(value).__name__))
    return value


def _choice(*choices: str) -> Callable[[str, Any], Any]:
    return lambda name, value: one_of(name, value, choices)


def _or_none(check: Callable[..., Any], **bounds: Any) -> Callable[[str, Any], Any]:
    return lambda name, value: None if value is None else check(name, value, **bounds)


# data setting -> its check (name, value), per task
# fmt: off
DATA_CHECKS: dict[str, dict[str, Callable[[str, Any], Any]]] = {
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
        "num_steps": _or_none(positive_int), "use_random_iter": boolean,
        "val_fraction": lambda name, value: real(name, value, at_least=0.0, below=1.0),
        "val_steps": _or_none(positive_int),
        "tokenizer": _choice("book", "sentencepiece"), "subword_vocab": positive_int,
    },
}
# fmt: on
# how the CLI spells a data setting, where not --KEY-WITH-DASHES
DATA_FLAGS = {
    "translate": {"joint_vocab": "--separate-vocab"},
    "lm": {
        "source": "--data/--dataset",
        "use_random_iter": "--random-iter",
        "subword_vocab": "--vocab-size",
    },
}


def build_train(task: str, values: Mapping[str, Any]) -> Any:
    """The task's train config from ``values`` (unknown keys named)."""
    cls = TRAIN_CONFIGS[task]
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - names)
    if unknown:
        message = _("unknown {cls} keys {unknown}; expected some of {names}")
        raise ValueError(message.format(cls=cls.__name__, unknown=unknown, names=sorted(names)))
    return cls(**values)


def flag_of(f: dataclasses.Field) -> str | None:
    """The command-line flag of a config field: its ``flag`` metadata (None: it has none),
    else ``--name-with-dashes``."""
    return f.metadata.get("flag", "--" + f.name.replace("_", "-"))


@dataclass(frozen=True)
class Recipe:
    """A named recipe of ``task``; validated on creation (``TypeError``/``ValueError``
    naming the field).

    ``model``: the model config (a translator's also names its ``arch``; a language
    model's ``arch`` is "rnn", the default, or "transformer"); None only for the
    translator's defaults, whose model is the arch's registered default config.
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
            raise ValueError(_("Recipe.name must be a non-empty str, got ''"))
        one_of("Recipe.task", self.task, TASKS)
        where = f"recipe {self.name!r}"
        _text(f"{where}: doc", self.doc)
        self._check_model(where)
        for section in ("train", "data"):
            values = getattr(self, section)
            if not isinstance(values, Mapping):
                message = _(
                    "{where}: {section} must be a mapping of setting names to values, got {type}"
                )
                raise TypeError(
                    message.format(where=where, section=section, type=type(values).__name__)
                )
            object.__setattr__(self, section, MappingProxyType(dict(values)))
        try:
            train = dict(self.train)
            if train.get("schedule") in WITHOUT_BUDGET and train.get("time_budget_s") is None:
                build_train(self.task, {**train, "schedule": WITHOUT_BUDGET[train["schedule"]]})
                train["time_budget_s"] = 60.0  # and with a budget, as given
            build_train(self.task, train)
        except (TypeError, ValueError) as e:
            raise type(e)(_("{where}: train: {error}").format(where=where, error=e)) from None
        checks = DATA_CHECKS[self.task]
        unknown = sorted(set(self.data) - set(checks))
        if unknown:
            message = _("{where}: unknown data setting(s) {unknown}; expected some of {checks}")
            raise ValueError(message.format(where=where, unknown=unknown, checks=sorted(checks)))
        for key, value in self.data.items():
            checks[key](f"{where}: data.{key}", value)

    @property
    def lm_arch(self) -> str:
        """A language-model recipe's arch: ``arch``, or "rnn"."""
        return self.arch or "rnn"

    def _check_model(self, where: str) -> None:
        if self.task == "lm":
            expected = LM_ARCHS[one_of(f"{where}: arch", self.lm_arch, LM_ARCHS)]
        else:
            if self.arch is not None:
                one_of(f"{where}: arch", self.arch, available_archs())
            if self.model is not None and self.arch is None:
                message = _("{where}: arch is required with a model config")
                raise ValueError(message.format(where=where))
            if self.model is None:
                return  # the defaults: the arch's registered config
            expected = type(arch_config(self.arch))
        if not isinstance(self.model, expected):
            message = _("{where}: model must be a {expected}, got {type}")
            raise TypeError(
                message.format(
                    where=where, expected=expected.__name__, type=type(self.model).__name__
                )
            )


@dataclass(frozen=True)
class Resolved:
    """A run's validated settings and where each came from.

    ``arch``: the translator's, or the language model's ("rnn", "transformer").
    ``train``: ``TrainConfig``/``LMTrainConfig``; ``data``: the data loader's arguments (a
    translator's as its checkpoint records them: those set, and the seed; a language
    model's ``num_steps`` is its Transformer's context unless set). ``sources``:
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
