"""The lexicon of the generated English-French corpus (:mod:`attnkit.data.synthetic_fr`).

Nouns with their gender, plural and kind (person, animal, object, food, place);
adjectives with their four French forms, the kinds they describe and their place
(after the noun, or one of the five before it: ``petit, grand, beau, bon, nouveau``);
verbs with their English forms, their five French present-tense forms and the kinds
of object they take; subject pronouns. Keys are the English words. Every noun that
starts with ``h`` has a mute h (``l'homme``, ``l'hôpital``).

The tables are data: the order of every list is part of the corpus (the sampler draws
from them in order), so reordering an entry changes the generated pairs.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ADJECTIVES",
    "ALL_KINDS",
    "ENGLISH_BE",
    "LIVING_KINDS",
    "NOUNS",
    "PRONOUNS",
    "VERBS",
    "Adjective",
    "Noun",
    "Verb",
]


@dataclass(frozen=True)
class Noun:
    """A noun in English and French, singular and plural, with its gender and kind."""

    en: str
    en_pl: str
    fr: str
    fr_pl: str
    fem: bool
    kind: str  # person | animal | object | food | place


@dataclass(frozen=True)
class Adjective:
    """An adjective, its four French forms, the kinds of noun it describes, its place."""

    en: str
    forms: tuple[str, str, str, str]  # masc sg, fem sg, masc pl, fem pl
    kinds: frozenset[str]
    before: bool = False  # placed before the noun in French
    masc_vowel: str | None = None  # "bel", "nouvel" before a masculine vowel-initial noun


@dataclass(frozen=True)
class Verb:
    """A verb: English and French present-tense forms, and the objects it takes."""

    en: tuple[str, str]  # base form, 3rd person singular
    fr: tuple[str, str, str, str, str]  # je, tu, il/elle, nous, ils
    objects: frozenset[str]  # noun kinds allowed as object
    animal_subject: bool = False
    nouns: frozenset[str] | None = None  # when set: the only allowed objects (by English noun)
    definite_only: bool = False  # "j'aime la pomme", never "j'aime une pomme"


def _n(en: str, fr: str, fem: bool, kind: str, en_pl: str = "", fr_pl: str = "") -> Noun:
    return Noun(en, en_pl or en + "s", fr, fr_pl or fr + "s", fem, kind)


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
NOUNS: dict[str, Noun] = {n.en: n for n in _NOUN_LIST}

ALL_KINDS = frozenset({"person", "animal", "object", "food", "place"})
LIVING_KINDS = frozenset({"person", "animal"})


def _a(en: str, m: str, f: str, mp: str, fp: str, kinds, **kw) -> Adjective:
    return Adjective(en, (m, f, mp, fp), frozenset(kinds), **kw)


_ADJ_LIST = [
    # after the noun
    _a("red", "rouge", "rouge", "rouges", "rouges", {"object"}),
    _a("black", "noir", "noire", "noirs", "noires", {"object", "animal"}),
    _a("white", "blanc", "blanche", "blancs", "blanches", {"object", "animal"}),
    _a("green", "vert", "verte", "verts", "vertes", {"object"}),
    _a("blue", "bleu", "bleue", "bleus", "bleues", {"object"}),
    _a("grey", "gris", "grise", "gris", "grises", {"object", "animal"}),
    _a("yellow", "jaune", "jaune", "jaunes", "jaunes", {"object"}),
    _a("happy", "heureux", "heureuse", "heureux", "heureuses", LIVING_KINDS),
    _a("tired", "fatigué", "fatiguée", "fatigués", "fatiguées", LIVING_KINDS),
    _a("kind", "gentil", "gentille", "gentils", "gentilles", LIVING_KINDS),
    _a("smart", "intelligent", "intelligente", "intelligents", "intelligentes", LIVING_KINDS),
    _a("sad", "triste", "triste", "tristes", "tristes", LIVING_KINDS),
    _a("expensive", "cher", "chère", "chers", "chères", {"object", "food"}),
    _a("fast", "rapide", "rapide", "rapides", "rapides", {"animal"}),
    _a("hot", "chaud", "chaude", "chauds", "chaudes", {"food"}),
    _a("cold", "froid", "froide", "froids", "froides", {"food"}),
    _a("clean", "propre", "propre", "propres", "propres", {"object", "place"}),
    # before the noun
    _a("small", "petit", "petite", "petits", "petites", ALL_KINDS, before=True),
    _a("big", "grand", "grande", "grands", "grandes", ALL_KINDS, before=True),
    _a(
        "beautiful",
        "beau",
        "belle",
        "beaux",
        "belles",
        ALL_KINDS - {"food"},
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
ADJECTIVES: dict[str, Adjective] = {a.en: a for a in _ADJ_LIST}

_THING_KINDS = frozenset({"person", "animal", "object"})
VERBS: dict[str, Verb] = {
    "like": Verb(
        ("like", "likes"),
        ("aime", "aimes", "aime", "aimons", "aiment"),
        ALL_KINDS,
        animal_subject=True,
        definite_only=True,
    ),
    "watch": Verb(
        ("watch", "watches"),
        ("regarde", "regardes", "regarde", "regardons", "regardent"),
        _THING_KINDS,
        animal_subject=True,
    ),
    "look for": Verb(
        ("look for", "looks for"),
        ("cherche", "cherches", "cherche", "cherchons", "cherchent"),
        _THING_KINDS | {"place"},
        animal_subject=True,
    ),
    "eat": Verb(
        ("eat", "eats"),
        ("mange", "manges", "mange", "mangeons", "mangent"),
        frozenset({"food"}),
        animal_subject=True,
    ),
    "see": Verb(
        ("see", "sees"),
        ("vois", "vois", "voit", "voyons", "voient"),
        _THING_KINDS | {"place"},
        animal_subject=True,
    ),
    "find": Verb(
        ("find", "finds"),
        ("trouve", "trouves", "trouve", "trouvons", "trouvent"),
        _THING_KINDS,
        animal_subject=True,
    ),
    "have": Verb(
        ("have", "has"),
        ("ai", "as", "a", "avons", "ont"),
        frozenset({"person", "animal", "object", "food"}),
    ),
    "make": Verb(
        ("make", "makes"),
        ("fais", "fais", "fait", "faisons", "font"),
        frozenset({"food", "object"}),
        nouns=frozenset({"cake", "pie", "sandwich", "dress", "hat", "box"}),
    ),
    "take": Verb(
        ("take", "takes"),
        ("prends", "prends", "prend", "prenons", "prennent"),
        frozenset({"object", "food"}),
    ),
    "buy": Verb(
        ("buy", "buys"),
        ("achète", "achètes", "achète", "achetons", "achètent"),
        frozenset({"object", "food", "animal"}),
    ),
    "wash": Verb(
        ("wash", "washes"),
        ("lave", "laves", "lave", "lavons", "lavent"),
        frozenset({"object", "animal", "food"}),
    ),
    # special patterns
    "be": Verb(("be", "is"), ("suis", "es", "est", "sommes", "sont"), frozenset()),
    "go": Verb(
        ("go", "goes"),
        ("vais", "vas", "va", "allons", "vont"),
        frozenset({"place"}),
        animal_subject=True,
        definite_only=True,
    ),
}

# English pronoun -> (French, person index into Verb.fr, feminine, plural)
PRONOUNS: dict[str, tuple[str, int, bool, bool]] = {
    "i": ("je", 0, False, False),
    "you": ("tu", 1, False, False),
    "he": ("il", 2, False, False),
    "she": ("elle", 2, True, False),
    "we": ("nous", 3, False, True),
    "they": ("ils", 4, False, True),
}
# the present of "be" after each English pronoun
ENGLISH_BE = {"i": "am", "you": "are", "he": "is", "she": "is", "we": "are", "they": "are"}
