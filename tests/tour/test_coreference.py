"""The ``coreference`` tour topic at the small size (seed 0): its three claims asserted on the
measured values, and each claim's check shown to fail on a mutated measurement (swapped
targets, an untrained model, the median head in place of the head found)."""

from __future__ import annotations

import copy

import pytest
import torch
from matplotlib.figure import Figure
from tests import shared_runs as shared

from attnkit.data.coreference import SEED_SENTENCES
from attnkit.inference import contrast_heads
from attnkit.inference.contrast import ContrastRow, check_rows, evaluate_contrast
from attnkit.inference.translator import Translator
from attnkit.models.registry import build_model
from attnkit.tour import coreference as topic


def result():
    """The topic at the small size, seed 0: one run a session, shared with tests/tour's
    other files once the topic is registered (``tests.shared_runs``)."""
    if "coreference" not in shared.TOPICS:
        shared.TOPICS["coreference"] = topic.coreference(small=True, seed=0)
    return shared.TOPICS["coreference"]


def test_contrastive_accuracy_is_above_every_baseline_with_its_interval_above_half():
    v = result().values
    c = v["contrast_accuracy"]
    assert c["n"] == v["test_rows"] == 224 and c["ties"] == 0
    assert c["low"] > 0.5 and c["low"] > max(c["baselines"].values())
    assert c["baselines"] == {"masculine": 0.5, "first": 0.5, "nearest": 0.5}  # balanced data
    assert c["value"] == pytest.approx(c["k"] / c["n"])  # the interval is around the count
    assert c["groups"]["combination"]["value"] > 0.95  # unseen noun pair x predicate
    assert c["mean_margin"] > 1.0


def test_a_head_chosen_on_training_sentences_attends_to_the_antecedent_on_held_out_ones():
    h = result().values["head_accuracy"]
    assert h["selection_rows"] == 100 and h["rows"] == 224
    assert h["kind"] in ("encoder", "cross", "decoder")
    assert h["low"] > h["distractor_high"]  # the two Wilson intervals do not meet
    assert h["accuracy"] - h["distractor_rate"] > 0.3 and h["p_value"] < 1e-6
    assert h["wins"] + h["losses"] + h["ties"] == h["rows"]
    assert h["accuracy"] == pytest.approx(h["wins"] / h["rows"])
    assert h["distractor_rate"] == pytest.approx(h["losses"] / h["rows"])


def test_ablating_the_head_found_costs_more_than_ablating_the_median_head():
    a = result().values["ablation"]
    assert len(a["heads"]) == 3 * 2 * 4  # every head of every kind, ablated once
    assert a["best"]["margin_cost"] > a["median_margin"]["margin_cost"]
    assert a["margin_p_value"] < 0.01  # paired sign test over the rows, one-sided
    # the median head is the (lower) median of the 24 measured margin costs
    costs = sorted(x["margin_cost"] for x in a["heads"])
    assert a["median_margin"]["margin_cost"] == costs[(len(costs) - 1) // 2]


def test_the_figures_and_the_seed_sentences(tmp_path):
    r = result()
    assert set(r.figures) == {"seeds", "heads", "ablation"}
    assert all(isinstance(f, Figure) for f in r.figures.values())
    assert len(r.figures["seeds"].axes) == 4  # two sentences x (the head found, an encoder head)
    assert set(r.values["seed_translations"]) == set(SEED_SENTENCES)
    assert "parce qu'il était trop fatigué" in r.values["seed_translations"][SEED_SENTENCES[0]]
    assert r.values["seed"] == 0 and r.values["epochs"] == 20
    assert "224 held-out sentences" in r.finding and "seed 0" in r.finding
    assert len(r.save(tmp_path)) == 3


def _mutated(**parts) -> dict:
    values = copy.deepcopy({k: result().values[k] for k in
                            ("contrast_accuracy", "head_accuracy", "ablation")})  # fmt: skip
    values.update(parts)
    return values


def test_swapped_targets_fail_the_accuracy_claim():
    translator, corpus, _, _ = topic.trained_coreference(small=True, seed=0)
    swapped = [
        ContrastRow(it.source, it.contrastive, it.correct, i + 2)
        for i, it in enumerate(corpus.test)
    ]
    report = evaluate_contrast(translator, swapped, heads=False, ablation=False)
    c = result().values["contrast_accuracy"]
    assert report.accuracy().k == c["n"] - c["k"] - c["ties"]
    mutated = {**c, **report.accuracy().to_json()}
    assert not topic.claims_hold(_mutated(contrast_accuracy=mutated))["contrast_accuracy"]


def test_an_untrained_model_fails_the_accuracy_claim():
    trained, corpus, _, _ = topic.trained_coreference(small=True, seed=0)
    torch.manual_seed(0)
    data = trained.data
    model = build_model("transformer", topic.SIZES, len(data.src_vocab), len(data.tgt_vocab))
    untrained = Translator(model.eval(), data, model_config=topic.SIZES)
    found = topic.measure(untrained, corpus, selection_rows=100, seed=0)
    assert not topic.claims_hold(found)["contrast_accuracy"]
    assert 0.3 < found["contrast_accuracy"]["value"] < 0.7


def test_the_median_head_in_place_of_the_head_found_fails_the_ablation_claim():
    translator, corpus, _, _ = topic.trained_coreference(small=True, seed=0)
    a = result().values["ablation"]
    rows = topic._rows(corpus.test)
    report = evaluate_contrast(translator, rows, heads=False, ablation=False)
    median = a["median_margin"]
    again = contrast_heads.ablation(translator, rows, check_rows(translator, rows), report,
                                    best=median)  # fmt: skip
    assert again["best"]["margin_cost"] == pytest.approx(median["margin_cost"])
    assert not topic.claims_hold(_mutated(ablation=again))["ablation"]
    assert topic.claims_hold(_mutated())["ablation"]  # the unmutated values hold


def test_the_saved_model_scores_the_same_through_translate_contrast(tmp_path, capsys):
    import argparse
    import json

    from attnkit.cli.translate_contrast import register_contrast

    folder = topic.save_model(tmp_path / "coref", small=True, seed=0)
    parser = argparse.ArgumentParser()
    register_contrast(parser.add_subparsers())
    args = parser.parse_args(["contrast", "--checkpoint", str(folder), "--pairs",
                              str(folder / "held_out.tsv"), "--json", "--no-ablation"])  # fmt: skip
    assert args.func(args) == 0
    report = json.loads(capsys.readouterr().out)
    c = result().values["contrast_accuracy"]
    assert (report["accuracy"]["k"], report["accuracy"]["n"]) == (c["k"], c["n"])
    assert report["mean_margin"] == pytest.approx(c["mean_margin"], abs=1e-4)


def test_the_head_found_opens_in_the_notebook_view_and_the_explorer(tmp_path):
    import json
    import re
    import warnings

    with warnings.catch_warnings():  # starlette's notice about httpx versions
        warnings.simplefilter("ignore")
        from fastapi.testclient import TestClient

    from attnkit.serve import create_app

    translator = topic.trained_coreference(small=True, seed=0)[0]
    h = result().values["head_accuracy"]  # 1-based: kind, layer, head
    for given in (result(), result().values):
        view = topic.show_found_head(given, translator, SEED_SENTENCES[1])
        spec = json.loads(re.search(r'class="attnkit-data">(.*?)</script>', view.to_html())[1])
        key = {"encoder": "encoder_self", "decoder": "decoder_self"}.get(h["kind"], h["kind"])
        assert spec["panels"][spec["panel"]]["key"] == key
        assert (spec["layer"], spec["head"]) == (h["layer"] - 1, h["head"] - 1)
    assert view.title.startswith(SEED_SENTENCES[1]) and "qu'elle" in view.title
    # the explorer over the saved model translates a seed sentence as the topic did
    folder = topic.save_model(tmp_path / "coref", small=True, seed=0)
    with TestClient(create_app(folder)) as client:
        got = client.post("/api/translate", json={"text": SEED_SENTENCES[0]}).json()
        assert client.get("/", params={"text": SEED_SENTENCES[0], "kind": h["kind"]}).is_success
    assert got["translation"] == result().values["seed_translations"][SEED_SENTENCES[0]]
    assert len(got["decoder_self"]) == 2 and len(got["decoder_self"][0]) == 4  # layers, heads


def test_the_model_trains_with_one_thread_however_it_is_called(monkeypatch):
    # the topic runs with one thread; save_model called on its own must train the same model
    import attnkit.tour.translation as translation

    seen = []

    class StopError(Exception):
        pass

    def stop(*args, **kwargs):
        seen.append(torch.get_num_threads())
        raise StopError

    monkeypatch.setattr(translation, "train_translator", stop)
    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        with pytest.raises(StopError):
            topic.trained_coreference.__wrapped__(small=True, seed=0)
        assert seen == [1] and torch.get_num_threads() == 2  # restored
    finally:
        torch.set_num_threads(threads)
