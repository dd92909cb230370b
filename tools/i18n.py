"""The catalog's workflow: extract the messages (Babel), update each language's ``.po``,
compile the ``.mo`` that ships, and check that nothing is missing or stale.

    python -m tools.i18n update    # after changing messages: new ones appear untranslated,
                                   # changed ones fuzzy (to re-check), removed ones obsolete
    python -m tools.i18n compile   # .po -> .mo (package data)
    python -m tools.i18n check     # what tests/i18n asserts: nothing missing, fuzzy or obsolete
    python -m tools.i18n todo zh   # the untranslated and fuzzy messages, one area after another

Messages are the first argument of ``_``/``gettext``/``N_`` (and ``ngettext``'s two) with a
literal string; a comment ``# i18n: ...`` just above one reaches the translator.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import string
import sys
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.extract import extract_from_file
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po, write_po

from attnkit.i18n.catalog import AREAS, COVERAGE, LOCALE_DIR, PARTIAL

SRC = Path(__file__).resolve().parents[1] / "src" / "attnkit"
KEYWORDS = {"_": None, "gettext": None, "N_": None, "ngettext": (1, 2)}
# fixed dates keep the files byte-stable between runs (history lives in git)
STAMP = dt.datetime(2026, 12, 7, tzinfo=dt.UTC)


def area_files(area: str) -> list[Path]:
    if area == "argparse":
        return [Path(argparse.__file__)]
    found: set[Path] = set()
    for pattern in AREAS[area]:
        found.update(p for p in SRC.glob(pattern) if p.is_file())
    return sorted(found)


def extract(area: str) -> Catalog:
    """The template: every message of ``area``'s source files, in source order."""
    template = Catalog(project="attnkit", creation_date=STAMP, revision_date=STAMP)
    keywords = {"_": None, "ngettext": (1, 2)} if area == "argparse" else KEYWORDS
    for path in area_files(area):
        where = path.name if area == "argparse" else str(path.relative_to(SRC))
        for lineno, message, comments, context in extract_from_file(
            "python", str(path), keywords=keywords, comment_tags=("i18n:",), strip_comment_tags=True
        ):
            template.add(message, None, [(where, lineno)], auto_comments=comments, context=context)
    return template


def shown_by(surface: str) -> set[str]:
    """The messages a surface looks up: ``cli-help``, the command line's help (every parser
    built, in English, while the lookups are recorded)."""
    from attnkit.i18n import recording, use_language

    if surface != "cli-help":
        raise ValueError(f"unknown surface {surface!r}")
    from attnkit.cli import build_parser

    with use_language("en"), recording() as seen:
        build_parser()
    return set(seen)


def required(language: str, area: str) -> Catalog:
    """The template of what ``language`` must translate in ``area``: all of it, or for a
    partial coverage (``PARTIAL``) what the surface named there shows."""
    template = extract(area)
    surface = PARTIAL.get((language, area))
    if surface is None:
        return template
    wanted = shown_by(surface)
    for message in list(template):
        if message.id and message.id not in wanted:
            template.delete(message.id, context=message.context)
    return template


def po_path(language: str, area: str) -> Path:
    return LOCALE_DIR / language / "LC_MESSAGES" / f"{area}.po"


def read(language: str, area: str) -> Catalog | None:
    path = po_path(language, area)
    if not path.exists():
        return None
    with path.open("rb") as f:
        return read_po(f, locale=language)


def write(language: str, area: str, catalog: Catalog) -> None:
    path = po_path(language, area)
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    write_po(buffer, catalog, width=100, include_lineno=False, sort_output=False)
    path.write_bytes(buffer.getvalue())


def compiled(catalog: Catalog) -> bytes:
    buffer = io.BytesIO()
    write_mo(buffer, catalog, use_fuzzy=False)
    return buffer.getvalue()


def update(language: str, area: str) -> Catalog:
    template = required(language, area)
    catalog = read(language, area) or Catalog(
        locale=language, project="attnkit", creation_date=STAMP, revision_date=STAMP
    )
    catalog.creation_date = catalog.revision_date = STAMP
    catalog.fuzzy = False  # the header: gettext reads the charset from it
    catalog.project, catalog.version = "attnkit", "0.1"
    catalog.copyright_holder = catalog.last_translator = "the attnkit developers"
    catalog.msgid_bugs_address = ""
    catalog.language_team = f"attnkit {language}"
    catalog.update(template, no_fuzzy_matching=False, update_header_comment=False)
    write(language, area, catalog)
    return catalog


def fields(text: str) -> set[str]:
    """The placeholders a message's formatting needs: ``{name}`` and ``%(name)s``."""
    import re

    names = {f"%({m})" for m in re.findall(r"%\((\w+)\)", text)}
    with contextlib.suppress(ValueError):  # a lone brace: not a format string
        names |= {
            "{" + (f or "") + "}"
            for _lit, f, _spec, _conv in string.Formatter().parse(text)
            if f is not None
        }
    return names


def problems(language: str, area: str) -> dict[str, list[str]]:
    """What keeps ``language``'s ``area`` from being complete: messages missing, fuzzy (the
    English changed since it was translated), obsolete (no longer in the code), with other
    placeholders than their source, and a ``.mo`` that is not the ``.po`` compiled."""
    found: dict[str, list[str]] = {"missing": [], "fuzzy": [], "obsolete": [], "placeholders": [], "stale_mo": []}  # fmt: skip
    catalog = read(language, area)
    template = required(language, area)
    if catalog is None:
        found["missing"] = [str(m.id) for m in template if m.id]
        return found
    for message in template:
        if not message.id:
            continue
        have = catalog.get(message.id, context=message.context)
        string_ = None if have is None else have.string
        strings = list(string_) if isinstance(string_, tuple) else [string_]
        if have is None or not all(strings):
            found["missing"].append(str(message.id))
        elif have.fuzzy:
            found["fuzzy"].append(str(message.id))
        else:
            sources = message.id if isinstance(message.id, tuple) else (message.id,)
            if any(
                fields(s) != fields(sources[-1] if len(sources) > 1 else sources[0])
                for s in strings
            ):
                found["placeholders"].append(str(message.id))
    ids = {(m.id, m.context) for m in template}
    found["obsolete"] = [str(m.id) for m in catalog if m.id and (m.id, m.context) not in ids]
    found["obsolete"] += [str(key) for key in catalog.obsolete]
    mo = po_path(language, area).with_suffix(".mo")
    if not mo.exists() or mo.read_bytes() != compiled(catalog):
        found["stale_mo"].append(mo.name)
    return found


def fill(language: str, area: str, translations: dict[str, str | list[str]]) -> int:
    """Write ``translations`` (``{English source: translation}``; a list for a plural) into
    ``language``'s ``area``, clearing the fuzzy mark of each; returns how many matched."""
    catalog = read(language, area) or update(language, area)
    done = 0
    for message in catalog:
        if message.id and not isinstance(message.id, tuple) and message.id in translations:
            message.string = translations[message.id]
        elif isinstance(message.id, tuple) and message.id[0] in translations:
            message.string = tuple(translations[message.id[0]])
        else:
            continue
        message.flags.discard("fuzzy")
        message.previous_id = []
        done += 1
    write(language, area, catalog)
    po_path(language, area).with_suffix(".mo").write_bytes(compiled(catalog))
    return done


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.i18n", description=__doc__.split("\n")[0]
    )
    parser.add_argument("action", choices=["update", "compile", "check", "todo", "fill"])
    parser.add_argument("languages", nargs="*", default=list(COVERAGE))
    parser.add_argument("--area", action="append", help="only these areas (repeatable)")
    parser.add_argument("--json", help="fill: a JSON file {English source: translation}")
    a = parser.parse_args(argv)
    if a.action == "fill":
        import json

        table = json.loads(Path(a.json).read_text(encoding="utf-8"))
        for language in a.languages:
            for area in a.area or COVERAGE[language]:
                print(f"{language}/{area}: {fill(language, area, table)} filled")
        return 0
    bad = 0
    for language in a.languages:
        for area in a.area or COVERAGE[language]:
            if a.action == "update":
                update(language, area)
            if a.action in ("update", "compile"):
                catalog = read(language, area)
                if catalog is not None:
                    po_path(language, area).with_suffix(".mo").write_bytes(compiled(catalog))
            if a.action in ("check", "todo", "update"):
                found = problems(language, area)
                count = sum(map(len, found.values()))
                bad += count
                if count or a.action == "check":
                    print(
                        f"{language}/{area}: "
                        + ", ".join(f"{len(v)} {k}" for k, v in found.items())
                    )
                if a.action == "todo":
                    for kind in ("missing", "fuzzy", "placeholders"):
                        for message in found[kind]:
                            print(f"  [{kind}] {message}")
    return 1 if bad and a.action == "check" else 0


if __name__ == "__main__":
    sys.exit(main())
