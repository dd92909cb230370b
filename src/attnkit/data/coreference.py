"""A generated English-French coreference corpus: "the animal didn't cross the street
because it was too tired", with ``it`` -> ``il``/``elle`` and the agreement it forces.

Kept apart from the default corpus (:mod:`attnkit.data.synthetic_fr`, whose order is part
of the demo's results): nothing here draws from its random stream or changes its tables.

Every coreference sentence is one *frame* (a verb with two noun slots), two nouns of
different French gender and a *predicate* that fits only one of them::

    the dog didn't eat the soup because it was too spicy .
    le chien n'a pas mangé la soupe parce qu'elle était trop épicée .      (the soup)
    the dog didn't eat the soup because it was too tired .
    le chien n'a pas mangé la soupe parce qu'il était trop fatigué .       (the dog)

An *agent* predicate (tired, scared ...) fits the first noun (an animal), an *object*
predicate (spicy, wide, heavy ...) the second; in the ``fit`` frame ("the book didn't fit
in the box because it was too big / small") both nouns are things and only the roles
decide. The pronoun always comes after both nouns, so the second noun is always the
nearer one.

Balance: within every frame there are as many agent predicates as object predicates, and
every noun pair comes in both gender orders (masculine subject with a feminine object and
the reverse), so the four cells (antecedent first / second) x (masculine / feminine) hold
the same number of sentences: the gender of the pronoun, the position of the antecedent
and its nearness each predict the answer for half of them. The held-out triples are drawn
per cell, so the test set keeps that balance (``balance`` measures it).

Held out for the test split (``group`` in the contrastive file):

- ``combination``: (subject, object, predicate) triples never seen in training, each of
  their nouns, pairs and predicates seen in other triples;
- ``predicate``: two predicates (slow, an agent's; narrow, a crossing's) seen in training
  only in simple sentences ("the cow was too slow ." -> "la vache était trop lente .").

Simple sentences ("the N was too ADJ .") for every noun and every predicate that fits it
teach each noun's gender and each predicate's forms. Sentences are in the book's
preprocessed form (lower case, a space before ``.``), at most :data:`MAX_TOKENS` tokens a
side: a word-level translator with ``max_len`` >= 15 takes them all.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from attnkit._validate import non_negative_int, positive_int, probability
from attnkit.i18n import _

__all__ = [
    "CONTRAST_COLUMNS",
    "FRAMES",
    "MAX_TOKENS",
    "PREDICATES",
    "SEED_SENTENCES",
    "CorefItem",
    "CoreferenceCorpus",
    "balance",
    "bundled_contrast_set",
    "coreference_corpus",
    "coreference_data",
    "different_genders",
    "write_contrast_tsv",
]

MAX_TOKENS = 14  # per side, "." included, <eos> excluded
CONTRAST_COLUMNS = ("source", "correct", "contrastive", "antecedent", "distractor",
                    "antecedent_target", "distractor_target", "group", "frame", "predicate",
                    "position", "gender")  # fmt: skip
BUNDLED = "contrast_en_fr.tsv"


@dataclass(frozen=True)
class _Noun:
    en: str
    fr: str  # singular, no article
    fem: bool


def _nouns(spec: str) -> tuple[_Noun, ...]:
    """ "dog chien m, cow vache f" -> nouns."""
    out = []
    for item in spec.split(","):
        en, fr, gender = item.split()
        out.append(_Noun(en, fr, gender == "f"))
    return tuple(out)


ANIMALS = _nouns(
    "animal animal m, dog chien m, cat chat m, horse cheval m, rabbit lapin m, bird oiseau m, "
    "cow vache f, mouse souris f, goat chèvre f, hen poule f, turtle tortue f, giraffe girafe f"
)


@dataclass(frozen=True)
class Predicate:
    """An adjective after "was too": its French masculine and feminine forms."""

    en: str
    masc: str
    fem: str

    def form(self, fem: bool) -> str:
        return self.fem if fem else self.masc


def _predicates(spec: str) -> dict[str, Predicate]:
    """ "tired fatigué fatiguée, ..." -> {en: Predicate}."""
    out = {}
    for item in spec.split(","):
        en, masc, fem = item.split()
        out[en] = Predicate(en, masc, fem)
    return out


PREDICATES: dict[str, Predicate] = _predicates(
    "tired fatigué fatiguée, scared effrayé effrayée, lazy paresseux paresseuse, "
    "weak faible faible, sick malade malade, slow lent lente, "
    "wide large large, long long longue, dangerous dangereux dangereuse, narrow étroit étroite, "
    "spicy épicé épicée, salty salé salée, dry sec sèche, hot chaud chaude, "
    "heavy lourd lourde, big gros grosse, full plein pleine, small petit petite"
)


@dataclass(frozen=True)
class Frame:
    """A verb with a subject slot and an object slot: its English (past, negated) and
    French (passé composé, negated) words, the nouns of each slot, and the predicates
    that fit the subject (``agent``) and the object (``thing``)."""

    name: str
    en: str  # "didn't cross the" / "didn't fit in the"
    fr: str  # "n'a pas traversé" / "n'a pas tenu dans"
    subjects: tuple[_Noun, ...]
    objects: tuple[_Noun, ...]
    agent: tuple[str, ...]  # predicates of the subject (the first noun)
    thing: tuple[str, ...]  # predicates of the object (the second noun)


FRAMES: dict[str, Frame] = {
    f.name: f
    for f in (
        Frame("cross", "didn't cross the", "n'a pas traversé", ANIMALS,
              _nouns("street rue f, road route f, river rivière f, "
                     "bridge pont m, field champ m, park parc m"),
              ("tired", "scared", "lazy"), ("wide", "long", "dangerous")),
        Frame("eat", "didn't eat the", "n'a pas mangé", ANIMALS,
              _nouns("soup soupe f, meat viande f, pie tarte f, "
                     "cake gâteau m, bread pain m, cheese fromage m"),
              ("tired", "sick", "scared", "lazy"), ("spicy", "salty", "dry", "hot")),
        Frame("carry", "didn't carry the", "n'a pas porté", ANIMALS,
              _nouns("box boîte f, suitcase valise f, chair chaise f, "
                     "bag sac m, basket panier m, piano piano m"),
              ("tired", "weak", "lazy"), ("heavy", "big", "full")),
        Frame("fit", "didn't fit in the", "n'a pas tenu dans",
              _nouns("book livre m, ball ballon m, hat chapeau m, "
                     "bottle bouteille f, lamp lampe f, plate assiette f"),
              _nouns("box boîte f, suitcase valise f, crate caisse f, "
                     "bag sac m, basket panier m, drawer tiroir m"),
              ("big",), ("small",)),
    )
}  # fmt: skip
# seen in training in simple sentences only; in coreference sentences only in the test
HELD_OUT_PREDICATES = {"cross": (("slow",), ("narrow",))}

SEED_SENTENCES = (
    "the animal didn't cross the street because it was too tired .",
    "the animal didn't cross the street because it was too wide .",
)
_SEED_TRIPLES = {("cross", "animal", "street", "tired"), ("cross", "animal", "street", "wide")}
_VOWELS = set("aeiouyéèêàâîôûh")


def _np(noun: _Noun) -> str:
    """The French noun with its definite article (l' before a vowel or mute h)."""
    if noun.fr[0] in _VOWELS:
        return "l'" + noun.fr
    return ("la " if noun.fem else "le ") + noun.fr


@dataclass(frozen=True)
class CorefItem:
    """One coreference sentence: its English, French, the contrastive French (the pronoun
    and its agreeing adjective in the other gender), the antecedent and distractor (English
    nouns of the source, and their French noun phrases: the article carries the gender), and
    how it was made."""

    source: str
    correct: str
    contrastive: str
    antecedent: str
    distractor: str
    antecedent_target: str  # the antecedent's French noun phrase ("la rue", "l'animal")
    distractor_target: str
    frame: str
    predicate: str
    position: str  # "first" (the subject) or "second" (the object)
    gender: str  # the antecedent's: "m" or "f"
    group: str = ""  # the test's: "combination" or "predicate"

    def row(self) -> dict[str, str]:
        """The item as a contrastive file's row (:data:`CONTRAST_COLUMNS`)."""
        return {c: getattr(self, c) for c in CONTRAST_COLUMNS}


def _item(frame: Frame, subj: _Noun, obj: _Noun, predicate: str) -> CorefItem:
    pred = PREDICATES[predicate]
    first = predicate in frame.agent + HELD_OUT_PREDICATES.get(frame.name, ((), ()))[0]
    ante, dist = (subj, obj) if first else (obj, subj)
    en = f"the {subj.en} {frame.en} {obj.en} because it was too {predicate} ."
    head = f"{_np(subj)} {frame.fr} {_np(obj)} parce"

    def fr(fem: bool) -> str:
        pronoun = "qu'elle" if fem else "qu'il"
        return f"{head} {pronoun} était trop {pred.form(fem)} ."

    return CorefItem(en, fr(ante.fem), fr(not ante.fem), ante.en, dist.en, _np(ante), _np(dist),
                     frame.name, predicate, "first" if first else "second",
                     "f" if ante.fem else "m")  # fmt: skip


def _triples(frame: Frame, predicates: tuple[str, ...], same_gender: bool = False):
    """(subject, object, predicate) with nouns of different genders (or the same)."""
    for subj in frame.subjects:
        for obj in frame.objects:
            if (subj.fem == obj.fem) == same_gender:
                for p in predicates:
                    yield subj, obj, p


def simple_pairs() -> list[tuple[str, str]]:
    """ "the N was too ADJ ." for every noun and every predicate that fits it, held-out
    predicates included (this is where the model meets them)."""
    pairs: dict[tuple[str, str], None] = {}
    for frame in FRAMES.values():
        held = HELD_OUT_PREDICATES.get(frame.name, ((), ()))
        for nouns, preds in ((frame.subjects, frame.agent + held[0]),
                             (frame.objects, frame.thing + held[1])):  # fmt: skip
            for noun in nouns:
                for p in preds:
                    form = PREDICATES[p].form(noun.fem)
                    en, fr = f"the {noun.en} was too {p} .", f"{_np(noun)} était trop {form} ."
                    pairs[(en, fr)] = None
    return list(pairs)


@dataclass
class CoreferenceCorpus:
    """The corpus under one seed: ``train`` coreference items, ``test`` items (held out,
    with their ``group``), and the simple sentences (training only)."""

    train: list[CorefItem]
    test: list[CorefItem]
    simple: list[tuple[str, str]]
    seed: int

    def training_pairs(self) -> list[tuple[str, str]]:
        """Every training (English, French) pair: coreference and simple, shuffled."""
        pairs = [(it.source, it.correct) for it in self.train] + list(self.simple)
        random.Random(f"attnkit-coreference-order:{self.seed}").shuffle(pairs)
        return pairs


def coreference_corpus(
    seed: int = 0,
    test_fraction: float = 0.2,
    frames: tuple[str, ...] | None = None,
    *,
    same_gender: bool = True,
) -> CoreferenceCorpus:
    """The generated corpus: every (frame, subject, object, predicate) with nouns of
    different gender; ``test_fraction`` of the triples of each balance cell (frame,
    antecedent position, antecedent gender) held out, the seed sentences' two among
    them, and the held-out predicates' triples. ``frames``: a subset (default all)."""
    non_negative_int("seed", seed)
    probability("test_fraction", test_fraction)
    names = tuple(FRAMES) if frames is None else tuple(frames)
    unknown = [f for f in names if f not in FRAMES]
    if unknown or not names:
        raise ValueError(_("frames must be some of {names}, got {frames!r}").format(
            names=", ".join(FRAMES), frames=frames))  # fmt: skip
    rng = random.Random(f"attnkit-coreference:{seed}")
    train, test = [], []
    for name in names:
        frame = FRAMES[name]
        cells: dict[tuple[str, str], list[CorefItem]] = {}
        for subj, obj, p in _triples(frame, frame.agent + frame.thing):
            it = _item(frame, subj, obj, p)
            cells.setdefault((it.position, it.gender), []).append(it)
        left = {}  # noun pair -> its triples still in training: one at least stays
        for it in (it for items in cells.values() for it in items):
            left[_key(it)[1:3]] = left.get(_key(it)[1:3], 0) + 1
        for key in sorted(cells):
            items = cells[key]
            rng.shuffle(items)
            forced = [it for it in items if _key(it) in _SEED_TRIPLES]
            rest = [it for it in items if _key(it) not in _SEED_TRIPLES]
            k = max(0, round(test_fraction * len(items)) - len(forced))
            held = []
            for it in forced + rest:
                pair = _key(it)[1:3]
                if (it in forced or len(held) < k + len(forced)) and left[pair] > 1:
                    held.append(it)
                    left[pair] -= 1
                else:
                    train.append(it)
            test += [_grouped(it, "combination") for it in held]
        if same_gender:
            train += [_item(frame, s, o, p)
                      for s, o, p in _triples(frame, frame.agent + frame.thing, True)]  # fmt: skip
        unseen = HELD_OUT_PREDICATES.get(name)
        if unseen:
            test += [_grouped(_item(frame, s, o, p), "predicate")
                     for s, o, p in _triples(frame, unseen[0] + unseen[1])]  # fmt: skip
    return CoreferenceCorpus(train, test, simple_pairs(), seed)


def different_genders(it: CorefItem) -> bool:
    """Whether the item's two nouns differ in French gender (every test item does; the
    training split also has pairs of one gender, so that the pronoun's gender is the
    antecedent's and never follows from the other noun's)."""
    frame = FRAMES[it.frame]
    nouns = {n.en: n.fem for n in frame.subjects + frame.objects}
    return nouns[it.antecedent] != nouns[it.distractor]


def _key(it: CorefItem) -> tuple[str, str, str, str]:
    first = it.position == "first"
    subj, obj = (it.antecedent, it.distractor) if first else (it.distractor, it.antecedent)
    return (it.frame, subj, obj, it.predicate)


def _grouped(it: CorefItem, group: str) -> CorefItem:
    return CorefItem(**{**it.__dict__, "group": group})


def balance(items: list[CorefItem]) -> dict[str, float]:
    """The share of ``items`` each meaning-blind rule gets right: the masculine pronoun
    always, the first noun, the nearer noun (always the second here), and the count."""
    n = len(items)
    if not n:
        raise ValueError(_("no items to measure"))
    masc = sum(it.gender == "m" for it in items) / n
    first = sum(it.position == "first" for it in items) / n
    return {"items": n, "masculine": masc, "first": first, "nearest": 1.0 - first}


def write_contrast_tsv(items: list[CorefItem], path: str | Path) -> Path:
    """Write ``items`` as a contrastive file (UTF-8 TSV, header :data:`CONTRAST_COLUMNS`),
    what ``attnkit translate contrast --pairs`` reads; return the path."""
    if not items:
        raise ValueError(_("no items to write"))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["\t".join(CONTRAST_COLUMNS)]
    for it in items:
        row = it.row()
        if any("\t" in v or "\n" in v for v in row.values()):
            raise ValueError(_("a tab or newline in {row!r}").format(row=row))
        lines.append("\t".join(row[c] for c in CONTRAST_COLUMNS))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def coreference_data(corpus: CoreferenceCorpus, *, max_len: int = 16, val_pairs: int = 40):
    """A word-level ``TranslationData`` of ``corpus``: its training pairs (the last
    ``val_pairs`` of them kept for validation), the held-out items as the test split,
    vocabularies of every training word (``min_freq`` 1: the held-out predicates' words
    come from the simple sentences)."""
    from attnkit.data.fra import BOOK_RESERVED_TOKENS
    from attnkit.data.text import Vocab
    from attnkit.data.translation_data import TranslationData

    positive_int("max_len", max_len)
    non_negative_int("val_pairs", val_pairs)
    if max_len < MAX_TOKENS + 1:
        raise ValueError(
            _("max_len must be at least {n} (tokens + <eos>)").format(n=MAX_TOKENS + 1)
        )
    pairs = [(en.split(), fr.split()) for en, fr in corpus.training_pairs()]
    train, val = pairs[: len(pairs) - val_pairs], pairs[len(pairs) - val_pairs :]
    test = [(it.source.split(), it.correct.split()) for it in corpus.test]
    reserved = list(BOOK_RESERVED_TOKENS)
    src = Vocab([s for s, _ in pairs], min_freq=1, reserved_tokens=reserved)
    tgt = Vocab([t for _, t in pairs], min_freq=1, reserved_tokens=reserved)
    return TranslationData(src, tgt, train, val, test, max_len, source="coreference")


def bundled_contrast_set() -> Path:
    """The hand-written English-French contrastive set shipped with attnkit (Winograd-style
    minimal pairs in everyday Tatoeba words, both genders balanced)."""
    return Path(str(resources.files("attnkit.data").joinpath(BUNDLED)))
