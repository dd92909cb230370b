"""A generated English-French corpus: small grammar, correct French, made for attention.

The default training corpus of attnkit. It is built here from a small lexicon
(:mod:`attnkit.data.synthetic_fr_lexicon`: the nouns, adjectives, verbs and pronouns)
and a handful of sentence patterns, so it needs no download and is deterministic under
a seed. The French follows the rules that make attention maps interesting:

- gendered nouns with articles: ``le/la/l'/les``, ``un/une/des``, and ``de/d'``
  after a negation (``je n'ai pas de voiture``) or before a plural adjective that
  precedes the noun (``j'ai de grandes maisons``);
- adjectives after the noun, agreeing in gender and number (``the red cars`` /
  ``les voitures rouges``: crossing alignments); five adjectives before the noun
  (``petit, grand, beau, bon, nouveau``) with ``bel``/``nouvel`` before a masculine
  singular noun that starts with a vowel (``le nouvel ordinateur``);
- subject pronouns with present-tense verbs, regular ``-er`` verbs (``nous mangeons``,
  ``j'achète``) and irregular ``être, avoir, aller, faire, voir, prendre``;
- negation ``ne ... pas`` with ``n'`` before a vowel (``je n'aime pas``);
- elision (``j'aime``, ``l'homme``, ``d'orange``) and ``à + le = au``, ``à + les = aux``.

Every noun of the lexicon that starts with ``h`` has a mute h (``l'homme``,
``l'hôpital``). Gender of ``je``/``tu``/``nous``/``ils`` defaults to masculine.
English "you" is always ``tu`` and "they" always ``ils``, so each English sentence
has exactly one French translation. Objects of ``like``/``aimer`` and places after
``go``/``aller`` are always definite (``j'aime les pommes``, ``je vais à la gare``).

Sentences come out in the book's preprocessed form (lowercase, a space before
``, . ! ?``), e.g. ``("the red car is big .", "la voiture rouge est grande .")``,
at most :data:`MAX_TOKENS` tokens per side.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from attnkit._validate import one_of, optional, positive_int
from attnkit.data.synthetic_fr_lexicon import (
    ADJECTIVES,
    ALL_KINDS,
    ENGLISH_BE,
    LIVING_KINDS,
    NOUNS,
    PRONOUNS,
    VERBS,
    Adjective,
)
from attnkit.i18n import _

__all__ = [
    "MAX_TOKENS",
    "NounPhrase",
    "generate_pairs",
    "sample_pair",
    "translate_parts",
]

MAX_TOKENS = 10  # per side, final "." included, <eos> excluded
_TRANSITIVE = [v for v in VERBS if v not in ("be", "go")]

_VOWELS = set("aeiouyéèêëàâîïôöûùœh")  # every h-word in the lexicon has a mute h

# --------------------------------------------------------------------------- rendering


@dataclass(frozen=True)
class NounPhrase:
    """A noun with its article, number and at most one adjective (English keys)."""

    noun: str
    plural: bool = False
    definite: bool = True
    adjective: str | None = None

    def __post_init__(self) -> None:
        one_of("noun", self.noun, NOUNS)
        optional(one_of, "adjective", self.adjective, ADJECTIVES)


def _elides(word: str) -> bool:
    return word[0] in _VOWELS


def _adj_form(adj: Adjective, fem: bool, plural: bool) -> str:
    return adj.forms[int(fem) + 2 * int(plural)]


def _np_en(np: NounPhrase) -> list[str]:
    noun = NOUNS[np.noun]
    words = [np.adjective] if np.adjective else []
    words.append(noun.en_pl if np.plural else noun.en)
    if np.definite:
        return ["the", *words]
    if np.plural:
        return words  # "i have red cars"
    return ["an" if words[0][0] in "aeiou" else "a", *words]


def _np_fr(np: NounPhrase, *, negated: bool = False, after_a: bool = False) -> list[str]:
    """French noun phrase; ``negated`` turns un/une/des into de/d'; ``after_a`` contracts."""
    noun = NOUNS[np.noun]
    fem, pl = noun.fem, np.plural
    noun_word = noun.fr_pl if pl else noun.fr
    adj = ADJECTIVES[np.adjective] if np.adjective else None
    pre: str | None = None
    words = [noun_word]
    if adj is not None:
        form = _adj_form(adj, fem, pl)
        if adj.before:
            if adj.masc_vowel and not fem and not pl and _elides(noun_word):
                form = adj.masc_vowel
            pre = form
            words = [form, noun_word]
        else:
            words = [noun_word, form]
    first, rest = words[0], words[1:]
    if np.definite:
        if pl:
            art = "aux" if after_a else "les"
            return [art, first, *rest]
        if _elides(first):
            return [*(["à"] if after_a else []), "l'" + first, *rest]
        if fem:
            return [*(["à"] if after_a else []), "la", first, *rest]
        return ["au" if after_a else "le", first, *rest]
    if after_a:
        raise ValueError("indefinite noun phrases after 'à' are not generated")
    if negated or (pl and pre is not None):
        return ["d'" + first, *rest] if _elides(first) else ["de", first, *rest]
    if pl:
        return ["des", first, *rest]
    return ["une" if fem else "un", first, *rest]


def translate_parts(
    subject: str | NounPhrase,
    verb: str,
    complement: str | NounPhrase,
    *,
    negative: bool = False,
) -> tuple[str, str]:
    """Render one sentence in English and French (book-preprocessed form).

    ``subject``: a pronoun of :data:`PRONOUNS` or a :class:`NounPhrase`.
    ``verb``: a key of :data:`VERBS`. For ``"be"`` the complement is an adjective
    (English key of :data:`ADJECTIVES`); for ``"go"`` a definite place
    :class:`NounPhrase` (rendered with ``to``/``à``); otherwise the object
    :class:`NounPhrase`.

    >>> translate_parts(NounPhrase("car", adjective="red"), "be", "big")
    ('the red car is big .', 'la voiture rouge est grande .')
    """
    v = VERBS[one_of("verb", verb, VERBS)]
    en_subj, fr_subj, person, fem, plural = _subject(subject)
    # verb
    fr_verb = v.fr[person]
    if negative:
        fr_v = ["n'" + fr_verb, "pas"] if _elides(fr_verb) else ["ne", fr_verb, "pas"]
    elif person == 0 and _elides(fr_verb):
        fr_subj = ["j'" + fr_verb]
        fr_v = []
    else:
        fr_v = [fr_verb]
    en_v = _english_verb(verb, subject, negative)
    en_c, fr_c = _complement(verb, complement, fem, plural, negative)
    en = [*en_subj, *en_v, *en_c, "."]
    fr = [*fr_subj, *fr_v, *fr_c, "."]
    return " ".join(en), " ".join(fr)


def _subject(subject: str | NounPhrase) -> tuple[list[str], list[str], int, bool, bool]:
    """(English words, French words, person index into ``Verb.fr``, feminine, plural)."""
    if isinstance(subject, NounPhrase):
        person = 4 if subject.plural else 2
        return _np_en(subject), _np_fr(subject), person, NOUNS[subject.noun].fem, subject.plural
    if not isinstance(subject, str):
        raise TypeError(
            f"subject must be a NounPhrase or a pronoun (str), got {type(subject).__name__}"
        )
    fr_pron, person, fem, plural = PRONOUNS[one_of("subject", subject, PRONOUNS)]
    return [subject], [fr_pron], person, fem, plural


def _english_verb(verb: str, subject: str | NounPhrase, negative: bool) -> list[str]:
    if isinstance(subject, NounPhrase):
        third_sg, en_be = not subject.plural, "are" if subject.plural else "is"
    else:
        third_sg, en_be = subject in ("he", "she"), ENGLISH_BE[subject]
    if verb == "be":
        return [en_be, "not"] if negative else [en_be]
    base, third = VERBS[verb].en
    if negative:
        return ["does" if third_sg else "do", "not", *base.split()]
    return (third if third_sg else base).split()


def _complement(
    verb: str, complement: str | NounPhrase, fem: bool, plural: bool, negative: bool
) -> tuple[list[str], list[str]]:
    """English and French words of the complement: an adjective after "be", a place
    after "go" (``to``/``à``), else the object."""
    if verb == "be":
        if not isinstance(complement, str):
            raise TypeError(
                f"complement of 'be' must be an adjective (str), got {type(complement).__name__}"
            )
        adjective = ADJECTIVES[one_of("complement of 'be'", complement, ADJECTIVES)]
        return [complement], [_adj_form(adjective, fem, plural)]
    if not isinstance(complement, NounPhrase):
        raise TypeError(
            f"complement of {verb!r} must be a NounPhrase, got {type(complement).__name__}"
        )
    if VERBS[verb].definite_only and not complement.definite:
        raise ValueError(f"complement of {verb!r} must be definite (the ...)")
    if verb == "go":
        return ["to", *_np_en(complement)], _np_fr(complement, after_a=True)
    return _np_en(complement), _np_fr(complement, negated=negative)


# --------------------------------------------------------------------------- sampling


# "le grand père" reads as "grand-père" (grandfather): not generated (translate_parts renders it).
_AVOID_IN_GENERATION = {(a, n) for a in ("big", "small") for n in ("father", "mother")}


def _sample_np(rng: random.Random, kinds, *, p_adj: float, p_definite: float, nouns=None):
    pool = [n for n in NOUNS.values() if n.kind in kinds and (nouns is None or n.en in nouns)]
    noun = rng.choice(pool)
    adjective = None
    if rng.random() < p_adj:
        adjs = [
            a.en
            for a in ADJECTIVES.values()
            if noun.kind in a.kinds and (a.en, noun.en) not in _AVOID_IN_GENERATION
        ]
        adjective = rng.choice(adjs)
    return NounPhrase(
        noun.en,
        plural=rng.random() < 0.4,
        definite=rng.random() < p_definite,
        adjective=adjective,
    )


def _sample_subject(rng: random.Random, kinds) -> str | NounPhrase:
    if rng.random() < 0.5:
        return rng.choice(list(PRONOUNS))
    np = _sample_np(rng, kinds, p_adj=0.4, p_definite=0.85)
    if np.plural and not np.definite:  # no bare-plural subjects ("dogs eat ...")
        np = NounPhrase(np.noun, True, True, np.adjective)
    return np


def sample_pair(rng: random.Random) -> tuple[str, str]:
    """One random (English, French) pair; may exceed :data:`MAX_TOKENS`."""
    negative = rng.random() < 0.3
    r = rng.random()
    if r < 0.25:  # X is ADJ
        subject = _sample_subject(rng, ALL_KINDS - {"place"})
        kind = NOUNS[subject.noun].kind if isinstance(subject, NounPhrase) else "person"
        used = subject.adjective if isinstance(subject, NounPhrase) else None
        adj = rng.choice([a.en for a in ADJECTIVES.values() if kind in a.kinds and a.en != used])
        if isinstance(subject, NounPhrase):
            subject = NounPhrase(subject.noun, subject.plural, True, subject.adjective)
        return translate_parts(subject, "be", adj, negative=negative)
    if r < 0.4:  # X goes to the PLACE
        subject = _sample_subject(rng, LIVING_KINDS)
        place = _sample_np(rng, {"place"}, p_adj=0.3, p_definite=1.0)
        return translate_parts(subject, "go", place, negative=negative)
    verb = rng.choice(_TRANSITIVE)
    v = VERBS[verb]
    subject = _sample_subject(rng, LIVING_KINDS if v.animal_subject else {"person"})
    p_definite = 1.0 if v.definite_only else 0.6
    obj = _sample_np(rng, v.objects, p_adj=0.5, p_definite=p_definite, nouns=v.nouns)
    return translate_parts(subject, verb, obj, negative=negative)


def generate_pairs(num_pairs: int = 20000, seed: int = 0) -> list[tuple[str, str]]:
    """``num_pairs`` distinct (English, French) pairs, deterministic under ``seed``.

    Each side has at most :data:`MAX_TOKENS` tokens. Pairs come in generation order.
    """
    positive_int("num_pairs", num_pairs)
    rng = random.Random(f"attnkit-synthetic-fr:{seed}")
    seen: set[tuple[str, str]] = set()
    pairs: list[tuple[str, str]] = []
    attempts, max_attempts = 0, 50 * num_pairs + 1000
    while len(pairs) < num_pairs:
        attempts += 1
        if attempts > max_attempts:
            message = _(
                "num_pairs={num_pairs} is more distinct pairs than the grammar yields "
                "in {max_attempts} draws (got {got})"
            )
            raise ValueError(
                message.format(num_pairs=num_pairs, max_attempts=max_attempts, got=len(pairs))
            )
        pair = sample_pair(rng)
        if pair in seen:
            continue
        if max(len(pair[0].split()), len(pair[1].split())) > MAX_TOKENS:
            continue
        seen.add(pair)
        pairs.append(pair)
    return pairs
