"""Every tool on an imported Marian model: import / export CLI, the HF round trip, translate
run (greedy, beam, heatmaps, int8) and eval, the explorer's service, CTranslate2."""

from __future__ import annotations

import json

import pytest
import torch
from tests.convert.marian_fixtures import EN, FR, hf_model, hf_tokenizer, marian_folder

from attnkit.cli import main
from attnkit.convert.marian import MarianMappingError, marian_model
from attnkit.convert.marian_export import export_marian
from attnkit.inference.translator import Translator
from attnkit.models.transformer import TransformerConfig, build_transformer

SENTENCES = [EN[0], EN[1], "Where is the station?"]


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("imported") / "ck"
    assert main(["translate", "import", "--from", "hf", str(marian_folder()), str(out)]) == 0
    return out


def _hf_greedy_texts(folder, sentences, max_new_tokens=20) -> list[str]:
    """HF's greedy generate at ``max_new_tokens``, the folder's generation config as it is
    (``</s>`` forced at the last step), ``<pad>`` banned as OPUS-MT's configs ban it (the
    tiny folder, saved by transformers 5, does not list it)."""
    model, tok = hf_model(folder), hf_tokenizer(folder)
    batch = tok(sentences, return_tensors="pt", padding=True)
    with torch.no_grad():
        out = model.generate(**batch, num_beams=1, do_sample=False, max_new_tokens=max_new_tokens,
                             bad_words_ids=[[tok.pad_token_id]])  # fmt: skip
    return tok.batch_decode(out, skip_special_tokens=True)


def test_imported_checkpoint_and_folder_translate_as_hf(imported):
    expected = _hf_greedy_texts(marian_folder(), SENTENCES)
    for source in (imported, marian_folder()):  # the checkpoint, and the folder directly
        tr = Translator.load(source)
        hyps = tr.translate(SENTENCES, max_len=20)  # 20 new tokens, </s> included
        assert [h.text for h in hyps] == expected
    cfg = json.loads((imported / "config.json").read_text())
    assert cfg["arch"] == "transformer" and cfg["model_config"]["positions_layout"] == "halves"


def test_translate_run_greedy_beam_heatmap_int8(imported, tmp_path, capsys):
    png = tmp_path / "maps.png"
    base = ["translate", "run", "--checkpoint", str(imported), "--max-len", "12"]
    assert main([*base, SENTENCES[0], "--heatmap", str(png)]) == 0
    assert png.stat().st_size > 1000
    assert main([*base, SENTENCES[0], "--beam", "3"]) == 0
    assert main([*base, SENTENCES[0], "--int8"]) == 0
    assert main(["translate", "run", "--checkpoint", str(marian_folder()), "--max-len", "12",
                 SENTENCES[0]]) == 0  # fmt: skip
    lines = capsys.readouterr().out.strip().splitlines()
    greedy = Translator.load(imported).translate([SENTENCES[0]], max_len=12)[0].text
    assert greedy in lines[0] and greedy in lines[-1]


def test_translate_eval_greedy_and_beam(imported, tmp_path, capsys):
    corpus = tmp_path / "pairs.txt"
    lines = [f"{EN[i % 8]} {i}\t{FR[i % 8]} {i}\n" for i in range(60)]  # 60 sources
    corpus.write_text("".join(lines), "utf-8")
    for beam in ([], ["--beam", "2"]):
        argv = ["translate", "eval", "--checkpoint", str(imported), "--data", str(corpus),
                "--limit", "2", *beam]  # fmt: skip
        assert main(argv) == 0
    out = capsys.readouterr().out
    assert out.count("test BLEU") == 2 and "beam 2" in out


def test_the_explorer_service_on_the_marian_folder():
    from attnkit.serve.model_service import ModelService

    service = ModelService.from_checkpoint(marian_folder())
    result = service.translate(EN[0], beam_size=1)
    steps = service.translator.decode_steps()  # the model's 64 positions - 1
    assert result.text == _hf_greedy_texts(marian_folder(), [EN[0]], steps)[0]
    cross = torch.tensor(result.maps["cross"])  # (L, H, T, S): rows are distributions
    torch.testing.assert_close(cross.sum(-1), torch.ones(cross.shape[:-1]), atol=1e-5, rtol=0)
    assert result.maps["source"][-1] == "</s>"


def test_import_export_round_trip_through_transformers(imported, tmp_path):
    out = tmp_path / "hf"
    assert main(["translate", "export", "--checkpoint", str(imported), "--to", "hf",
                 str(out)]) == 0  # fmt: skip
    original, back = hf_model(marian_folder()), hf_model(out)
    for name, tensor in original.state_dict().items():
        assert torch.equal(back.state_dict()[name], tensor), name
    tok, tok_back = hf_tokenizer(marian_folder()), hf_tokenizer(out)
    assert tok_back(SENTENCES)["input_ids"] == tok(SENTENCES)["input_ids"]
    assert _hf_greedy_texts(out, SENTENCES) == _hf_greedy_texts(marian_folder(), SENTENCES)


def test_an_attnkit_model_exports_with_greedy_equal_to_hf_generate(tmp_path):
    """The book's configuration (interleaved table, no biases, relu, untied word
    vocabularies) as a MarianMT folder: HF's greedy generate gives attnkit's ids."""
    from transformers import MarianMTModel

    from attnkit.inference.decoding import greedy_decode

    torch.manual_seed(1)
    model = build_transformer(TransformerConfig(d_model=16, num_heads=2, d_ff=32, max_len=40),
                              30, 26).eval()  # fmt: skip
    with torch.no_grad():
        model.decoder.dense.bias.normal_(0, 0.5)

    from types import SimpleNamespace

    words = SimpleNamespace(  # what export reads of attnkit's word-level data
        special_ids={"bos": 2, "eos": 3, "pad": 1, "unk": 0}, suppress_ids=(), tokenizer=None
    )
    note = export_marian(model, words, tmp_path)
    assert "tokenizer was not exported" in note
    hf = MarianMTModel.from_pretrained(tmp_path).eval()
    src = torch.tensor([[5, 6, 7, 8, 3], [9, 10, 3, 1, 1]])
    src_len = torch.tensor([5, 3])
    mask = (torch.arange(5)[None] < src_len[:, None]).long()
    with torch.no_grad():
        out = hf.generate(input_ids=src, attention_mask=mask, num_beams=1, do_sample=False,
                          max_new_tokens=12, forced_eos_token_id=None, bad_words_ids=None)  # fmt: skip
    expected = [r[1:][: r[1:].index(3)] if 3 in r[1:] else r[1:] for r in out.tolist()]
    got = greedy_decode(model, src, src_len, bos_id=2, eos_id=3, max_len=12)
    assert got.tokens == expected


def test_pre_norm_models_are_refused(tmp_path):
    model = build_transformer(TransformerConfig(pre_norm=True), 10, 10)
    with pytest.raises(MarianMappingError, match="pre-norm Transformers do not map"):
        export_marian(model, None, tmp_path)


def test_ctranslate2_export_of_the_imported_model(imported, tmp_path):
    ctranslate2 = pytest.importorskip("ctranslate2")  # the peers extra
    out = tmp_path / "ct2"
    assert main(["translate", "export", "--checkpoint", str(imported), "--to", "ctranslate2",
                 str(out)]) == 0  # fmt: skip
    tr = Translator.load(imported)
    # 21 new tokens at most, the 21st a forced </s> (Marian's forced_eos_token_id, which
    # CTranslate2 has not): CTranslate2's 20 tokens at most
    ours = tr.translate(SENTENCES, max_len=21)
    ct2 = ctranslate2.Translator(str(out), device="cpu")
    pieces = [tr.data.tokenizer.encode_source(s) for s in SENTENCES]
    results = ct2.translate_batch(pieces, beam_size=1, max_decoding_length=20,
                                  min_decoding_length=0, suppress_sequences=[["<pad>"]])  # fmt: skip
    vocab = tr.data.tgt_vocab
    assert [vocab[r.hypotheses[0]] for r in results] == [h.ids for h in ours]


def test_marian_model_needs_only_config_and_weights(tmp_path):
    for name in ("config.json", "model.safetensors"):
        (tmp_path / name).write_bytes((marian_folder() / name).read_bytes())
    model = marian_model(tmp_path)
    assert not model.training and model.encoder.config.tie_embeddings


def test_a_hub_name_as_checkpoint_is_fetched_or_a_clear_error(monkeypatch, tmp_path):
    from attnkit.convert import hf_files

    asked = []

    def fetched(source, files=()):
        asked.append((source, files))
        return marian_folder()

    monkeypatch.chdir(tmp_path)  # no local folder of that name
    monkeypatch.setattr(hf_files, "resolve_source", fetched)
    tr = Translator.load("Helsinki-NLP/opus-mt-tiny")
    assert asked == [
        ("Helsinki-NLP/opus-mt-tiny", ("*.spm", "vocab.json", "tokenizer_config.json"))
    ]
    assert (
        tr.translate([EN[3]], max_len=5)[0].ids
        == Translator.load(marian_folder()).translate([EN[3]], max_len=5)[0].ids
    )

    def offline(source, files=()):
        raise hf_files.HFSourceError("could not fetch it; offline, download ...")

    monkeypatch.setattr(hf_files, "resolve_source", offline)
    with pytest.raises(FileNotFoundError, match="no checkpoint at runs/tf: no such folder; as a"):
        Translator.load("runs/tf")


def test_a_joint_subword_tokenizer_exports_as_a_marian_tokenizer(tmp_path):
    """attnkit's joint SentencePiece model as a MarianTokenizer: equal ids on normalized
    text (attnkit lower-cases English before SentencePiece), </s> being attnkit's <eos>."""
    from attnkit.data.normalize import normalize_source
    from attnkit.data.subword import SubwordTokenizer
    from attnkit.data.translation_data import TranslationData

    sub = SubwordTokenizer.train(EN * 8, FR * 8, vocab_size=320)
    data = TranslationData(sub.src_vocab, sub.tgt_vocab, [], [], [], 200, tokenizer=sub)
    config = TransformerConfig(d_model=16, num_heads=2, d_ff=32, tie_embeddings=True)
    model = build_transformer(config, len(sub.src_vocab), len(sub.tgt_vocab)).eval()
    note = export_marian(model, data, tmp_path)
    assert "joint SentencePiece model as a MarianTokenizer" in note
    tok = hf_tokenizer(tmp_path)
    for text in SENTENCES:
        src, src_len = data.encode_source([text])
        expected = src[0, : int(src_len[0])].tolist()
        assert tok(normalize_source(text))["input_ids"] == expected
    hf = json.loads((tmp_path / "config.json").read_text())
    assert hf["share_encoder_decoder_embeddings"] and hf["tie_word_embeddings"]
