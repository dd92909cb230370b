"""A generated English-French corpus: small grammar, correct French, made for attention.

The default training corpus of attnkit. It is built here from a small lexicon and
a handful of sentence patterns, so it needs no download and is deterministic under
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

__all__ = [
    "ADJECTIVES",
    "MAX_TOKENS",
    "NOUNS",
    "PRONOUNS",
    "VERBS",
    "NounPhrase",
    "generate_pairs",
    "sample_pair",
    "translate_parts",
]

MAX_TOKENS = 10  # per side, final "." included, <eos> excluded

_VOWELS = set("aeiouyéèêëàâîïôöûùœh")  # every h-word in the lexicon has a mute h

# --------------------------------------------------------------------------- lexicon


@dataclass(frozen=True)
class _Noun:
    en: str
    en_pl: str
    fr: str
    fr_pl: str
    fem: bool
    kind: str  # person | animal | object | food | place


@dataclass(frozen=True)
class _Adj:
    en: str
    forms: tuple[str, str, str, str]  # masc sg, fem sg, masc pl, fem pl
    kinds: frozenset[str]
    before: bool = False  # placed before the noun in French
    masc_vowel: str | None = None  # "bel", "nouvel" before a masculine vowel-initial noun


@dataclass(frozen=True)
class _Verb:
    en: tuple[str, str]  # base form, 3rd person singular
    fr: tuple[str, str, str, str, str]  # je, tu, il/elle, nous, ils
    objects: frozenset[str]  # noun kinds allowed as object
    animal_subject: bool = False
    nouns: frozenset[str] | None = None  # when set: the only allowed objects (by English noun)
    definite_only: bool = False  # "j'aime la pomme", never "j'aime une pomme"


def _n(en: str, fr: str, fem: bool, kind: str, en_pl: str = "", fr_pl: str = "") -> _Noun:
    return _Noun(en, en_pl or en + "s", fr, fr_pl or fr + "s", fem, kind)


_NOUN_LIST = [
    # people
    _n("man", "homme", False, "person", en_pl="men"),
    _n("woman", "femme", True, "person", en_pl="women"),
    _n("boy", "garçon", False, "person"),
    _n("girl", "fille", True, "person"),
    _n("child", "enfant", False, "person", en_pl="children"),
    _n("friend", "ami", False, "person"),
    _n("doctor", "médecin", False, "person"),
    _n("brother", "frère", False, "person"),
    _n("sister", "sœur", True, "person"),
    _n("mother", "mère", True, "person"),
    _n("father", "père", False, "person"),
    # animals
    _n("dog", "chien", False, "animal"),
    _n("cat", "chat", False, "animal"),
    _n("horse", "cheval", False, "animal", fr_pl="chevaux"),
    _n("bird", "oiseau", False, "animal", fr_pl="oiseaux"),
    _n("cow", "vache", True, "animal"),
    _n("mouse", "souris", True, "animal", en_pl="mice", fr_pl="souris"),
    # objects
    _n("car", "voiture", True, "object"),
    _n("book", "livre", False, "object"),
    _n("chair", "chaise", True, "object"),
    _n("table", "table", True, "object"),
    _n("bike", "vélo", False, "object"),
    _n("pen", "stylo", False, "object"),
    _n("letter", "lettre", True, "object"),
    _n("hat", "chapeau", False, "object", fr_pl="chapeaux"),
    _n("dress", "robe", True, "object", en_pl="dresses"),
    _n("bag", "sac", False, "object"),
    _n("key", "clé", True, "object"),
    _n("computer", "ordinateur", False, "object"),
    _n("umbrella", "parapluie", False, "object"),
    _n("shirt", "chemise", True, "object"),
    _n("box", "boîte", True, "object", en_pl="boxes"),
    _n("painting", "tableau", False, "object", fr_pl="tableaux"),
    # food
    _n("apple", "pomme", True, "food"),
    _n("cake", "gâteau", False, "food", fr_pl="gâteaux"),
    _n("orange", "orange", True, "food"),
    _n("pie", "tarte", True, "food"),
    _n("sandwich", "sandwich", False, "food", en_pl="sandwiches"),
    _n("banana", "banane", True, "food"),
    _n("egg", "œuf", False, "food"),
    _n("carrot", "carotte", True, "food"),
    _n("tomato", "tomate", True, "food", en_pl="tomatoes"),
    # places
    _n("station", "gare", True, "place"),
    _n("park", "parc", False, "place"),
    _n("school", "école", True, "place"),
    _n("market", "marché", False, "place"),
    _n("beach", "plage", True, "place", en_pl="beaches"),
    _n("museum", "musée", False, "place"),
    _n("hospital", "hôpital", False, "place", fr_pl="hôpitaux"),
    _n("church", "église", True, "place", en_pl="churches"),
    _n("office", "bureau", False, "place", fr_pl="bureaux"),
    _n("restaurant", "restaurant", False, "place"),
    _n("airport", "aéroport", False, "place"),
]
NOUNS: dict[str, _Noun] = {n.en: n for n in _NOUN_LIST}

_ALL = frozenset({"person", "animal", "object", "food", "place"})
_LIVING = frozenset({"person", "animal"})


def _a(en: str, m: str, f: str, mp: str, fp: str, kinds, **kw) -> _Adj:
    return _Adj(en, (m, f, mp, fp), frozenset(kinds), **kw)


_ADJ_LIST = [
    # after the noun
    _a("red", "rouge", "rouge", "rouges", "rouges", {"object"}),
    _a("black", "noir", "noire", "noirs", "noires", {"object", "animal"}),
    _a("white", "blanc", "blanche", "blancs", "blanches", {"object", "animal"}),
    _a("green", "vert", "verte", "verts", "vertes", {"object"}),
    _a("blue", "bleu", "bleue", "bleus", "bleues", {"object"}),
    _a("grey", "gris", "grise", "gris", "grises", {"object", "animal"}),
    _a("yellow", "jaune", "jaune", "jaunes", "jaunes", {"object"}),
    _a("happy", "heureux", "heureuse", "heureux", "heureuses", _LIVING),
    _a("tired", "fatigué", "fatiguée", "fatigués", "fatiguées", _LIVING),
    _a("kind", "gentil", "gentille", "gentils", "gentilles", _LIVING),
    _a("smart", "intelligent", "intelligente", "intelligents", "intelligentes", _LIVING),
    _a("sad", "triste", "triste", "tristes", "tristes", _LIVING),
    _a("expensive", "cher", "chère", "chers", "chères", {"object", "food"}),
    _a("fast", "rapide", "rapide", "rapides", "rapides", {"animal"}),
    _a("hot", "chaud", "chaude", "chauds", "chaudes", {"food"}),
    _a("cold", "froid", "froide", "froids", "froides", {"food"}),
    _a("clean", "propre", "propre", "propres", "propres", {"object", "place"}),
    # before the noun
    _a("small", "petit", "petite", "petits", "petites", _ALL, before=True),
    _a("big", "grand", "grande", "grands", "grandes", _ALL, before=True),
    _a(
        "beautiful",
        "beau",
        "belle",
        "beaux",
        "belles",
        _ALL - {"food"},
        before=True,
        masc_vowel="bel",
    ),
    _a("good", "bon", "bonne", "bons", "bonnes", {"food"}, before=True),
    _a(
        "new",
        "nouveau",
        "nouvelle",
        "nouveaux",
        "nouvelles",
        {"object", "place"},
        before=True,
        masc_vowel="nouvel",
    ),
]
ADJECTIVES: dict[str, _Adj] = {a.en: a for a in _ADJ_LIST}

_THINGS = frozenset({"person", "animal", "object"})
VERBS: dict[str, _Verb] = {
    "like": _Verb(
        ("like", "likes"),
        ("aime", "aimes", "aime", "aimons", "aiment"),
        _ALL,
        animal_subject=True,
        definite_only=True,
    ),
    "watch": _Verb(
        ("watch", "watches"),
        ("regarde", "regardes", "regarde", "regardons", "regardent"),
        _THINGS,
        animal_subject=True,
    ),
    "look for": _Verb(
        ("look for", "looks for"),
        ("cherche", "cherches", "cherche", "cherchons", "cherchent"),
        _THINGS | {"place"},
        animal_subject=True,
    ),
    "eat": _Verb(
        ("eat", "eats"),
        ("mange", "manges", "mange", "mangeons", "mangent"),
        frozenset({"food"}),
        animal_subject=True,
    ),
    "see": _Verb(
        ("see", "sees"),
        ("vois", "vois", "voit", "voyons", "voient"),
        _THINGS | {"place"},
        animal_subject=True,
    ),
    "find": _Verb(
        ("find", "finds"),
        ("trouve", "trouves", "trouve", "trouvons", "trouvent"),
        _THINGS,
        animal_subject=True,
    ),
    "have": _Verb(
        ("have", "has"),
        ("ai", "as", "a", "avons", "ont"),
        frozenset({"person", "animal", "object", "food"}),
    ),
    "make": _Verb(
        ("make", "makes"),
        ("fais", "fais", "fait", "faisons", "font"),
        frozenset({"food", "object"}),
        nouns=frozenset({"cake", "pie", "sandwich", "dress", "hat", "box"}),
    ),
    "take": _Verb(
        ("take", "takes"),
        ("prends", "prends", "prend", "prenons", "prennent"),
        frozenset({"object", "food"}),
    ),
    "buy": _Verb(
        ("buy", "buys"),
        ("achète", "achètes", "achète", "achetons", "achètent"),
        frozenset({"object", "food", "animal"}),
    ),
    "wash": _Verb(
        ("wash", "washes"),
        ("lave", "laves", "lave", "lavons", "lavent"),
        frozenset({"object", "animal", "food"}),
    ),
    # special patterns
    "be": _Verb(("be", "is"), ("suis", "es", "est", "sommes", "sont"), frozenset()),
    "go": _Verb(
        ("go", "goes"),
        ("vais", "vas", "va", "allons", "vont"),
        frozenset({"place"}),
        animal_subject=True,
        definite_only=True,
    ),
}
_TRANSITIVE = [v for v in VERBS if v not in ("be", "go")]

# English pronoun -> (French, person index into _Verb.fr, feminine, plural)
PRONOUNS: dict[str, tuple[str, int, bool, bool]] = {
    "i": ("je", 0, False, False),
    "you": ("tu", 1, False, False),
    "he": ("il", 2, False, False),
    "she": ("elle", 2, True, False),
    "we": ("nous", 3, False, True),
    "they": ("ils", 4, False, True),
}
_EN_BE = {"i": "am", "you": "are", "he": "is", "she": "is", "we": "are", "they": "are"}

# --------------------------------------------------------------------------- rendering


@dataclass(frozen=True)
class NounPhrase:
    """A noun with its article, number and at most one adjective (English keys)."""

    noun: str
    plural: bool = False
    definite: bool = True
    adjective: str | None = None

    def __post_init__(self) -> None:
        if self.noun not in NOUNS:
            raise ValueError(f"noun must be one of {sorted(NOUNS)}, got {self.noun!r}")
        if self.adjective is not None and self.adjective not in ADJECTIVES:
            raise ValueError(
                f"adjective must be None or one of {sorted(ADJECTIVES)}, got {self.adjective!r}"
            )


def _elides(word: str) -> bool:
    return word[0] in _VOWELS


def _adj_form(adj: _Adj, fem: bool, plural: bool) -> str:
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
    if verb not in VERBS:
        raise ValueError(f"verb must be one of {sorted(VERBS)}, got {verb!r}")
    v = VERBS[verb]
    # subject
    if isinstance(subject, NounPhrase):
        s_noun = NOUNS[subject.noun]
        en_subj, fr_subj = _np_en(subject), _np_fr(subject)
        person = 4 if subject.plural else 2
        fem, plural, third_sg = s_noun.fem, subject.plural, not subject.plural
        en_be = "are" if subject.plural else "is"
    elif subject in PRONOUNS:
        fr_pron, person, fem, plural = PRONOUNS[subject]
        en_subj, fr_subj = [subject], [fr_pron]
        third_sg = subject in ("he", "she")
        en_be = _EN_BE[subject]
    else:
        raise ValueError(
            f"subject must be a NounPhrase or one of {sorted(PRONOUNS)}, got {subject!r}"
        )
    # verb
    fr_verb = v.fr[person]
    if negative:
        fr_v = ["n'" + fr_verb, "pas"] if _elides(fr_verb) else ["ne", fr_verb, "pas"]
    elif person == 0 and _elides(fr_verb):
        fr_subj = ["j'" + fr_verb]
        fr_v = []
    else:
        fr_v = [fr_verb]
    if verb == "be":
        en_v = [en_be, "not"] if negative else [en_be]
    else:
        base, third = v.en
        if negative:
            en_v = ["does" if third_sg else "do", "not", *base.split()]
        else:
            en_v = (third if third_sg else base).split()
    # complement
    if verb == "be":
        if not isinstance(complement, str) or complement not in ADJECTIVES:
            raise ValueError(
                f"complement of 'be' must be one of {sorted(ADJECTIVES)}, got {complement!r}"
            )
        en_c = [complement]
        fr_c = [_adj_form(ADJECTIVES[complement], fem, plural)]
    else:
        if not isinstance(complement, NounPhrase):
            raise ValueError(
                f"complement of {verb!r} must be a NounPhrase, got {type(complement).__name__}"
            )
        if v.definite_only and not complement.definite:
            raise ValueError(f"complement of {verb!r} must be definite (the ...)")
        if verb == "go":
            en_c = ["to", *_np_en(complement)]
            fr_c = _np_fr(complement, after_a=True)
        else:
            en_c = _np_en(complement)
            fr_c = _np_fr(complement, negated=negative)
    en = [*en_subj, *en_v, *en_c, "."]
    fr = [*fr_subj, *fr_v, *fr_c, "."]
    return " ".join(en), " ".join(fr)


# --------------------------------------------------------------------------- sampling


# "le grand père" reads as "grand-père" (grandfather): not generated (translate_parts renders it).
_AVOID_IN_GENERATION = {(a, n) for a in ("big", "small") for n in ("father", "mother")}


def _sample_np(rng: random.Random, kinds, *, p_adj: float, p_definite: float, nouns=None):
    pool = [n for n in _NOUN_LIST if n.kind in kinds and (nouns is None or n.en in nouns)]
    noun = rng.choice(pool)
    adjective = None
    if rng.random() < p_adj:
        adjs = [
            a.en
            for a in _ADJ_LIST
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
        subject = _sample_subject(rng, _ALL - {"place"})
        kind = NOUNS[subject.noun].kind if isinstance(subject, NounPhrase) else "person"
        used = subject.adjective if isinstance(subject, NounPhrase) else None
        adj = rng.choice([a.en for a in _ADJ_LIST if kind in a.kinds and a.en != used])
        if isinstance(subject, NounPhrase):
            subject = NounPhrase(subject.noun, subject.plural, True, subject.adjective)
        return translate_parts(subject, "be", adj, negative=negative)
    if r < 0.4:  # X goes to the PLACE
        subject = _sample_subject(rng, _LIVING)
        place = _sample_np(rng, {"place"}, p_adj=0.3, p_definite=1.0)
        return translate_parts(subject, "go", place, negative=negative)
    verb = rng.choice(_TRANSITIVE)
    v = VERBS[verb]
    subject = _sample_subject(rng, _LIVING if v.animal_subject else {"person"})
    p_definite = 1.0 if v.definite_only else 0.6
    obj = _sample_np(rng, v.objects, p_adj=0.5, p_definite=p_definite, nouns=v.nouns)
    return translate_parts(subject, verb, obj, negative=negative)


def generate_pairs(num_pairs: int = 20000, seed: int = 0) -> list[tuple[str, str]]:
    """``num_pairs`` distinct (English, French) pairs, deterministic under ``seed``.

    Each side has at most :data:`MAX_TOKENS` tokens. Pairs come in generation order.
    """
    if not isinstance(num_pairs, int) or num_pairs <= 0:
        raise ValueError(f"num_pairs must be a positive int, got {num_pairs!r}")
    rng = random.Random(f"attnkit-synthetic-fr:{seed}")
    seen: set[tuple[str, str]] = set()
    pairs: list[tuple[str, str]] = []
    attempts, max_attempts = 0, 50 * num_pairs + 1000
    while len(pairs) < num_pairs:
        attempts += 1
        if attempts > max_attempts:
            raise ValueError(
                f"num_pairs={num_pairs} is more distinct pairs than the grammar yields "
                f"in {max_attempts} draws (got {len(pairs)})"
            )
        pair = sample_pair(rng)
        if pair in seen:
            continue
        if max(len(pair[0].split()), len(pair[1].split())) > MAX_TOKENS:
            continue
        seen.add(pair)
        pairs.append(pair)
    return pairs
