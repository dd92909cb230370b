"""`attnkit lm import --from hf`, `attnkit lm generate` on a GPT-2 folder or its imported
checkpoint (greedy equal to HF's generate, --int8), `attnkit lm export --to hf`, and the
errors each says."""

from __future__ import annotations

import json

import pytest
import torch
from tests.convert.gpt2_fixtures import hf_gpt2, hf_tokenizer, tiny_gpt2

import attnkit.cli
from attnkit.cli import main
from attnkit.inference import int8

PROMPT = "The animal didn't"


@pytest.fixture(autouse=True)
def _only_the_lm_verb(monkeypatch):
    monkeypatch.setattr(attnkit.cli, "VERBS", ["lm"])


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    out = tmp_path_factory.mktemp("imported") / "gpt2"
    assert main(["lm", "import", "--from", "hf", str(tiny_gpt2()), str(out)]) == 0
    return out


def _hf_greedy(prompt: str, n: int) -> str:
    tok, hf = hf_tokenizer(), hf_gpt2()
    ids = torch.tensor([tok(prompt)["input_ids"]])
    with torch.no_grad():
        out = hf.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                          max_new_tokens=n, min_new_tokens=n,
                          pad_token_id=hf.config.eos_token_id)  # fmt: skip
    return tok.decode(out[0])


def test_import_writes_an_lm_checkpoint(imported):
    config = json.loads((imported / "config.json").read_text())
    assert (config["task"], config["arch"], config["positions"], config["activation"]) == (
        "lm", "transformer", "learned", "gelu-tanh",
    )  # fmt: skip
    assert (
        config["tokenizer"] == "gpt2-bpe"
        and (imported / config["tokenizer_model"]["file"]).is_file()
    )
    assert config["imported_from"]["model_type"] == "gpt2"


@pytest.mark.parametrize("which", ["imported", "folder"])
def test_generate_is_hfs_greedy_text(which, imported, capsys):
    source = imported if which == "imported" else tiny_gpt2()
    assert main(["lm", "generate", "--checkpoint", str(source), "--prompt", PROMPT,
                 "--max-new-tokens", "10"]) == 0  # fmt: skip
    assert capsys.readouterr().out == _hf_greedy(PROMPT, 10) + "\n"  # streamed, then a newline


def test_batched_sampling_and_int8_run(imported, tmp_path, capsys):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("Hello world\nnaïve café 🙂\n", encoding="utf-8")
    args = ["lm", "generate", "--checkpoint", str(imported), "--input", str(prompts),
            "--max-new-tokens", "6", "--temperature", "0.8", "--seed", "1"]  # fmt: skip
    assert main(args) == 0
    first = capsys.readouterr().out  # a continuation may hold newlines: the text as a whole
    assert main(args) == 0 and capsys.readouterr().out == first  # seeded
    assert first.startswith("Hello world") and "\nnaïve café 🙂" in first
    if not int8.available():
        return
    assert main(["lm", "generate", "--checkpoint", str(imported), "--prompt", PROMPT,
                 "--max-new-tokens", "5", "--int8"]) == 0  # fmt: skip
    assert capsys.readouterr().out.startswith(PROMPT)


def test_export_writes_a_folder_transformers_loads(imported, tmp_path, capsys):
    from transformers import GPT2LMHeadModel

    out = tmp_path / "hf"
    assert main(["lm", "export", "--to", "hf", "--checkpoint", str(imported), str(out)]) == 0
    said = capsys.readouterr().out
    assert "config.json, merges.txt, model.safetensors, tokenizer.json, vocab.json" in said
    back = GPT2LMHeadModel.from_pretrained(out).eval()  # HF's default kernel (SDPA)
    ids = torch.tensor([[1, 2, 3, 40, 50]])
    with torch.no_grad():
        assert (back(ids).logits - hf_gpt2()(ids).logits).abs().max().item() < 1e-5


def test_errors_say_what_to_do(imported, tmp_path, capsys, monkeypatch):
    try:  # no network in the test: the hub client answers from its (empty) cache
        import huggingface_hub.constants as hub

        monkeypatch.setattr(hub, "HF_HUB_OFFLINE", True)
    except ImportError:
        pass
    assert main(["lm", "import", "--from", "hf", str(tiny_gpt2()), str(imported)]) == 1
    assert "already holds a checkpoint: pass --overwrite" in capsys.readouterr().err
    assert main(["lm", "import", "--from", "hf", "no-such-owner/no-such-model-x",
                 str(tmp_path / "x")]) == 1  # fmt: skip
    err = capsys.readouterr().err
    assert "https://huggingface.co/no-such-owner/no-such-model-x" in err
    assert "into a folder (e.g. ./no-such-model-x) and pass that folder instead" in err
    monkeypatch.chdir(tmp_path)  # a relative path that is no folder here: maybe a hub name
    assert main(["lm", "generate", "--checkpoint", "runs/lm", "--prompt", "x"]) == 1
    err = capsys.readouterr().err
    assert "'runs/lm' is not a folder: --checkpoint must be a folder written by `attnkit lm" in err
    assert "vocab.json, merges.txt, tokenizer.json from https://huggingface.co/runs/lm" in err
    bare = tmp_path / "bare"  # weights, no tokenizer: a model, but nothing to read text with
    bare.mkdir()
    for name in ("config.json", "model.safetensors"):
        (bare / name).write_bytes((tiny_gpt2() / name).read_bytes())
    assert main(["lm", "generate", "--checkpoint", str(bare), "--prompt", "x"]) == 1
    assert "holds no GPT-2 tokenizer: put its tokenizer.json" in capsys.readouterr().err
    config = json.loads((bare / "config.json").read_text())
    (bare / "config.json").write_text(
        json.dumps({**config, "scale_attn_by_inverse_layer_idx": True})
    )
    assert main(["lm", "import", "--from", "hf", str(bare), str(tmp_path / "y")]) == 1
    assert "scale_attn_by_inverse_layer_idx=True does not map" in capsys.readouterr().err
    rope = tmp_path / "rope"
    from attnkit.models.decoder_lm import DecoderLMConfig

    model = DecoderLMConfig(vocab_size=10, d_model=8, num_heads=2, positions="rope").build()
    from attnkit.data.text import Vocab
    from attnkit.training.lm import save_lm_checkpoint

    save_lm_checkpoint(rope, model, Vocab(list("abcdefghi")),
                       {"arch": "transformer", **model.config.to_dict(), "token": "char"})  # fmt: skip
    assert main(["lm", "export", "--to", "hf", "--checkpoint", str(rope), str(tmp_path / "z")]) == 1
    assert "positions='rope' does not map onto GPT-2" in capsys.readouterr().err


def test_heatmap_draws_the_attention_of_the_new_tokens(imported, tmp_path, capsys, drawn_heatmaps):
    png = tmp_path / "attention.png"
    args = ["lm", "generate", "--checkpoint", str(imported), "--prompt", PROMPT,
            "--max-new-tokens", "6", "--heatmap", str(png)]  # fmt: skip
    assert main(args) == 0
    assert capsys.readouterr().out == _hf_greedy(PROMPT, 6) + "\n" and png.stat().st_size > 0
    [(rows, kwargs)] = drawn_heatmaps
    P = len(hf_tokenizer()(PROMPT)["input_ids"])
    assert tuple(rows.shape) == (1, 2, 6, P + 5)  # (1, L, N, K), the heads' mean
    assert torch.allclose(rows.sum(-1), torch.ones(1, 2, 6), atol=1e-4)  # each row a distribution
    assert kwargs["xticklabels"][:2] == ["The", " animal"]
    many = [
        "lm",
        "generate",
        "--checkpoint",
        str(imported),
        "--input",
        "x.txt",
        "--heatmap",
        str(png),
    ]
    assert main(many) == 1
    assert "--heatmap draws one prompt's attention: give --prompt" in capsys.readouterr().err
    assert main([*args[:-1], str(tmp_path / "a.txt2")]) == 1
    assert "--heatmap" in capsys.readouterr().err and len(drawn_heatmaps) == 1


@pytest.fixture
def drawn_heatmaps(monkeypatch):
    import attnkit.viz

    calls = []
    draw = attnkit.viz.show_heatmaps

    def spy(matrices, *args, **kwargs):
        calls.append((torch.as_tensor(matrices), kwargs))
        return draw(matrices, *args, **kwargs)

    monkeypatch.setattr(attnkit.viz, "show_heatmaps", spy)
    return calls
