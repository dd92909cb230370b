"""GPT-2's byte-level BPE built with ``tokenizers`` equals HF's GPT2Tokenizer (ids and
decoded text) on a test set of strings, from vocab.json + merges.txt or tokenizer.json, and
comes back from an attnkit checkpoint folder (sha256-checked)."""

from __future__ import annotations

import json

import pytest
from tests.convert.gpt2_fixtures import STRINGS, hf_tokenizer, tiny_gpt2

from attnkit.convert.gpt2_tokenizer import ENDOFTEXT, GPT2BPETokenizer


@pytest.fixture(scope="module")
def tok():
    return GPT2BPETokenizer.from_folder(tiny_gpt2())


@pytest.mark.parametrize("text", STRINGS)
def test_ids_and_text_equal_hf(tok, text):
    hf = hf_tokenizer()
    ids = tok.encode(text)
    assert ids == hf(text)["input_ids"]
    assert tok.decode(ids) == hf.decode(ids) == text  # byte-level: every text comes back


def test_the_special_token_is_one_id_and_the_vocabulary_is_hfs(tok):
    hf = hf_tokenizer()
    eos = tok.eos_id
    assert eos == hf.convert_tokens_to_ids(ENDOFTEXT) and tok.encode(ENDOFTEXT) == [eos]
    assert len(tok) == len(hf) and tok.vocab.idx_to_token == hf.convert_ids_to_tokens(
        list(range(len(hf)))
    )
    assert tok.label(tok.encode(" animal")[0]) == " animal"  # a piece's own text, with its space


def test_tokenizer_json_and_files_agree_and_hf_reads_what_it_writes(tok, tmp_path):
    from transformers import AutoTokenizer

    written = tok.save_pretrained(tmp_path)
    assert written == ["vocab.json", "merges.txt", "tokenizer.json"]
    only_json = tmp_path / "json"
    only_json.mkdir()
    (only_json / "tokenizer.json").write_text((tmp_path / "tokenizer.json").read_text())
    again = GPT2BPETokenizer.from_folder(only_json)
    from_files = GPT2BPETokenizer.from_files(tmp_path / "vocab.json", tmp_path / "merges.txt")
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "gpt2"}))
    hf = AutoTokenizer.from_pretrained(tmp_path)
    for text in STRINGS:
        assert again.encode(text) == from_files.encode(text) == hf(text)["input_ids"]
        assert again.encode(text) == tok.encode(text)


def test_saved_in_a_checkpoint_folder_it_loads_checked(tok, tmp_path):
    meta = tok.save(tmp_path)
    assert meta["kind"] == "gpt2-bpe" and (tmp_path / meta["file"]).is_file()
    again = GPT2BPETokenizer.load(tmp_path, meta)
    assert [again.encode(t) for t in STRINGS] == [tok.encode(t) for t in STRINGS]
    (tmp_path / meta["file"]).write_text(tok.spec.replace('"Ġ', '"G', 1))
    with pytest.raises(ValueError, match="is corrupted \\(sha256 does not match\\)"):
        GPT2BPETokenizer.load(tmp_path, meta)
    with pytest.raises(ValueError, match=r"bad tokenizer file name '\.\./x\.json'"):
        GPT2BPETokenizer.load(tmp_path, {**meta, "file": "../x.json"})


def test_errors_name_what_is_wrong(tok, tmp_path):
    with pytest.raises(
        FileNotFoundError, match=r"holds no GPT-2 tokenizer: expected tokenizer\.json"
    ):
        GPT2BPETokenizer.from_folder(tmp_path)
    with pytest.raises(ValueError, match=r"ids \[100000\] are outside the tokenizer's \[0, "):
        tok.decode([1, 100000])
    with pytest.raises(TypeError, match="text must be a str, got int"):
        tok.encode(5)
    with pytest.raises(ValueError, match=r"is not a readable tokenizer\.json"):
        GPT2BPETokenizer("{not json")
