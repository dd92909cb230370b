"""SentencePiece for language models: raw text (case and punctuation kept), deterministic,
saved beside a checkpoint with its sha256."""

from __future__ import annotations

import pytest

from attnkit.data.lm import read_corpus_lines
from attnkit.data.lm_subword import LMSubwordTokenizer

LINES = [
    "The Time Traveller (for so it will be convenient to speak of him) was expounding",
    "a recondite matter to us. His grey eyes shone and twinkled, and his usually pale",
    "face was flushed and animated. The fire burned brightly, and the soft radiance",
] * 20


def test_raw_text_in_and_out_deterministically(tmp_path):
    tok = LMSubwordTokenizer.train(LINES, vocab_size=300)
    assert len(tok) == 300 == len(tok.vocab) and tok.vocab.idx_to_token[:4] == [
        "<unk>", "<pad>", "<bos>", "<eos>",
    ]  # fmt: skip
    for text in ("His grey Eyes (shone)!", "Ünïcödé, bytes: ✓"):
        assert tok.decode(tok.encode(text)) == text  # not lowercased, nothing dropped
    assert tok.decode([2, *tok.encode("The fire"), 3]) == "The fire"  # specials dropped
    assert LMSubwordTokenizer.train(LINES, vocab_size=300).proto == tok.proto
    assert tok.encode_lines(["a b", "", "c"]) == tok.encode("a b") + tok.encode("c")
    text = tmp_path / "t.txt"
    text.write_text("\n".join(LINES[:3]) + "\n", encoding="utf-8")
    assert read_corpus_lines(text, normalize=False) == LINES[:3]


def test_saved_with_its_sha256_and_checked_on_load(tmp_path):
    tok = LMSubwordTokenizer.train(LINES, vocab_size=300)
    meta = tok.save(tmp_path)
    assert meta["file"].startswith("sentencepiece-") and (tmp_path / meta["file"]).is_file()
    assert LMSubwordTokenizer.load(tmp_path, meta).encode("The fire") == tok.encode("The fire")
    (tmp_path / meta["file"]).write_bytes(tok.proto[:-1] + b"x")
    with pytest.raises(ValueError, match="is damaged"):
        LMSubwordTokenizer.load(tmp_path, meta)
    (tmp_path / meta["file"]).unlink()
    with pytest.raises(FileNotFoundError, match=r"its tokenizer file sentencepiece-.* is missing"):
        LMSubwordTokenizer.load(tmp_path, meta)
    with pytest.raises(ValueError, match="not a sentencepiece tokenizer record"):
        LMSubwordTokenizer.load(tmp_path, {"kind": "bpe"})


def test_bad_sizes_and_empty_text_are_clear_errors():
    with pytest.raises(ValueError, match="--vocab-size 100 is too small"):
        LMSubwordTokenizer.train(LINES, vocab_size=100)
    with pytest.raises(ValueError, match="--vocab-size 5000 is too large for the text"):
        LMSubwordTokenizer.train(LINES, vocab_size=5000)
    with pytest.raises(ValueError, match="without a non-empty line"):
        LMSubwordTokenizer.train(["", "  "], vocab_size=300)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_corpus_lines("/nonexistent/text.txt", normalize=False)


def test_one_string_is_not_taken_for_lines():
    with pytest.raises(
        TypeError, match=r"lines must be a sequence of str \(one per line\), got str"
    ):
        LMSubwordTokenizer.train("the time traveller", vocab_size=300)
