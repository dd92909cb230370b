"""``attnkit translate contrast`` (cli/translate_contrast.py): the report in words and as
JSON, the bundled set, and bad input as one error line. The verb is registered on a parser
of its own here (cli/translate.py adds it to ``attnkit translate``)."""

from __future__ import annotations

import argparse
import json

import pytest
import torch

from attnkit.checkpoint import save_checkpoint
from attnkit.cli.translate_contrast import register_contrast
from attnkit.data.coreference import coreference_corpus, coreference_data, write_contrast_tsv
from attnkit.i18n import _, use_language
from attnkit.inference.contrast import baselines, read_contrast_tsv
from attnkit.models.registry import build_model

CONFIG = {"d_model": 16, "num_heads": 2, "num_layers": 2, "d_ff": 32, "dropout": 0.0,
          "max_len": 32}  # fmt: skip


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    """An untrained Transformer checkpoint on the coreference vocabulary and a TSV."""
    folder = tmp_path_factory.mktemp("contrast-cli")
    corpus = coreference_corpus(0)
    data = coreference_data(corpus)
    torch.manual_seed(0)
    model = build_model("transformer", CONFIG, len(data.src_vocab), len(data.tgt_vocab))
    config = {"arch": "transformer", "model_config": CONFIG, "data": data.to_dict()}
    save_checkpoint(folder / "ck", config, model.state_dict())
    pairs = write_contrast_tsv(corpus.test[::14], folder / "pairs.tsv")
    return folder / "ck", pairs


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="attnkit translate")
    register_contrast(parser.add_subparsers(dest="verb"))
    args = parser.parse_args(["contrast", *argv])
    return args.func(args)


def test_the_report_names_the_score_accuracy_baselines_heads_and_ablation(files, capsys):
    checkpoint, pairs = files
    assert run("--checkpoint", str(checkpoint), "--pairs", str(pairs)) == 0
    out = capsys.readouterr().out
    assert f"{pairs}: 16 rows" in out
    assert "summed log-probability (nats)" in out and "95% interval" in out
    masculine = baselines(read_contrast_tsv(pairs))["masculine"]
    assert f"always the masculine form: {masculine.value:.1%} ({masculine.k}/16)" in out
    assert "best head:" in out and "ablation (each of 12 heads zeroed in turn)" in out
    assert "McNemar" in out and "per group:" in out


def test_json_holds_every_number_and_every_row(files, capsys):
    checkpoint, pairs = files
    assert run("--checkpoint", str(checkpoint), "--pairs", str(pairs), "--json",
               "--no-ablation") == 0  # fmt: skip
    report = json.loads(capsys.readouterr().out)
    assert report["rows"] == 16 and len(report["items"]) == 16
    assert report["ablation"] is None and report["heads"]["best"]["kind"] in (
        "encoder", "cross", "decoder")  # fmt: skip
    item = report["items"][0]
    assert {"source", "correct", "contrastive", "frame", "score_correct"} <= set(item)
    assert report["accuracy"]["k"] == sum(
        i["score_correct"] > i["score_contrastive"] for i in report["items"]
    )


def test_the_bundled_set_reaches_the_model_and_its_unknown_words_are_named(files):
    checkpoint, _ = files
    # lines 2 and 3 (the dog and the soup) are all words of the generated corpus; line 4 is not
    pattern = r"contrast_en_fr.tsv line 4 column 'correct': unknown words .*: n'entrait, grand$"
    with pytest.raises(ValueError, match=pattern):
        run("--checkpoint", str(checkpoint), "--pairs", "BUNDLED", "--no-heads")


def test_the_report_speaks_chinese(files, capsys):
    checkpoint, pairs = files
    with use_language("zh"):
        if _("per group:") == "per group:":
            pytest.skip("the zh catalog has no translate contrast messages yet")
        assert run("--checkpoint", str(checkpoint), "--pairs", str(pairs), "--no-heads",
                   "--no-ablation") == 0  # fmt: skip
        heading = _("per group:")
    out = capsys.readouterr().out
    assert heading != "per group:" and heading in out and "per group:" not in out
    assert "16" in out and "95%" in out
