"""The generated English-French corpus: pinned sentences, determinism, French grammar."""

from __future__ import annotations

import collections
import functools
import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from attnkit.data.synthetic_fr import MAX_TOKENS, NounPhrase, generate_pairs, translate_parts
from attnkit.data.synthetic_fr_lexicon import ADJECTIVES, NOUNS, PRONOUNS
from attnkit.data.translation import preprocess_nmt

NP = NounPhrase

# Hand-checked: (parts, English, French).
PINNED = [
    ((NP("car", adjective="red"), "be", "big", False), "the red car is big .",
     "la voiture rouge est grande ."),
    ((NP("car", plural=True, adjective="red"), "be", "big", True),
     "the red cars are not big .", "les voitures rouges ne sont pas grandes ."),
    (("i", "like", NP("man"), False), "i like the man .", "j'aime l'homme ."),
    (("i", "like", NP("man"), True), "i do not like the man .", "je n'aime pas l'homme ."),
    (("i", "have", NP("car", definite=False), True), "i do not have a car .",
     "je n'ai pas de voiture ."),
    (("we", "eat", NP("apple", plural=True, definite=False), False), "we eat apples .",
     "nous mangeons des pommes ."),
    (("they", "have", NP("box", plural=True, definite=False, adjective="big"), False),
     "they have big boxes .", "ils ont de grandes boîtes ."),
    (("he", "go", NP("park"), False), "he goes to the park .", "il va au parc ."),
    (("she", "go", NP("school"), True), "she does not go to the school .",
     "elle ne va pas à l'école ."),
    (("you", "go", NP("market", plural=True), False), "you go to the markets .",
     "tu vas aux marchés ."),
    ((NP("woman", definite=False), "see", NP("computer", definite=False, adjective="new"), False),
     "a woman sees a new computer .", "une femme voit un nouvel ordinateur ."),
    ((NP("computer", adjective="new"), "be", "expensive", False),
     "the new computer is expensive .", "le nouvel ordinateur est cher ."),
    ((NP("bird", adjective="beautiful"), "be", "white", False), "the beautiful bird is white .",
     "le bel oiseau est blanc ."),
    (("i", "buy", NP("umbrella", definite=False), False), "i buy an umbrella .",
     "j'achète un parapluie ."),
    (("i", "go", NP("hospital"), True), "i do not go to the hospital .",
     "je ne vais pas à l'hôpital ."),
    ((NP("girl", plural=True), "be", "tired", False), "the girls are tired .",
     "les filles sont fatiguées ."),
    (("she", "be", "happy", True), "she is not happy .", "elle n'est pas heureuse ."),
    (("we", "make", NP("cake", plural=True, adjective="good", definite=False), False),
     "we make good cakes .", "nous faisons de bons gâteaux ."),
    ((NP("horse", plural=True, adjective="black"), "look for", NP("egg", definite=False), True),
     "the black horses do not look for an egg .", "les chevaux noirs ne cherchent pas d'œuf ."),
    (("they", "take", NP("orange"), False), "they take the orange .", "ils prennent l'orange ."),
]  # fmt: skip


@functools.cache
def corpus() -> list[tuple[str, str]]:
    return generate_pairs(20000, seed=0)


@pytest.mark.parametrize(("parts", "en", "fr"), PINNED, ids=[p[1] for p in PINNED])
def test_pinned_pairs(parts, en, fr):
    subject, verb, complement, negative = parts
    assert translate_parts(subject, verb, complement, negative=negative) == (en, fr)


def test_fixed_seed_sample_is_pinned():
    assert corpus()[:5] == [
        ("i am sad .", "je suis triste ."),
        ("they are sad .", "ils sont tristes ."),
        ("we wash the pen .", "nous lavons le stylo ."),
        ("the big cows do not eat the eggs .", "les grandes vaches ne mangent pas les œufs ."),
        ("the girl is sad .", "la fille est triste ."),
    ]
    assert generate_pairs(3, seed=1) == [
        ("he is not tired .", "il n'est pas fatigué ."),
        ("the father does not take a table .", "le père ne prend pas de table ."),
        ("the car is not green .", "la voiture n'est pas verte ."),
    ]


def test_deterministic_and_seed_dependent():
    assert generate_pairs(500, seed=3) == generate_pairs(500, seed=3)
    assert generate_pairs(500, seed=3) != generate_pairs(500, seed=4)
    # a shorter corpus is a prefix of a longer one with the same seed
    assert generate_pairs(200, seed=0) == corpus()[:200]


def test_at_least_10000_distinct_pairs_and_one_translation_per_source():
    pairs = corpus()
    assert len(pairs) == len(set(pairs)) == 20000
    assert len({en for en, _ in pairs}) == 20000  # English -> French is a function


def test_form_length_and_vocabulary_size():
    pairs = corpus()
    en_words = collections.Counter(w for en, _ in pairs for w in en.split())
    fr_words = collections.Counter(w for _, fr in pairs for w in fr.split())
    assert 100 <= len(en_words) <= 250
    assert 200 <= len(fr_words) <= 330
    for en, fr in pairs:
        for side in (en, fr):
            assert side == preprocess_nmt(side)  # already in the book's preprocessed form
            assert side.endswith(" .")
            assert 3 <= len(side.split()) <= MAX_TOKENS


def test_every_feminine_plural_adjective_ends_in_es():
    for name, adj in ADJECTIVES.items():
        assert adj.forms[3].endswith("es"), name
    fem_plural_nouns = {n.fr_pl for n in NOUNS.values() if n.fem}
    adjs = {form for a in ADJECTIVES.values() for form in a.forms}
    seen = 0
    for _, fr in corpus():
        words = fr.split()
        for art, noun, word in zip(words, words[1:], words[2:]):
            # "les voitures ROUGES", "des souris BLANCHES" (not "la souris blanche")
            if art in {"les", "des", "aux"} and noun in fem_plural_nouns and word in adjs:
                assert word.endswith("es"), fr
                seen += 1
    assert seen > 500


@pytest.mark.parametrize("adjective", sorted(ADJECTIVES))
def test_adjective_agreement_and_position(adjective):
    adj = ADJECTIVES[adjective]
    fem_pl = translate_parts(NP("car", plural=True, adjective=adjective), "be", "blue")[1]
    masc_sg = translate_parts(NP("book", adjective=adjective), "be", "blue")[1]
    if adj.before:
        assert fem_pl.startswith(f"les {adj.forms[3]} voitures ")
        assert masc_sg.startswith(f"le {adj.forms[0]} livre ")
    else:  # after the noun: crossing alignment with English
        assert fem_pl.startswith(f"les voitures {adj.forms[3]} sont bleues")
        assert masc_sg.startswith(f"le livre {adj.forms[0]} est bleu")


def test_predicate_adjective_agrees_with_pronoun():
    assert translate_parts("she", "be", "tired")[1] == "elle est fatiguée ."
    assert translate_parts("we", "be", "happy")[1] == "nous sommes heureux ."
    assert translate_parts("they", "be", "kind")[1] == "ils sont gentils ."
    assert translate_parts("i", "be", "small") == ("i am small .", "je suis petit .")


def test_conjugations():
    got = [translate_parts(p, "eat", NP("cake"))[1].split()[:2] for p in PRONOUNS]
    assert [" ".join(x) for x in got] == [
        "je mange", "tu manges", "il mange", "elle mange", "nous mangeons", "ils mangent",
    ]  # fmt: skip
    assert [translate_parts(p, "be", "sad")[1].split()[1] for p in PRONOUNS] == [
        "suis", "es", "est", "est", "sommes", "sont",
    ]  # fmt: skip
    assert [translate_parts(p, "make", NP("pie"))[1].split()[1] for p in PRONOUNS] == [
        "fais", "fais", "fait", "fait", "faisons", "font",
    ]  # fmt: skip
    assert translate_parts("i", "have", NP("dog"))[1] == "j'ai le chien ."
    assert translate_parts("we", "buy", NP("cake"))[1] == "nous achetons le gâteau ."


def test_elision_in_corpus():
    vowels = tuple("aeiouyéèêàâîôûœh")
    elided = 0
    for _, fr in corpus():
        words = fr.split()
        for prev, word in itertools.pairwise(words):
            if prev in {"je", "le", "la", "ne", "de"}:
                assert not word.startswith(vowels), fr
        elided += any(w.startswith(("j'", "l'", "n'", "d'")) for w in words)
    assert elided > 2000


def test_negation_ne_pas_in_corpus():
    negated = 0
    for en, fr in corpus():
        words = fr.split()
        assert ("not" in en.split()) == ("pas" in words), (en, fr)
        if "pas" in words:
            negated += 1
            i = words.index("pas")
            assert words[i - 2] == "ne" or words[i - 1].startswith("n'"), fr
            assert "un" not in words[i:] and "une" not in words[i:] and "des" not in words[i:]
    assert negated > 4000


@settings(max_examples=100, deadline=None)
@given(
    subject=st.sampled_from(sorted(PRONOUNS)),
    noun=st.sampled_from(sorted(NOUNS)),
    plural=st.booleans(),
    definite=st.booleans(),
    negative=st.booleans(),
)
def test_any_object_phrase_renders(subject, noun, plural, definite, negative):
    en, fr = translate_parts(
        subject, "see", NP(noun, plural=plural, definite=definite), negative=negative
    )
    words = fr.split()
    noun_fr = NOUNS[noun].fr_pl if plural else NOUNS[noun].fr
    assert words[-2].endswith(noun_fr)  # the noun (maybe with l'/d' attached) ends the phrase
    assert en.split()[-2] == (NOUNS[noun].en_pl if plural else noun)


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"noun must be one of .* got 'spaceship'"):
        NP("spaceship")
    with pytest.raises(ValueError, match=r"adjective must be one of .* got 'purple'"):
        NP("car", adjective="purple")
    with pytest.raises(ValueError, match=r"verb must be one of .* got 'fly'"):
        translate_parts("i", "fly", NP("car"))
    with pytest.raises(ValueError, match=r"subject must be one of 'i', 'you', .* got 'it'"):
        translate_parts("it", "like", NP("car"))
    with pytest.raises(
        TypeError, match=r"subject must be a NounPhrase or a pronoun \(str\), got int"
    ):
        translate_parts(3, "like", NP("car"))
    with pytest.raises(ValueError, match=r"complement of 'be' must be one of .* got 'purple'"):
        translate_parts("i", "be", "purple")
    with pytest.raises(
        TypeError, match=r"complement of 'be' must be an adjective \(str\), got Noun"
    ):
        translate_parts("i", "be", NP("car"))
    with pytest.raises(TypeError, match="complement of 'like' must be a NounPhrase, got str"):
        translate_parts("i", "like", "car")
    with pytest.raises(ValueError, match="complement of 'like' must be definite"):
        translate_parts("i", "like", NP("car", definite=False))
    with pytest.raises(ValueError, match="complement of 'go' must be definite"):
        translate_parts("i", "go", NP("park", definite=False))
    with pytest.raises(ValueError, match="num_pairs must be a positive int, got 0"):
        generate_pairs(0)
    with pytest.raises(TypeError, match=r"num_pairs must be a positive int, got 2\.5 \(float\)"):
        generate_pairs(2.5)


def test_generation_avoids_readings_that_change_meaning_or_repeat():
    for en, fr in corpus():
        assert not any(x in fr for x in ("grand père", "grande mère", "petit père")), fr
        words = en.split()
        if len(words) >= 5 and words[3] in ("is", "are"):  # "the red car is red ."
            assert words[1] != words[-2] and words[1] != words[-3], en
