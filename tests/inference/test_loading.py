"""Loading language models: the one checkpoint format only; an older folder gets one
error that says what it is and what to do."""

from __future__ import annotations

import json

import pytest
import torch

from attnkit.data.text import Vocab
from attnkit.inference.loading import MODEL_KEYS, load_lm_checkpoint, load_model
from attnkit.inference.translator import Translator
from attnkit.models.rnn import build_lm
from attnkit.training.lm import save_lm_checkpoint

CONFIG = dict(zip(MODEL_KEYS, ("gru", 8, 1, False, False, False)))


def _lm(directory):
    vocab = Vocab(list("the time machine"))
    torch.manual_seed(0)
    model = build_lm("gru", len(vocab), num_hiddens=8)
    save_lm_checkpoint(directory, model, vocab, {**CONFIG, "token": "char"})
    return model, vocab


def test_a_checkpoint_of_the_format_loads(tmp_path):
    model, vocab = _lm(tmp_path / "lm")
    loaded, loaded_vocab, config = load_lm_checkpoint(tmp_path / "lm")
    assert loaded_vocab.idx_to_token == vocab.idx_to_token and config["token"] == "char"
    assert not loaded.training
    for a, b in zip(loaded.state_dict().values(), model.state_dict().values(), strict=True):
        assert torch.equal(a, b)


def test_the_layout_before_the_format_is_refused_with_what_to_do(tmp_path):
    model, vocab = _lm(tmp_path / "lm")
    old = tmp_path / "old"
    old.mkdir()
    torch.save(model.state_dict(), old / "model.pt")
    (old / "vocab.json").write_text(json.dumps(vocab.to_dict()))
    (old / "config.json").write_text(json.dumps({**CONFIG, "epochs": 1}))
    message = (
        f"{old} is a language-model checkpoint of the layout before attnkit's checkpoint "
        'format (model.pt, vocab.json, a config.json without "format"), which attnkit does '
        "not read: train the model again with `attnkit lm train --out DIR`"
    )
    for load in (load_lm_checkpoint, load_model, Translator.load):
        with pytest.raises(ValueError) as info:
            load(old)
        assert str(info.value) == message


def test_a_folder_without_config_says_what_it_needs(tmp_path):
    with pytest.raises(FileNotFoundError, match="written by `attnkit lm train --out DIR`"):
        load_lm_checkpoint(tmp_path)


def test_either_arch_rebuilds_from_its_config_and_rnn_is_the_default(tmp_path):
    from attnkit.models.decoder_lm import DecoderLM, DecoderLMConfig

    _lm(tmp_path / "rnn")  # a config.json without "arch": an RNN's, as before the Transformer
    assert "arch" not in json.loads((tmp_path / "rnn" / "config.json").read_text())
    assert type(load_lm_checkpoint(tmp_path / "rnn")[0]).__name__ == "RNNLM"
    vocab = Vocab(list("the time machine"))
    torch.manual_seed(0)
    config = DecoderLMConfig(d_model=8, num_heads=2, num_kv_heads=1, num_layers=1,
                             ffn_hidden=16, positions="alibi")  # fmt: skip
    model = config.build(len(vocab))
    record = {"arch": "transformer", **model.config.to_dict(), "token": "char"}
    save_lm_checkpoint(tmp_path / "tf", model, vocab, record)
    loaded, _, saved = load_lm_checkpoint(tmp_path / "tf")
    assert isinstance(loaded, DecoderLM) and loaded.config == model.config
    ids = torch.tensor([[1, 2, 3, 4]])
    torch.testing.assert_close(loaded(ids), model.eval()(ids), rtol=0, atol=0)
    with pytest.raises(ValueError, match=r"config lacks the model keys \['vocab_size', 'd_model'"):
        save_lm_checkpoint(tmp_path / "x", model, vocab, {"arch": "transformer"})
    with pytest.raises(ValueError, match="arch must be one of 'rnn', 'transformer', got 'tcn'"):
        save_lm_checkpoint(tmp_path / "x", model, vocab, {"arch": "tcn"})
    (tmp_path / "tf" / "config.json").write_text(json.dumps({**saved, "arch": "cnn"}))
    with pytest.raises(ValueError, match="arch must be one of 'rnn', 'transformer', got 'cnn'"):
        load_lm_checkpoint(tmp_path / "tf")
