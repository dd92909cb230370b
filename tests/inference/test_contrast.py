"""Contrastive evaluation (attnkit.inference.contrast, contrast_rows, contrast_heads): the
scores against independent computations, the swap identity, the baselines, bad input, the
head analysis and ablation."""

from __future__ import annotations

import copy
import functools
from pathlib import Path

import pytest
import torch

from attnkit.data.coreference import (
    CONTRAST_COLUMNS,
    balance,
    coreference_corpus,
    coreference_data,
    write_contrast_tsv,
)
from attnkit.inference import contrast_heads
from attnkit.inference.contrast import (
    ContrastReport,
    ContrastRow,
    Rate,
    baselines,
    check_rows,
    evaluate_contrast,
    read_contrast_tsv,
    score_pairs,
    wilson,
)
from attnkit.inference.translator import Translator
from attnkit.models.registry import build_model

CONFIGS = {
    "transformer": {"d_model": 16, "num_heads": 2, "num_layers": 2, "d_ff": 32,
                    "dropout": 0.0, "max_len": 32},
    "seq2seq": {"embed_size": 16, "num_hiddens": 16, "num_layers": 2, "dropout": 0.0},
    "bahdanau": {"embed_size": 16, "num_hiddens": 16, "num_layers": 1, "dropout": 0.0},
}  # fmt: skip


@functools.cache
def corpus():
    return coreference_corpus(0)


@functools.cache
def translator(arch: str = "transformer") -> Translator:
    """An untrained model of ``arch`` on the coreference vocabulary (seeded): its scores
    are arbitrary but fixed, which is all that these tests need."""
    data = coreference_data(corpus())
    torch.manual_seed(0)
    model = build_model(arch, CONFIGS[arch], len(data.src_vocab), len(data.tgt_vocab))
    return Translator(model.eval(), data, model_config=CONFIGS[arch], arch=arch)


def rows(n: int = 12) -> list[ContrastRow]:
    items = corpus().test[:: len(corpus().test) // n][:n]
    return read_contrast_tsv(write_contrast_tsv(items, _tmp() / f"rows{n}.tsv"))


@functools.cache
def _tmp() -> Path:
    import tempfile

    return Path(tempfile.mkdtemp(prefix="attnkit-contrast-"))


def loop_log_prob(model, data, source: str, target: list[int]) -> float:
    """log p(target + <eos> | source) one decoder step at a time, in float64, on a copy of
    the model: a different code path (incremental decoding) and precision."""
    m = copy.deepcopy(model).double().eval()
    ids = data.special_ids
    src, src_len = data.encode_source([source])
    total = 0.0
    with torch.no_grad():
        state = m.decoder.init_state(m.encoder(src, src_len), src_len)
        previous = ids["bos"]
        for y in [*target, ids["eos"]]:
            logits, state = m.decoder(torch.tensor([[previous]]), state)
            total += float(torch.log_softmax(logits[0, -1].double(), -1)[y])
            previous = y
    return total


@pytest.mark.parametrize("arch", list(CONFIGS))
def test_scores_equal_a_float64_step_by_step_loop(arch):
    tr = translator(arch)
    chosen = rows(6)
    report = evaluate_contrast(tr, chosen, heads=False, ablation=False)
    for row, (correct, contrastive) in zip(chosen, report.scores):
        for text, score in ((row.correct, correct), (row.contrastive, contrastive)):
            ids = tr.data.tgt_vocab[text.split()]
            assert score == pytest.approx(loop_log_prob(tr.model, tr.data, row.source, ids),
                                          abs=2e-4)  # fmt: skip
    assert report.lengths[0][0] == len(chosen[0].correct.split()) + 1  # <eos> counted


def test_a_marian_score_equals_transformers_own_log_probability():
    pytest.importorskip("transformers")
    from tests.convert.marian_fixtures import EN, FR, hf_model, hf_tokenizer, marian_folder

    folder = marian_folder()
    tr = Translator.load(folder)
    wrong = FR[0].replace("qu'il", "qu'elle").replace("fatigué", "fatiguée")
    row = ContrastRow(EN[0], FR[0], wrong, antecedent="animal", distractor="street")
    report = evaluate_contrast(tr, [row], heads=True, ablation=False)
    hf, tok = hf_model(folder), hf_tokenizer(folder)
    batch = tok([EN[0]], text_target=[FR[0]], return_tensors="pt")
    with torch.no_grad():
        logits = hf(**batch).logits[0].double()  # decoder starts at <pad>, as attnkit's
    expected = float(torch.log_softmax(logits, -1).gather(1, batch["labels"][0][:, None]).sum())
    assert report.scores[0][0] == pytest.approx(expected, abs=1e-3)
    assert report.heads["kinds"]["encoder"]["heads"] == 4  # the tiny Marian's
    assert set(report.heads["kinds"]) == {"encoder", "cross"}  # no target candidates given


def test_swapping_correct_and_contrastive_gives_one_minus_the_accuracy(tmp_path):
    tr = translator()
    items = corpus().test
    path = write_contrast_tsv(items, tmp_path / "pairs.tsv")
    lines = path.read_text(encoding="utf-8").splitlines()
    header = lines[0].split("\t")
    a, b = header.index("correct"), header.index("contrastive")
    swapped = []
    for line in lines:
        cells = line.split("\t")
        cells[a], cells[b] = cells[b], cells[a]
        swapped.append("\t".join(cells))
    swapped[0] = lines[0]
    other = tmp_path / "swapped.tsv"
    other.write_text("\n".join(swapped) + "\n", encoding="utf-8")
    one = evaluate_contrast(tr, path, heads=False, ablation=False)
    two = evaluate_contrast(tr, other, heads=False, ablation=False)
    assert 0 < one.accuracy().k < one.n  # an untrained model: some of each
    assert two.accuracy().k == one.n - one.accuracy().k - one.ties()
    assert two.accuracy().value == pytest.approx(1 - one.accuracy().value - one.ties() / one.n)
    assert two.mean_margin == pytest.approx(-one.mean_margin)
    assert [s[::-1] for s in one.scores] == two.scores  # the same numbers, swapped


def test_ties_are_counted_apart_and_rates_carry_wilson_intervals():
    r = [ContrastRow("the dog .", "le chien .", "la chienne .", line=i + 2) for i in range(4)]
    report = ContrastReport("f.tsv", r, [(1.0, 1.0), (-1.0, -2.0), (-3.0, -1.0), (-4.0, -4.0)],
                            [(3, 3), (2, 4), (3, 3), (3, 3)], baselines(r))  # fmt: skip
    assert report.outcomes() == [0, 1, -1, 0]
    assert report.accuracy().k == 1 and report.ties() == 2
    # length-normalised: -1/2 > -2/4 is false: equal, a tie too
    assert report.outcomes(normalised=True) == [0, 0, -1, 0]
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    assert wilson(0, 10) == pytest.approx((0.0, 0.2775), abs=1e-4)
    assert Rate(3, 4).to_json()["value"] == 0.75


def test_baselines_follow_the_columns_and_agree_with_the_corpus_balance():
    found = baselines(_all_rows())
    expected = balance(corpus().test)
    for name in ("masculine", "first", "nearest"):
        assert found[name].n == expected["items"]
        assert found[name].value == pytest.approx(expected[name])
    hand = [
        ContrastRow("the cat saw the box and it was big .", "elle était grande", "il était grand",
                    antecedent="box", distractor="cat"),
        ContrastRow("it was the dog , not the cow .", "il", "elle", antecedent="dog",
                    distractor="cow"),
    ]  # fmt: skip
    b = baselines(hand)
    assert (b["masculine"].k, b["masculine"].n) == (1, 2)  # the second holds il, the first elle
    assert (b["first"].k, b["first"].n) == (1, 2)  # dog before cow; box after cat
    # the first: "it" after both nouns, box nearer; the second: "it" before both (its last
    # occurrence), dog nearer
    assert (b["nearest"].k, b["nearest"].n) == (2, 2)


@functools.cache
def _all_rows():
    return read_contrast_tsv(write_contrast_tsv(corpus().test, _tmp() / "all.tsv"))


GOOD = "the dog didn't eat the soup because it was too spicy ."
FR_OK = "le chien n'a pas mangé la soupe parce qu'elle était trop épicée ."
FR_NO = "le chien n'a pas mangé la soupe parce qu'il était trop épicé ."


@pytest.mark.parametrize(
    ("text", "line", "column", "words"),
    [
        (f"source\tcorrect\n{GOOD}\t{FR_OK}\n", 1, "contrastive", "missing"),
        (f"source\tcorrect\tcontrastive\n{GOOD}\t\t{FR_NO}\n", 2, "correct", "empty"),
        (f"source\tcorrect\tcontrastive\n{GOOD}\t{FR_OK}\t{FR_OK}\n", 2, "contrastive",
         "identical"),
        (f"source\tcorrect\tcontrastive\tantecedent\tdistractor\n{GOOD}\t{FR_OK}\t{FR_NO}\t"
         "soup\tcat\n", 2, "distractor", "not a word of the source"),
        (f"source\tcorrect\tcontrastive\tantecedent\n{GOOD}\t{FR_OK}\t{FR_NO}\tsoup\n", 1,
         "distractor", "missing"),
        (f"source\tcorrect\tcontrastive\n{GOOD}\t{FR_OK}\t{FR_NO}\n"
         f"{GOOD} {GOOD}\t{FR_OK}\t{FR_NO}\n", 3, "source", "max_len"),
        (f"source\tcorrect\tcontrastive\n{GOOD}\t{FR_OK}\tle chien n'a pas mangé la "
         "soupe parce qu'il était trop méchant .\n", 2, "contrastive", "méchant"),
        (f"source\tcorrect\tcontrastive\n{GOOD}\t{FR_OK}\t{'la ' * 20}.\n", 2, "contrastive",
         "max_len"),
    ],
)  # fmt: skip
def test_bad_input_is_one_error_naming_file_line_and_column(tmp_path, text, line, column, words):
    path = tmp_path / "bad.tsv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as e:
        evaluate_contrast(translator(), path)
    message = str(e.value)
    assert message.startswith(f"{path} line {line} column {column!r}: "), message
    assert words in message


def test_bad_file_encoding_and_field_counts(tmp_path):
    path = tmp_path / "latin1.tsv"
    path.write_bytes("source\tcorrect\tcontrastive\na\tl'été\tb\n".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin1.tsv line 2: not UTF-8"):
        read_contrast_tsv(path)
    path.write_text("source\tcorrect\tcontrastive\na\tb\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2: 2 fields where the header has 3"):
        read_contrast_tsv(path)
    path.write_text("source\tcorrect\tcontrastive\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"no rows after the header"):
        read_contrast_tsv(path)


def test_rows_keep_every_column_and_the_json_reports_them():
    chosen = rows(4)
    assert set(chosen[0].fields) == set(CONTRAST_COLUMNS)
    report = evaluate_contrast(translator(), chosen, heads=False, ablation=False)
    j = report.to_json()
    assert j["items"][0]["frame"] == chosen[0].fields["frame"]
    assert j["items"][0]["line"] == 2
    assert set(j["groups"]) == {r.group for r in chosen}
    assert j["accuracy"]["n"] == 4 and "summed log-probability" in j["score"]


def test_head_analysis_counts_every_row_once_per_head():
    tr = translator()
    chosen = rows(12)
    ids = check_rows(tr, chosen)
    found = contrast_heads.head_analysis(tr, chosen, ids)
    assert set(found["kinds"]) == {"encoder", "cross", "decoder"}
    for table in found["kinds"].values():
        assert (table["layers"], table["heads"], table["rows"]) == (2, 2, 12)
        for cell in (c for row in table["cells"] for c in row):
            assert cell["wins"] + cell["losses"] + cell["ties"] == 12
            assert cell["low"] <= cell["accuracy"] <= cell["high"]
    best = found["best"]
    cell = found["kinds"][best["kind"]]["cells"][best["layer"] - 1][best["head"] - 1]
    assert (
        best["wins"]
        == cell["wins"]
        == max(c["wins"] for t in found["kinds"].values() for r in t["cells"] for c in r)
    )
    # by hand for one row: the encoder's query is "it", the keys the two nouns
    row = chosen[0]
    maps = tr.maps(row.source, ids[0][0])
    words = row.source.split()
    q, a, d = words.index("it"), words.index(row.antecedent), words.index(row.distractor)
    sign = torch.sign(maps.encoder_self[:, :, q, a] - maps.encoder_self[:, :, q, d])
    one = contrast_heads.head_analysis(tr, [row], [ids[0]])["kinds"]["encoder"]["cells"]
    assert [[c["wins"] - c["losses"] for c in r] for r in one] == sign.int().tolist()


def test_a_bahdanau_model_has_one_map_and_a_gru_seq2seq_none():
    chosen = rows(4)
    bahdanau = evaluate_contrast(translator("bahdanau"), chosen)
    assert set(bahdanau.heads["kinds"]) == {"cross"}
    assert bahdanau.heads["kinds"]["cross"]["heads"] == 1 and bahdanau.ablation is None
    plain = evaluate_contrast(translator("seq2seq"), chosen)
    assert plain.heads is None and plain.ablation is None


def test_ablating_a_head_equals_zeroing_its_columns_of_w_o_in_scoring_and_decoding():
    tr = translator()
    chosen = rows(6)
    ids = check_rows(tr, chosen)
    sources = [r.source for r in chosen]
    targets = [c for c, _ in ids]
    for kind, layer, head in (("encoder", 1, 0), ("cross", 0, 1), ("decoder", 1, 1)):
        other = copy.deepcopy(tr.model)
        attention = contrast_heads._attention_module(other, kind, layer)
        width = attention.num_hiddens // attention.num_heads
        with torch.no_grad():
            attention.W_o.weight[:, head * width : (head + 1) * width] = 0
        with contrast_heads.ablate_head(tr.model, kind, layer, head):
            hooked = score_pairs(tr.model, tr.data, sources, targets)
            decoded = [h.ids for h in tr.translate(sources)]  # one position at a time
        zeroed = score_pairs(other, tr.data, sources, targets)
        assert hooked == pytest.approx(zeroed, abs=1e-5)
        assert hooked != pytest.approx(score_pairs(tr.model, tr.data, sources, targets), abs=1e-3)
        plain = Translator(other, tr.data, model_config=CONFIGS["transformer"])
        assert decoded == [h.ids for h in plain.translate(sources)]
    assert not tr.model.decoder.blks[1].attention1.W_o._forward_pre_hooks  # removed


def test_ablation_reports_every_head_and_compares_the_best_with_the_median():
    tr = translator()
    chosen = rows(12)
    report = evaluate_contrast(tr, chosen, heads=True, ablation=True)
    a = report.ablation
    assert len(a["heads"]) == 3 * 2 * 2  # three kinds x 2 layers x 2 heads
    best = report.heads["best"]
    assert (a["best"]["kind"], a["best"]["layer"], a["best"]["head"]) == (
        best["kind"], best["layer"], best["head"])  # fmt: skip
    costs = sorted(h["margin_cost"] for h in a["heads"] if h is not a["best"])
    assert a["median_margin"]["margin_cost"] == costs[(len(costs) - 1) // 2]
    assert a["margin_difference"] == pytest.approx(
        a["best"]["margin_cost"] - a["median_margin"]["margin_cost"]
    )
    assert sum(a["margin_rows"]) <= 12 and 0 < a["margin_p_value"] <= 1
    assert contrast_heads.mcnemar_one_sided(3, 0) == 1 / 8
    assert contrast_heads.sign_test(10, 0) == pytest.approx(2 / 1024)
