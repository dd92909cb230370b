"""attnkit's Marian tokenizer equals transformers' MarianTokenizer (ids and text)."""

from __future__ import annotations

import json
import shutil

import pytest
from tests.convert.marian_fixtures import TEXTS, hf_tokenizer, marian_folder

from attnkit.data.marian_tokenizer import MarianTokenizer
from attnkit.data.translation_data import TranslationData


@pytest.fixture(scope="module")
def both():
    folder = marian_folder()
    return MarianTokenizer.from_folder(folder), hf_tokenizer(folder)


def _ids(tok: MarianTokenizer, text: str) -> list[int]:
    return tok.src_vocab[tok.encode_source(text)] + [tok.special_ids["eos"]]


def test_encoding_equals_hf_unknown_pieces_included(both):
    ours, hf = both
    unknowns = 0
    for text in TEXTS:
        expected = hf(text)["input_ids"]
        assert _ids(ours, text) == expected, text
        unknowns += expected.count(hf.unk_token_id)
    assert unknowns >= 3  # the test set exercises pieces vocab.json does not list
    assert ours.special_ids == {"bos": hf.pad_token_id, "eos": hf.eos_token_id,
                                "pad": hf.pad_token_id, "unk": hf.unk_token_id}  # fmt: skip


def test_target_encoding_equals_hf(both):
    ours, hf = both
    for text in ("L'animal était trop fatigué.", "Où est la gare ?"):
        expected = hf(text_target=text)["input_ids"]
        assert ours.tgt_vocab[ours.encode_target(text)] + [0] == expected


def test_decoding_equals_hf_skip_special_tokens(both):
    ours, hf = both
    V = len(ours.tgt_vocab)
    cases = [hf(t)["input_ids"] for t in TEXTS]  # unknowns, eos
    cases += [[5, 7, V - 1, 9, 1, 12], list(range(2, 30)), [3, 0, 8, 9]]  # pad, unk, eos
    for ids in cases:
        expected = hf.decode(ids[: ids.index(0)] if 0 in ids else ids, skip_special_tokens=True)
        assert ours.decode_target(ids) == expected, ids


def test_saved_in_a_checkpoint_folder_and_loaded(both, tmp_path):
    ours, _ = both
    data = TranslationData(ours.src_vocab, ours.tgt_vocab, [], [], [], 64, tokenizer=ours)
    record = data.to_dict()
    ours.save(tmp_path)
    back = TranslationData.from_dict(json.loads(json.dumps(record)), tmp_path)
    assert back.special_ids == data.special_ids and back.suppress_ids == (len(ours.src_vocab) - 1,)
    src, src_len = back.encode_source(["Where is the nearest bakery?", "x"])
    assert src[1, : int(src_len[1])].tolist() == _ids(ours, "x")
    assert src[1, int(src_len[1]) :].tolist() == [ours.special_ids["pad"]] * (
        src.shape[1] - int(src_len[1])
    )
    assert back.src_vocab.unk == 1 and back.src_vocab["no-such-piece"] == 1
    damaged = tmp_path / record["tokenizer"]["files"][2]
    damaged.write_bytes(damaged.read_bytes() + b" ")
    with pytest.raises(ValueError, match="damaged"):
        TranslationData.from_dict(record, tmp_path)


def test_separate_vocabs_and_missing_files_are_refused(tmp_path):
    folder = tmp_path / "m"
    shutil.copytree(marian_folder(), folder)
    (folder / "tokenizer_config.json").write_text(json.dumps({"separate_vocabs": True}))
    with pytest.raises(ValueError, match="separate_vocabs: true"):
        MarianTokenizer.from_folder(folder)
    (folder / "target.spm").unlink()
    with pytest.raises(FileNotFoundError, match=r"lacks target\.spm"):
        MarianTokenizer.from_folder(folder)
