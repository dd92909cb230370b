"""Export to CTranslate2: a tiny subword Transformer trained for a few seconds, exported,
and CTranslate2's greedy decoding compared with attnkit's on every test sentence; bad
input (another arch, a language model, word tokens, an OUT that exists, no ctranslate2)
is a clear error that writes nothing. The tests that run CTranslate2 skip without it."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from attnkit.checkpoint import read_checkpoint_config, save_checkpoint
from attnkit.cli import build_parser, main
from attnkit.data.subword import SubwordTokenizer
from attnkit.data.translation import load_translation_data
from attnkit.inference.decoding import translate
from attnkit.inference.export_ctranslate2 import export_ctranslate2, transformer_spec
from attnkit.inference.translator import Translator
from attnkit.models.registry import build_model


@pytest.fixture(scope="module")
def checkpoint(subword_checkpoint) -> Path:
    """A tiny pre-norm subword Transformer (2 + 2 layers) trained for a few seconds: varied
    translations, most of them ending with <eos>."""
    return subword_checkpoint


@pytest.fixture(scope="module")
def exported(checkpoint, tmp_path_factory) -> Path:
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (attnkit[peers])")
    return export_ctranslate2(checkpoint, tmp_path_factory.mktemp("ct2") / "model")


def _test_split(checkpoint: Path):
    """The checkpoint's data with its splits (as ``attnkit translate eval`` rebuilds it)."""
    cfg = read_checkpoint_config(checkpoint)
    data_args = dict(cfg["data_args"])
    data_args["subword"] = SubwordTokenizer.load(checkpoint, cfg["data"]["tokenizer"])
    return load_translation_data(**data_args)


def test_greedy_output_equals_attnkits_on_every_test_sentence(checkpoint, exported):
    data = _test_split(checkpoint)
    sentences = data.sources("test") + data.sources("val")  # every one of both splits
    assert len(sentences) >= 20
    got, want = _ct2_greedy_ids(exported, checkpoint, sentences)
    assert got == [h.ids for h in want]
    assert len({tuple(ids) for ids in got}) > len(got) // 2  # real, varied translations
    assert sum(h.finished for h in want) > len(want) // 2
    # the README's recipe: the folder's own SentencePiece model gives attnkit's text
    import sentencepiece as spm

    sp = spm.SentencePieceProcessor(model_file=str(exported / "sentencepiece.model"))
    assert [sp.decode(data.tgt_vocab.to_tokens(ids)) for ids in got] == [h.text for h in want]


def _ct2_greedy_ids(folder: Path, checkpoint: Path, sentences: list[str]):
    """(CTranslate2's greedy ids, attnkit's hypotheses) of ``sentences``."""
    import ctranslate2

    translator = Translator.load(checkpoint)
    data = _test_split(checkpoint)
    steps = translator.decode_steps()
    want = translate(translator.model, data, sentences, max_len=steps)
    ct2 = ctranslate2.Translator(str(folder), device="cpu", inter_threads=1, intra_threads=1)
    pieces = [data.tokenizer.encode_source(s) for s in sentences]
    results = ct2.translate_batch(
        pieces, beam_size=1, max_decoding_length=steps, min_decoding_length=0
    )
    return [data.tgt_vocab[r.hypotheses[0]] for r in results], want


def test_one_subword_model_per_language_exports_both(
    real_format_file, subword_train_argv, tmp_path
):
    """--separate-vocab: two SentencePiece models, two vocabularies, the same equality."""
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (attnkit[peers])")
    corpus = real_format_file(300, seed=2)
    checkpoint = tmp_path / "sep"
    train = [*subword_train_argv, "--separate-vocab", "--vocab-size", "350", "--epochs", "4"]
    threads = torch.get_num_threads()
    try:
        assert main([*train, "--data", str(corpus), "--out", str(checkpoint)]) == 0
    finally:
        torch.set_num_threads(threads)
    out = export_ctranslate2(checkpoint, tmp_path / "ct2")
    names = {p.name for p in out.iterdir()}
    assert {"source_vocabulary.json", "target_vocabulary.json"} <= names
    assert {"source.model", "target.model"} <= names and "shared_vocabulary.json" not in names
    assert (
        'sp_target = spm.SentencePieceProcessor(model_file="ct2/target.model")'
        in (out / "README.md").read_text()
    )
    sentences = _test_split(checkpoint).sources("test")
    got, want = _ct2_greedy_ids(out, checkpoint, sentences)
    assert got == [h.ids for h in want]


def test_the_folder_holds_weights_vocabulary_tokenizer_and_readme(checkpoint, exported):
    names = {p.name for p in exported.iterdir()}
    assert names == {
        "model.bin", "config.json", "shared_vocabulary.json", "sentencepiece.model", "README.md",
    }  # fmt: skip
    config = json.loads((exported / "config.json").read_text())
    assert config["decoder_start_token"] == "<bos>" and config["eos_token"] == "<eos>"
    assert config["add_source_eos"] is True and config["layer_norm_epsilon"] == 1e-5
    vocab = json.loads((exported / "shared_vocabulary.json").read_text())
    assert vocab == Translator.load(checkpoint).data.tgt_vocab.idx_to_token
    readme = (exported / "README.md").read_text()
    assert "ctranslate2.Translator" in readme and "min_decoding_length=0" in readme
    assert not [p for p in exported.parent.iterdir() if p.name.startswith(".")]  # no temp left


def _bahdanau_checkpoint(checkpoint: Path, folder: Path) -> Path:
    """The subword checkpoint's data and tokenizer, with a Bahdanau model."""
    cfg = read_checkpoint_config(checkpoint)
    for name in cfg["data"]["tokenizer"]["files"]:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(checkpoint / name, folder / name)
    model_config = {"embed_size": 8, "num_hiddens": 8, "num_layers": 1, "dropout": 0.0}
    size = len(cfg["data"]["src_vocab"]["idx_to_token"])
    model = build_model("bahdanau", model_config, size, size)
    config = {"arch": "bahdanau", "model_config": model_config, "data": cfg["data"]}
    return save_checkpoint(folder, config, model.state_dict())


def _word_checkpoint(tiny_data, folder: Path) -> Path:
    model_config = {"d_model": 8, "num_heads": 2, "num_layers": 1, "d_ff": 16}
    sizes = len(tiny_data.src_vocab), len(tiny_data.tgt_vocab)
    model = build_model("transformer", model_config, *sizes)
    config = {"arch": "transformer", "model_config": model_config, "data": tiny_data.to_dict()}
    return save_checkpoint(folder, config, model.state_dict())


@pytest.mark.parametrize(
    ("make", "error", "match"),
    [
        ("bahdanau", ValueError, r"it is arch 'bahdanau'; the export takes Transformer"),
        ("lm", ValueError, r"is a language-model checkpoint .*; this needs a translator"),
        ("word", ValueError, r"no subword tokenizer .* train with --tokenizer sentencepiece"),
        ("none", FileNotFoundError, r"no checkpoint at .*: not a directory"),
    ],
)
def test_bad_checkpoints_are_clear_errors_and_write_nothing(
    checkpoint, tiny_data, tmp_path, make, error, match
):
    source = tmp_path / "ck"
    if make == "bahdanau":
        _bahdanau_checkpoint(checkpoint, source)
    elif make == "lm":
        save_checkpoint(source, {"task": "lm", "cell": "gru"}, {"w": torch.zeros(1)})
    elif make == "word":
        _word_checkpoint(tiny_data, source)
    out_dir = tmp_path / "exports"
    out_dir.mkdir()
    with pytest.raises(error, match=match):
        export_ctranslate2(source, out_dir / "model")
    assert list(out_dir.iterdir()) == []


def test_an_out_that_exists_is_an_error_and_stays_as_it_was(checkpoint, tmp_path):
    out = tmp_path / "taken"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(FileExistsError, match="already exists: give the export a new folder"):
        export_ctranslate2(checkpoint, out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"] and len(list(tmp_path.iterdir())) == 1
    with pytest.raises(FileNotFoundError, match=r"the folder .* does not exist"):
        export_ctranslate2(checkpoint, tmp_path / "no" / "such")
    with pytest.raises(ValueError, match="quantization must be one of"):
        export_ctranslate2(checkpoint, tmp_path / "q", quantization="int3")


def test_without_ctranslate2_the_error_says_how_to_install_it(checkpoint, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)  # import ctranslate2 -> ImportError
    monkeypatch.setitem(sys.modules, "ctranslate2.specs", None)
    with pytest.raises(ModuleNotFoundError, match=r"pip install 'attnkit\[peers\]'"):
        export_ctranslate2(checkpoint, tmp_path / "model")
    assert list(tmp_path.iterdir()) == []
    translator = Translator.load(checkpoint)
    tokens = translator.data.src_vocab.idx_to_token
    with pytest.raises(ModuleNotFoundError, match="needs the ctranslate2 package"):
        transformer_spec(translator.model, tokens, tokens)


def _cli(argv: list[str]) -> int:
    """``attnkit translate export ...`` through the real parser, errors raised (not printed)."""
    args = build_parser().parse_args(["translate", *argv])
    return args.func(args)


def test_the_command_writes_the_folder_and_says_where(checkpoint, tmp_path, capsys):
    pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (attnkit[peers])")
    out = tmp_path / "int8"
    argv = ["export", "--checkpoint", str(checkpoint), "--to", "ctranslate2", str(out)]
    assert _cli([*argv, "--quantization", "int8"]) == 0
    assert f"exported {checkpoint} to {out} (CTranslate2)" in capsys.readouterr().out
    assert (out / "model.bin").is_file()
    with pytest.raises(FileExistsError, match="already exists: give the export a new folder"):
        _cli(argv)
    with pytest.raises(SystemExit):
        _cli([*argv[:-2], "onnx", str(tmp_path / "x")])  # --to: ctranslate2 only
    assert "invalid choice: 'onnx'" in capsys.readouterr().err


def test_the_command_without_ctranslate2_is_a_plain_error(checkpoint, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    monkeypatch.setitem(sys.modules, "ctranslate2.specs", None)
    argv = ["export", "--checkpoint", str(checkpoint), "--to", "ctranslate2", str(tmp_path / "m")]
    with pytest.raises(RuntimeError, match=r"pip install 'attnkit\[peers\]'"):
        _cli(argv)


@pytest.mark.parametrize(
    ("option", "match"),
    [
        ({"num_kv_heads": 2}, "2 key/value heads for 4 query heads"),
        ({"positions": "rope"}, "attention1 uses positions='rope'"),
    ],
)
def test_what_the_mapping_does_not_cover_is_refused(option, match):
    from attnkit.attention.multihead import MultiHeadAttention
    from attnkit.models.transformer import TransformerConfig, build_transformer

    model = build_transformer(TransformerConfig(d_model=16, num_heads=4, d_ff=16), 20, 20)
    model.decoder.blks[0].attention1 = MultiHeadAttention(16, 4, **option)
    tokens = ["<unk>", "<pad>", "<bos>", "<eos>", *(f"w{i}" for i in range(16))]
    with pytest.raises(ValueError, match=match):
        transformer_spec(model, tokens, tokens)


def test_the_attnkit_command_reports_a_used_out_folder_in_one_line(checkpoint, tmp_path, capsys):
    out = tmp_path / "used"
    out.mkdir()
    argv = ["translate", "export", "--checkpoint", str(checkpoint), "--to", "ctranslate2"]
    assert main([*argv, str(out)]) == 1
    err = capsys.readouterr().err
    assert str(out) in err and "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert list(out.iterdir()) == []
