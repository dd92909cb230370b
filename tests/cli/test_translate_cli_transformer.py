"""``attnkit translate train | run`` with ``--arch transformer`` on a tiny generated corpus."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from attnkit.cli import main

SENTENCE = "they are sad ."  # in the vocabulary of the 600 generated pairs
TRAIN = [
    "--arch", "transformer", "--preset", "book", "--num-pairs", "600", "--epochs", "1",
    "--no-progress", "--bleu-sentences", "10", "--threads", "1",
]  # fmt: skip
KINDS = ["encoder self-attention", "decoder self-attention", "encoder-decoder attention"]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """One Transformer (book preset) trained for an epoch, shared by the tests."""
    threads = torch.get_num_threads()
    out = tmp_path_factory.mktemp("cli-tf") / "transformer"
    try:
        assert main(["translate", "train", *TRAIN, "--out", str(out)]) == 0
    finally:
        torch.set_num_threads(threads)
    return out


def _run(checkpoint, *argv) -> list[str]:
    return ["translate", "run", "--checkpoint", str(checkpoint), *argv]


def test_train_writes_a_transformer_checkpoint(checkpoint):
    config = json.loads((checkpoint / "config.json").read_text())
    assert config["arch"] == "transformer" and config["epoch"] == 1
    assert config["model_config"]["d_model"] == 32 and config["model_config"]["num_layers"] == 2
    assert config["data_args"]["num_pairs"] == 600
    assert config["train_config"]["bleu_sentences"] == 10


@pytest.mark.parametrize("beam", [[], ["--beam", "3"]], ids=["greedy", "beam"])
def test_heatmap_draws_encoder_decoder_and_cross_attention(
    checkpoint, tmp_path, capsys, drawn, beam
):
    png = tmp_path / "x.png"
    assert main(_run(checkpoint, SENTENCE, "--heatmap", str(png), *beam)) == 0
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == 1 and f"heatmap: {png}" in out.err
    assert png.stat().st_size > 1000
    ((maps, panels),) = drawn
    assert [p.split("\n")[0] for p in panels] == KINDS
    assert maps.source == ["they", "are", "sad", ".", "<eos>"]
    assert maps.encoder_self.shape[:2] == maps.decoder_self.shape[:2] == (2, 4)
    assert maps.translation == out.out.strip()  # the map is of the printed translation


def test_heatmap_all_heads_draws_every_layer_and_head(checkpoint, tmp_path, capsys, drawn):
    png = tmp_path / "grid.png"
    assert main(_run(checkpoint, SENTENCE, "--heatmap", str(png), "--all-heads")) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1
    assert png.is_file() and len(drawn) == 1
    panels = drawn[0][1]
    assert len(panels) == 3 * 2 * 4  # kinds x layers x heads
    assert panels[0] == "encoder self-attention\nlayer 1 head 1"
    assert panels[-1] == "encoder-decoder attention\nlayer 2 head 4"


def test_beam_heatmaps_of_several_sentences(checkpoint, tmp_path, capsys, drawn):
    pdf = tmp_path / "b.pdf"
    assert main(_run(checkpoint, SENTENCE, "i am sad .", "--beam", "2", "--heatmap", str(pdf))) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert (tmp_path / "b-0.pdf").is_file() and (tmp_path / "b-1.pdf").is_file()
    assert [maps.source[:2] for maps, _ in drawn] == [["they", "are"], ["i", "am"]]


def test_unknown_words_are_an_error_unless_allowed(checkpoint, tmp_path, capsys, drawn):
    assert main(_run(checkpoint, "they are zyzzyva .")) == 1
    err = capsys.readouterr().err
    assert err.startswith("attnkit translate: error: unknown words")
    assert "zyzzyva" in err and "--allow-unknown" in err
    png = tmp_path / "u.png"
    argv = _run(checkpoint, "they are zyzzyva .", "--allow-unknown", "--heatmap", str(png))
    assert main(argv) == 0
    out = capsys.readouterr()
    assert len(out.out.splitlines()) == 1 and "zyzzyva" in out.err
    assert drawn[0][0].source == ["they", "are", "<unk>", ".", "<eos>"]
    assert png.is_file()


def test_max_len_is_checked_against_the_model_config(checkpoint, capsys):
    assert main(_run(checkpoint, SENTENCE, "--max-len", "1000")) == 1
    err = capsys.readouterr().err
    assert "max_len=1000" in err and "at most 999" in err
    assert "PositionalEncoding" not in err
    assert main(_run(checkpoint, SENTENCE, "--max-len", "3", "--beam", "2")) == 0
    assert len(capsys.readouterr().out.split()) <= 3


def test_inputs_follow_the_model_device(checkpoint, monkeypatch, capsys):
    """src/src_len go to the model's device for beam search and greedy decoding."""
    import attnkit.inference.beam_search as beam_search
    import attnkit.inference.decoding as decoding
    import attnkit.inference.loading as ck
    from attnkit.inference.beam_search import BeamHypothesis

    load = ck.load_model
    seen = []

    def load_on_meta(directory, device="cpu", **options):
        model, cfg = load(directory, device, **options)
        return model.to("meta"), cfg  # a device the CPU inputs are not on

    def fake_greedy(model, src, src_len, **kwargs):
        seen.append((src.device.type, src_len.device.type))
        return decoding.DecodeResult([[4]], [True])

    def fake_search(self, model, src, src_len):
        seen.append((src.device.type, src_len.device.type))
        return [[BeamHypothesis([4], 0.0, 0.0, True)]]

    monkeypatch.setattr(ck, "load_model", load_on_meta)
    monkeypatch.setattr(decoding, "greedy_decode", fake_greedy)
    monkeypatch.setattr(beam_search.BeamSearch, "__call__", fake_search)
    assert main(_run(checkpoint, SENTENCE)) == 0
    assert main(_run(checkpoint, SENTENCE, "--beam", "2")) == 0
    assert seen == [("meta", "meta"), ("meta", "meta")]


def test_resume_continues_to_epoch_2(checkpoint, tmp_path, capsys):
    out = tmp_path / "resumed"
    shutil.copytree(checkpoint, out)  # the shared checkpoint stays at epoch 1
    argv = ["translate", "train", "--out", str(out), "--resume", "--epochs", "2"]
    assert main([*argv, "--no-progress", "--threads", "1"]) == 0
    assert "resumed" in capsys.readouterr().out
    config = json.loads((out / "config.json").read_text())
    assert config["arch"] == "transformer" and config["epoch"] == 2
    assert len(config["history"]["val_loss"]) == 2
