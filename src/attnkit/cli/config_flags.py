"""Command-line flags made from config dataclasses, and the line that says where a run's
settings came from.

Every field with a ``help`` in its metadata (``attnkit.training.config.setting``) becomes
a flag: ``--name-with-dashes`` or its ``flag`` metadata (None: no flag), of the field's
type (``parse`` metadata: its own conversion; a bool is a switch), with ``choices`` and
``metavar`` from the metadata and the help text ending in the command's default. Flags
default to None, so a flag not given is told from one given at its default value.
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing
from collections.abc import Collection, Mapping
from typing import Any

from attnkit.i18n import _

__all__ = ["add_config_flags", "describe", "given_flags"]


def _scalar(hint: Any) -> Any:
    """``int | None`` -> int; a plain type as it is."""
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        return args[0] if len(args) == 1 else str
    return hint if hint in (int, float, str, bool) else str


def add_config_flags(
    group: argparse._ActionsContainer,
    cls: type,
    *,
    prefix: str,
    defaults: Mapping[str, Any] | None = None,
    skip: Collection[str] = (),
) -> list[str]:
    """Add a flag for each documented field of dataclass ``cls`` to ``group``; its value
    lands in ``args.<prefix><field>`` (None when not given). ``defaults``: the command's
    default of a field where it is not the field's own (shown in the help). ``skip``:
    fields left out (a flag another config's field of the same name already made).
    Returns the flags added."""
    from attnkit.training.recipes import flag_of

    hints = typing.get_type_hints(cls)
    added = []
    for f in dataclasses.fields(cls):
        flag = flag_of(f)
        if "help" not in f.metadata or flag is None or f.name in skip:
            continue
        typ = _scalar(hints[f.name])
        default = (defaults or {}).get(f.name, f.default)
        help_ = _(f.metadata["help"])  # the field's documentation, in its own area
        if default is not None and typ is not bool:
            help_ = _("{help} (default {default})").format(help=help_, default=default)
        kwargs: dict[str, Any] = {"dest": prefix + f.name, "default": None, "help": help_}
        if typ is bool:
            kwargs["action"] = "store_true"
        else:
            kwargs["type"] = f.metadata.get("parse", typ)
            kwargs["metavar"] = f.metadata.get("metavar", f.name.upper())
            if "choices" in f.metadata:
                kwargs["choices"] = f.metadata["choices"]
                kwargs["metavar"] = f.metadata.get("metavar")  # argparse lists the choices
        group.add_argument(flag, **kwargs)
        added.append(flag)
    return added


def given_flags(args: argparse.Namespace, prefix: str) -> dict[str, Any]:
    """The flags of ``add_config_flags(prefix=prefix)`` that were given: field -> value."""
    return {
        name[len(prefix) :]: value
        for name, value in vars(args).items()
        if name.startswith(prefix) and value is not None
    }


def describe(resolved) -> str:
    """One line for the log: what the preset and the flags set (flags of the command line
    only), then where the rest came from (``attnkit.training.recipes.Resolved``)."""
    from attnkit.training.recipes import flag_of

    values = {
        **{f"model.{k}": v for k, v in dataclasses.asdict(resolved.model).items()},
        **{f"train.{k}": v for k, v in dataclasses.asdict(resolved.train).items()},
        **{f"data.{k}": v for k, v in resolved.data.items()},
    }
    hidden = {"data.seed"} | {
        f"train.{f.name}" for f in dataclasses.fields(resolved.train) if flag_of(f) is None
    }
    parts = []
    preset = _("preset {name}").format(name=repr(resolved.preset))
    for label, name in ((f"preset {resolved.preset}", preset), ("flag", _("flags"))):
        shown = [
            f"{key.split('.', 1)[1]}={values[key]!r}"
            for key, source in resolved.sources.items()
            if source == label and key in values and key not in hidden
        ]
        if shown:
            parts.append(_("{source}: {values}").format(source=name, values=", ".join(shown)))
    rest = _("the checkpoint's") if "checkpoint" in resolved.sources.values() else _("defaults")
    # i18n: between the parts of the settings line ("preset 'x': ...; flags: ...; the rest: ...")
    return _("; ").join([*parts, _("the rest: {rest}").format(rest=rest)])
