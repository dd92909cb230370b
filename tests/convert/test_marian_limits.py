"""Decoding limits as Hugging Face means them, on a tiny random MarianMT built by
transformers with an OPUS-MT-like generation_config.json: ``--max-len N`` (translate run and
eval, the explorer's service, ``Translator.translate``) gives transformers'
``generate(max_new_tokens=N)`` (``</s>`` forced at the last step, ``<pad>`` banned), greedy
and beam; exports keep the source's generation config; the punctuation normalizer is
transformers' (sacremoses)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from tests.convert.marian_fixtures import EN, FR, hf_model, hf_tokenizer, marian_folder

from attnkit.cli import main
from attnkit.inference.translator import Translator

SENTENCES = [*EN, "Where is the station?", "Hello world.", "x"]


@pytest.fixture(scope="module")
def opus(tmp_path_factory):
    """The tiny MarianMT with OPUS-MT's generation settings (num_beams 4, </s> forced,
    <pad> banned), its </s> bias raised so that some sentences end before the limit."""
    from safetensors.torch import load_file, save_file

    folder = tmp_path_factory.mktemp("opus") / "opus-mt-tiny"
    shutil.copytree(marian_folder(), folder)
    weights = load_file(str(folder / "model.safetensors"))
    weights["final_logits_bias"][0, 0] += 2.5
    save_file(weights, str(folder / "model.safetensors"), metadata={"format": "pt"})
    pad = json.loads((folder / "config.json").read_text())["pad_token_id"]
    generation = {"bad_words_ids": [[pad]], "bos_token_id": 0, "decoder_start_token_id": pad,
                  "eos_token_id": 0, "forced_eos_token_id": 0, "max_length": 64,
                  "num_beams": 4, "pad_token_id": pad,
                  "transformers_version": "4.32.0.dev0"}  # fmt: skip
    (folder / "generation_config.json").write_text(json.dumps(generation))
    return folder


@pytest.fixture(scope="module")
def imported(opus, tmp_path_factory):
    out = tmp_path_factory.mktemp("imported") / "ck"
    assert main(["translate", "import", "--from", "hf", str(opus), str(out)]) == 0
    return out


def _hf(folder, n: int, **options) -> list[str]:
    """transformers' generate at max_new_tokens=n, the folder's generation config as it is
    (greedy unless ``options`` say otherwise)."""
    model, tok = hf_model(folder), hf_tokenizer(folder)
    batch = tok(SENTENCES, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=n, **options)
    return tok.batch_decode(out, skip_special_tokens=True)


def _run(checkpoint, capsys, *flags) -> list[str]:
    capsys.readouterr()
    assert main(["translate", "run", "--checkpoint", str(checkpoint), *flags, *SENTENCES]) == 0
    return capsys.readouterr().out.split("\n")[:-1]


@pytest.mark.parametrize("n", [1, 5, 12, 20])
def test_max_len_n_is_hfs_max_new_tokens_n(opus, imported, capsys, n):
    expected = _hf(opus, n, num_beams=1)
    assert _run(opus, capsys, "--max-len", str(n)) == expected
    assert _run(imported, capsys, "--max-len", str(n)) == expected
    hyps = Translator.load(opus).translate(SENTENCES, max_len=n)
    assert [h.text for h in hyps] == expected
    assert max(len(h.ids) for h in hyps) == n - 1  # the n-th token is the forced </s>
    assert all(h.finished for h in hyps)
    if n == 12:  # both kinds of end: </s> chosen, and </s> forced at the limit
        assert 0 < sum(len(h.ids) == 11 for h in hyps) < len(hyps)


def test_beam_search_at_the_limit_is_hfs_with_the_folders_beams(opus, capsys):
    """The folder's num_beams 4 (HF's default here), raw log-probabilities on both sides
    and HF's canonical search (early_stopping="never"): the same best, </s> forced."""
    for n in (5, 12):
        expected = _hf(opus, n, length_penalty=0.0, early_stopping="never")
        got = _run(opus, capsys, "--max-len", str(n), "--beam", "4", "--length-penalty", "0")
        assert got == expected


def test_eval_and_the_explorer_take_the_same_limit(opus, imported, tmp_path, capsys):
    from attnkit.serve.model_service import ModelService

    service = ModelService.from_checkpoint(opus, max_len=5)
    assert service.translate(SENTENCES[0]).text == _hf(opus, 5, num_beams=1)[0]
    with pytest.raises(ValueError, match="--max-len 64 is more than this model can produce"):
        ModelService.from_checkpoint(opus, max_len=64)
    corpus = tmp_path / "pairs.txt"
    corpus.write_text("".join(f"{EN[i % 8]} {i}\t{FR[i % 8]} {i}\n" for i in range(60)), "utf-8")
    argv = ["translate", "eval", "--checkpoint", str(imported), "--data", str(corpus),
            "--limit", "3", "--examples", "3", "--max-len", "5"]  # fmt: skip
    pairs = {}
    for flags in (argv, argv[:-2]):  # --max-len 5, then the default limit
        capsys.readouterr()
        assert main(flags) == 0
        lines = [line for line in capsys.readouterr().out.splitlines() if " => " in line]
        pairs[len(flags)] = [line.split("   (reference")[0].split(" => ") for line in lines]
    sources = [src for src, _hyp in pairs[len(argv)]]
    tr = Translator.load(imported)
    assert [hyp for _src, hyp in pairs[len(argv)]] == [
        h.text for h in tr.translate(sources, max_len=5)
    ]
    assert pairs[len(argv)] != pairs[len(argv) - 2]  # the default limit is longer
    assert main([*argv[:-1], "0"]) == 1
    assert "--max-len must be positive, got 0" in capsys.readouterr().err


def test_exports_keep_the_source_generation_config(opus, imported, tmp_path, capsys):
    from transformers import GenerationConfig

    source = json.loads((opus / "generation_config.json").read_text())
    for checkpoint, name in ((imported, "from-checkpoint"), (opus, "from-folder")):
        out = tmp_path / name
        assert main(["translate", "export", "--checkpoint", str(checkpoint), "--to", "hf",
                     str(out)]) == 0  # fmt: skip
        written = json.loads((out / "generation_config.json").read_text())
        assert {k: written[k] for k in source} == source, name  # num_beams 4 stays 4
        loaded = GenerationConfig.from_pretrained(out)
        assert (loaded.num_beams, loaded.max_length, loaded.bad_words_ids) == (
            4, 64, source["bad_words_ids"])  # fmt: skip
        assert _hf(out, 12) == _hf(opus, 12)  # HF's defaults there: beam 4, as the source's
    capsys.readouterr()


def test_a_folder_written_before_generation_config_json_keeps_config_jsons(opus, tmp_path):
    """transformers 4.x folders held the generation settings in config.json."""
    from attnkit.convert.marian import import_marian, source_generation_config

    old = tmp_path / "old"
    shutil.copytree(opus, old)
    settings = json.loads((old / "generation_config.json").read_text())
    (old / "generation_config.json").unlink()
    config = json.loads((old / "config.json").read_text())
    (old / "config.json").write_text(json.dumps({**config, **settings}))
    kept = source_generation_config(old)
    assert kept["num_beams"] == 4 and kept["bad_words_ids"] == settings["bad_words_ids"]
    assert "d_model" not in kept
    ck = import_marian(old, tmp_path / "ck")
    assert json.loads((ck / "config.json").read_text())["generation_config"] == kept
    tr = Translator.load(ck)
    assert tr.data.tokenizer.forced_eos and tr.data.suppress_ids == (config["pad_token_id"],)


def test_forced_eos_follows_the_generation_config(opus, tmp_path):
    folder = tmp_path / "unforced"
    shutil.copytree(opus, folder)
    settings = json.loads((folder / "generation_config.json").read_text())
    (folder / "generation_config.json").write_text(
        json.dumps({**settings, "forced_eos_token_id": None})
    )
    hyps = Translator.load(folder).translate(SENTENCES, max_len=12)
    assert [h.text for h in hyps] == _hf(folder, 12, num_beams=1)
    assert not all(h.finished for h in hyps) and max(len(h.ids) for h in hyps) == 12


PUNCTUATION = [
    "He said «hello» — and “left”… ",
    "It costs 5 € , ok ?",
    "Bonjour !  Ça va ?",
    "a\u00a0b  ,c",
    "‘Quoted’ „low“ and ‚single‘ – dash",
    "The cat 's toy ; really :",
]


def test_the_punctuation_normalizer_is_transformers(opus):
    """transformers' MarianTokenizer.normalize (sacremoses' MosesPunctNormalizer for the
    source language) and its tokenizer(text), which does not call it (transformers 5)."""
    pytest.importorskip("sacremoses")
    from attnkit.data.marian_tokenizer import MarianTokenizer

    ours, hf = MarianTokenizer.from_folder(opus), hf_tokenizer(opus)
    assert ours.source_lang == hf.source_lang == "en"
    changed = 0
    for text in PUNCTUATION:
        normal = ours.normalize(text)
        assert normal == hf.normalize(text), text
        changed += normal != text
        for t in (text, normal):  # attnkit's ids are HF's on the text, as given or normalized
            assert ours.src_vocab[ours.encode_source(t)] + [0] == hf(t)["input_ids"], t
    assert changed >= 4  # the test set exercises the normalizer
    assert ours.normalize("") == ""
