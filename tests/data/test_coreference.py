"""The generated coreference corpus (attnkit.data.coreference) and the bundled contrastive set."""

from __future__ import annotations

import functools

import pytest

from attnkit.data import coreference as co
from attnkit.data.synthetic_fr import generate_pairs
from attnkit.inference.contrast import baselines, read_contrast_tsv


@functools.cache
def corpus(seed: int = 0) -> co.CoreferenceCorpus:
    return co.coreference_corpus(seed)


def test_the_corpus_is_deterministic_and_the_seed_changes_the_split():
    again = co.coreference_corpus(0)
    assert again.train == corpus().train and again.test == corpus().test
    other = co.coreference_corpus(1)
    assert {i.source for i in other.test} != {i.source for i in corpus().test}
    assert len(other.test) == len(corpus().test)


def test_every_cell_is_balanced_so_no_meaning_blind_rule_beats_half():
    for items in (corpus().train, corpus().test,
                  [i for i in corpus().test if i.group == "combination"],
                  [i for i in corpus().test if i.group == "predicate"]):  # fmt: skip
        b = co.balance(items)
        assert (b["masculine"], b["first"], b["nearest"]) == (0.5, 0.5, 0.5), b
    # per frame too (the test draws per frame x position x gender cell)
    for frame in co.FRAMES:
        b = co.balance([i for i in corpus().test if i.frame == frame])
        assert (b["masculine"], b["first"]) == (0.5, 0.5), frame


def test_held_out_combinations_and_predicates_are_never_trained_on():
    c = corpus()

    def triple(it):
        return co._key(it)

    trained = {triple(i) for i in c.train}
    assert not trained & {triple(i) for i in c.test}
    pairs = {(t[0], t[1], t[2]) for t in trained}
    predicates = {t[3] for t in trained}
    for it in c.test:
        frame, subj, obj, pred = triple(it)
        if it.group == "combination":  # the noun pair and the predicate each seen
            assert (frame, subj, obj) in pairs and pred in predicates
        else:
            assert it.group == "predicate" and pred in ("slow", "narrow")
            assert pred not in predicates  # in coreference sentences: only in the test
    simple = " ".join(en for en, _ in c.simple)
    assert "too slow" in simple and "too narrow" in simple
    # every noun of the test is a noun of some training sentence
    nouns = {w for i in c.train for w in (i.antecedent, i.distractor)}
    assert {w for i in c.test for w in (i.antecedent, i.distractor)} <= nouns
    assert set(co.SEED_SENTENCES) <= {i.source for i in c.test}
    assert all(co.different_genders(i) for i in c.test)
    assert not all(co.different_genders(i) for i in c.train)  # same-gender pairs train


def test_the_french_agrees_and_the_contrastive_flips_only_the_pronoun_and_its_agreement():
    for it in corpus().train[:200] + corpus().test:
        en, fr, wrong = it.source.split(), it.correct.split(), it.contrastive.split()
        assert max(len(en), len(fr)) <= co.MAX_TOKENS
        assert en[-6:-3] == ["because", "it", "was"] and fr[-1] == "."
        pronoun = "qu'il" if it.gender == "m" else "qu'elle"
        assert pronoun in fr and ("qu'elle" if it.gender == "m" else "qu'il") in wrong
        changed = [i for i, (a, b) in enumerate(zip(fr, wrong)) if a != b]
        pred = co.PREDICATES[it.predicate]
        assert fr[-2] == pred.form(it.gender == "f") and wrong[-2] == pred.form(it.gender == "m")
        assert changed == [fr.index(pronoun)] + ([len(fr) - 2] if pred.masc != pred.fem else [])
    item = {i.source: i for i in corpus().test}[co.SEED_SENTENCES[0]]
    assert item.correct == "l'animal n'a pas traversé la rue parce qu'il était trop fatigué ."
    item = {i.source: i for i in corpus().test}[co.SEED_SENTENCES[1]]
    assert item.correct == "l'animal n'a pas traversé la rue parce qu'elle était trop large ."
    assert ("the cow was too slow .", "la vache était trop lente .") in corpus().simple


def test_the_contrastive_file_round_trips_and_the_data_fits_the_length_limit(tmp_path):
    path = co.write_contrast_tsv(corpus().test, tmp_path / "held_out.tsv")
    rows = read_contrast_tsv(path)
    assert [r.source for r in rows] == [i.source for i in corpus().test]
    assert rows[0].fields["frame"] == corpus().test[0].frame
    assert rows[0].antecedent_target == corpus().test[0].antecedent_target
    b = baselines(rows)
    assert all(b[k].value == 0.5 for k in ("masculine", "first", "nearest"))
    data = co.coreference_data(corpus())
    assert data.max_len == co.MAX_TOKENS + 2 and len(data.test) == len(corpus().test)
    assert "lente" in data.tgt_vocab.token_to_idx and "slow" in data.src_vocab.token_to_idx
    assert len(data.train) + len(data.val) == len(corpus().train) + len(corpus().simple)
    with pytest.raises(ValueError, match="at least 15"):
        co.coreference_data(corpus(), max_len=12)


def test_the_default_corpus_is_not_touched():
    before = generate_pairs(30, 0)
    co.coreference_corpus(3)
    assert generate_pairs(30, 0) == before
    assert before[0] != ()  # the default corpus draws from its own stream


def test_the_bundled_set_is_balanced_and_agrees():
    rows = read_contrast_tsv(co.bundled_contrast_set())
    assert 60 <= len(rows) <= 100
    b = baselines(rows)
    assert all(b[k].value == 0.5 and b[k].n == len(rows) for k in ("masculine", "first", "nearest"))
    for r in rows:
        masculine = r.group == "masculine"
        fr, wrong = r.correct.split(), r.contrastive.split()
        changed = [(a, b) for a, b in zip(fr, wrong) if a != b]
        assert len(fr) == len(wrong) and changed[0] == (
            ("qu'il", "qu'elle") if masculine else ("qu'elle", "qu'il"))  # fmt: skip
        assert len(changed) <= 2  # the pronoun, and the adjective when it agrees visibly
        for a, b in changed[1:]:  # every masculine form here ends in a consonant or é
            assert (
                a.rstrip(".").endswith("e") != masculine
                and b.rstrip(".").endswith("e") == masculine
            )
        assert r.source[0].isupper() and r.correct.endswith(".") and r.contrastive.endswith(".")
        assert r.antecedent_target and r.distractor_target
    assert len({r.source.split(" because")[0] for r in rows}) == len(rows) // 2  # pairs
