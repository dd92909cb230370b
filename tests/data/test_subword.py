"""Subword data: normalization, the SentencePiece tokenizer, the subword TranslationData,
and the errors of bad input (file and line, count or value named)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from attnkit.data.normalize import normalize_source, normalize_target, normalize_text
from attnkit.data.subword import SubwordTokenizer
from attnkit.data.translation import load_translation_data


@pytest.fixture(scope="module")
def real_format(real_format_file) -> Path:
    return real_format_file(400)


# ------------------------------------------------------------------ normalization


@pytest.mark.parametrize(
    "variant",
    [
        "I'm hungry.",
        "i'm hungry .",
        "I\u2019m hungry.",  # a typographic apostrophe
        "  I'm\u00a0 hungry .  ",  # a no-break space, runs of spaces
        "I\u02bcm\thungry\u202f.",
    ],
)
def test_source_forms_normalize_to_one_string(variant):
    assert normalize_source(variant) == "i'm hungry."


def test_question_and_exclamation_marks_and_case():
    assert normalize_source("Where is the train station ?") == "where is the train station?"
    assert normalize_source("Run!") == normalize_source("run !") == "run!"
    # French keeps its capitals and its space before ! ? ; : (a plain one)
    assert normalize_target("Où est la gare\u202f?") == "Où est la gare ?"
    assert normalize_target("J\u2019ai faim\u00a0!") == "J'ai faim !"
    # NFC: a decomposed é is the composed one
    assert normalize_text("e\u0301t\u00e9") == "\u00e9t\u00e9"
    with pytest.raises(TypeError, match="text must be a str, got int"):
        normalize_text(3)


# ------------------------------------------------------------------ the tokenizer


@pytest.fixture(scope="module")
def tokenizer(real_format) -> SubwordTokenizer:
    pairs = [line.split("\t") for line in real_format.read_text("utf-8").splitlines()]
    return SubwordTokenizer.train([e for e, _ in pairs], [f for _, f in pairs], vocab_size=400)


def test_tokenizer_round_trip(tokenizer, real_format):
    french = [line.split("\t")[1] for line in real_format.read_text("utf-8").splitlines()]
    for sentence in [*french[:50], "Où est la gare\u202f?", "Ça coûte 3 € 😀."]:
        pieces = tokenizer.encode_target(sentence)
        ids = tokenizer.tgt_vocab[pieces]
        assert tokenizer.decode_target([*ids, 3, 17]) == normalize_target(
            sentence
        )  # stops at <eos>
        assert 0 not in ids  # byte fallback: never <unk>, even for an emoji never seen
    assert tokenizer.encode_source("I'm hungry.") == tokenizer.encode_source("i'm hungry .")
    # the layout of the word pipeline: <unk>=0, <pad>=1, <bos>=2, <eos>=3
    assert tokenizer.tgt_vocab.idx_to_token[:4] == ["<unk>", "<pad>", "<bos>", "<eos>"]
    assert tokenizer.joint and tokenizer.src_vocab is tokenizer.tgt_vocab
    assert len(tokenizer.src_vocab) == 400


def test_training_is_deterministic(tokenizer, real_format):
    pairs = [line.split("\t") for line in real_format.read_text("utf-8").splitlines()]
    again = SubwordTokenizer.train([e for e, _ in pairs], [f for _, f in pairs], vocab_size=400)
    assert again.meta()["sha256"] == tokenizer.meta()["sha256"]


def test_separate_and_bpe_models(real_format):
    pairs = [line.split("\t") for line in real_format.read_text("utf-8").splitlines()]
    tok = SubwordTokenizer.train(
        [e for e, _ in pairs], [f for _, f in pairs], vocab_size=380, model_type="bpe", joint=False
    )
    assert not tok.joint and tok.model_type == "bpe"
    assert len(tok.src_vocab) == len(tok.tgt_vocab) == 380
    assert tok.src_vocab.idx_to_token != tok.tgt_vocab.idx_to_token
    assert tok.decode_target(tok.tgt_vocab[tok.encode_target("Il est là\u202f!")]) == "Il est là !"


def test_save_load_and_damaged_files(tokenizer, tmp_path):
    meta = tokenizer.save(tmp_path)
    (name,) = meta["files"]
    assert name.startswith("tokenizer-joint-") and (tmp_path / name).is_file()
    assert meta["sha256"] == [hashlib.sha256((tmp_path / name).read_bytes()).hexdigest()]
    again = SubwordTokenizer.load(tmp_path, meta)
    assert again.src_vocab.idx_to_token == tokenizer.src_vocab.idx_to_token
    (tmp_path / name).write_bytes(b"not a model")
    with pytest.raises(ValueError, match=rf"tokenizer file .*{name} is damaged"):
        SubwordTokenizer.load(tmp_path, meta)
    (tmp_path / name).unlink()
    with pytest.raises(FileNotFoundError, match=rf"tokenizer file {name} is missing"):
        SubwordTokenizer.load(tmp_path, meta)


def test_vocab_size_errors(real_format):
    pairs = [line.split("\t") for line in real_format.read_text("utf-8").splitlines()]
    with pytest.raises(ValueError, match=r"--vocab-size 50000 is too large for the training "
                       r"split \(800 sentences\): SentencePiece can make at most \d+ pieces"):  # fmt: skip
        SubwordTokenizer.train([e for e, _ in pairs], [f for _, f in pairs], vocab_size=50000)
    with pytest.raises(ValueError, match="--vocab-size 100 is too small"):
        SubwordTokenizer.train(["a"], ["b"], vocab_size=100)
    with pytest.raises(ValueError, match=r"--vocab-size 300 is too small for the training "
                       r"split: its characters and the special and byte pieces need 3\d\d"):  # fmt: skip
        SubwordTokenizer.train([e for e, _ in pairs], [f for _, f in pairs], vocab_size=300)
    with pytest.raises(ValueError, match="model_type must be one of 'unigram', 'bpe', got 'char'"):
        SubwordTokenizer.train(["a"], ["b"], model_type="char")
    with pytest.raises(TypeError, match=r"vocab_size must be an int, got '8000' \(str\)"):
        SubwordTokenizer.train(["a"], ["b"], vocab_size="8000")
    with pytest.raises(TypeError, match=r"joint must be a bool, got 0 \(int\)"):
        SubwordTokenizer.train(["a"], ["b"], joint=0)


# ------------------------------------------------------------------ the data object


def test_subword_data(real_format):
    data = load_translation_data(real_format, tokenizer="sentencepiece", vocab_size=400)
    assert data.tokenizer is not None and data.unit == "pieces" and data.bleu_tokenize == "13a"
    assert len(data.train) + len(data.val) + len(data.test) == 400
    # the splits share no sentence (normalized), on either side
    train = data.texts["train"]
    for name in ("val", "test"):
        held = data.texts[name]
        assert not {e for e, _ in held} & {e for e, _ in train}
        assert not {f for _, f in held} & {f for _, f in train}
    # references are the normalized French text as written, not pieces
    assert all("\u202f" not in r and r[0].isupper() for r in data.references("test"))
    src, _ = data.encode_source(["I'm hungry.", "i'm hungry ."])
    assert src[0].tolist() == src[1].tolist()
    # every split's pieces decode back to its reference
    for (_, tgt), ref in zip(data.test, data.references("test")):
        assert data.detokenize(data.tgt_vocab[tgt]) == ref
    d = data.to_dict()
    assert d["tokenizer"]["kind"] == "sentencepiece" and d["max_len"] == 128


def test_word_pipeline_stays_the_default(real_format):
    data = load_translation_data(real_format)
    assert data.tokenizer is None and data.unit == "words" and data.max_len == 12
    assert data.references("test")[0] == " ".join(data.test[0][1])


def test_bad_files_name_the_file_and_line(tmp_path):
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Go.\tVa !\nHi.\tSalut !\nWait.\tAttendez, s'il vous pla\u00eet.\n".encode("latin-1"))  # fmt: skip
    for tokenizer in ("word", "sentencepiece"):
        with pytest.raises(
            ValueError, match=r"latin1\.txt is not UTF-8 text: line 3, byte 30 is b'\\xee'"
        ):
            load_translation_data(latin1, tokenizer=tokenizer)
    csv = tmp_path / "pairs.csv"
    csv.write_text("english,french\nGo.,Va !\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"pairs\.csv has no usable 'English<TAB>French' pairs "
                       r"\(2 malformed line\(s\); line 1 reads 'english,french'\)"):  # fmt: skip
        load_translation_data(csv, tokenizer="sentencepiece")


def test_empty_training_split_is_an_error(real_format):
    with pytest.raises(ValueError, match=r"the training split of .*fra\.txt is empty: all its "
                       r"\d+ pairs are longer than max_len=3 pieces"):  # fmt: skip
        load_translation_data(real_format, tokenizer="sentencepiece", vocab_size=400, max_len=3)
    with pytest.raises(ValueError, match="tokenizer must be one of"):
        load_translation_data(real_format, tokenizer="bpe")
