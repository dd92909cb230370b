"""`attnkit lm generate` stops where transformers' generate stops, on a tiny random GPT-2
built by transformers: at the model's end-of-text id (unless --ignore-eos), and at a full
context (learned positions have none past it), said on stderr."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from tests.convert.gpt2_fixtures import SIZES, hf_tokenizer, tiny_gpt2

import attnkit.cli
from attnkit.cli import main
from attnkit.convert.gpt2 import gpt2_model
from attnkit.inference.generation import ContextFullWarning, generate, generate_ids

PROMPTS = ["The animal didn't", "Hello world", "naïve café"]
EOS = 282  # a token greedy decoding reaches after a few steps from PROMPTS[0] and [2]


@pytest.fixture(autouse=True)
def _only_the_lm_verb(monkeypatch):
    monkeypatch.setattr(attnkit.cli, "VERBS", ["lm"])


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    """The tiny GPT-2 with wide weights (varied greedy continuations) and, in ``eos``, the
    same model whose config.json and generation_config.json name token EOS as its end."""
    from transformers import GPT2LMHeadModel

    root = tmp_path_factory.mktemp("gpt2")
    folder = root / "wide"
    shutil.copytree(tiny_gpt2(), folder)
    model = GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager")
    torch.manual_seed(1)
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() == 2:
                p.normal_(0.0, 0.3)
    model.save_pretrained(folder)
    eos = root / "eos"
    shutil.copytree(folder, eos)
    for name in ("config.json", "generation_config.json"):
        settings = json.loads((eos / name).read_text())
        (eos / name).write_text(json.dumps({**settings, "eos_token_id": EOS}))
    return folder, eos


def _hf(folder, prompt: str, n: int, **options) -> list[int]:
    """transformers' greedy generate: the new ids."""
    from transformers import GPT2LMHeadModel

    hf = GPT2LMHeadModel.from_pretrained(folder, attn_implementation="eager").eval()
    ids = torch.tensor([hf_tokenizer()(prompt)["input_ids"]])
    with torch.no_grad():
        out = hf.generate(ids, attention_mask=torch.ones_like(ids), do_sample=False,
                          max_new_tokens=n, pad_token_id=0, **options)  # fmt: skip
    return out[0, ids.shape[1] :].tolist()


def _text(prompt: str, new: list[int]) -> str:
    tok = hf_tokenizer()
    return tok.decode(tok(prompt)["input_ids"] + new)


def _generate(capsys, folder, *flags) -> tuple[str, str]:
    capsys.readouterr()
    assert main(["lm", "generate", "--checkpoint", str(folder), *flags]) == 0
    return capsys.readouterr()


def test_generation_stops_at_the_models_end_of_text_id_as_hf(wide, capsys, tmp_path):
    _folder, eos = wide
    expected = [_hf(eos, p, 12) for p in PROMPTS]
    assert [len(e) for e in expected] == [4, 12, 4] and expected[0][-1] == EOS
    model = gpt2_model(eos)
    tok = hf_tokenizer()
    rows = [tok(p)["input_ids"] for p in PROMPTS]
    assert generate_ids(model, rows, max_new_tokens=12, eos_id=EOS) == expected  # a batch
    for prompt, new in zip(PROMPTS, expected, strict=True):
        out, err = _generate(capsys, eos, "--prompt", prompt, "--max-new-tokens", "12")
        shown = new[:-1] if new[-1] == EOS else new  # the text ends before the end token
        assert out == _text(prompt, shown) + "\n" and err == ""
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    out, _err = _generate(capsys, eos, "--input", str(prompts), "--max-new-tokens", "12")
    texts = [
        _text(p, n[:-1] if n[-1] == EOS else n) for p, n in zip(PROMPTS, expected, strict=True)
    ]
    assert out == "\n".join(texts) + "\n"  # one line each (a random token may be a newline)
    # --ignore-eos: on past it; the same weights whose end is <|endoftext|> go there too
    out, _err = _generate(capsys, eos, "--prompt", PROMPTS[0], "--max-new-tokens", "12",
                          "--ignore-eos")  # fmt: skip
    past = _hf(wide[0], PROMPTS[0], 12, min_new_tokens=12)
    assert past[:4] == expected[0] and out == _text(PROMPTS[0], past) + "\n"


def test_the_imported_checkpoint_records_the_end_of_text_id(wide, tmp_path, capsys):
    _folder, eos = wide
    out = tmp_path / "ck"
    assert main(["lm", "import", "--from", "hf", str(eos), str(out)]) == 0
    assert json.loads((out / "config.json").read_text())["eos_token_id"] == EOS
    streamed, _err = _generate(capsys, out, "--prompt", PROMPTS[0], "--max-new-tokens", "12")
    assert streamed == _text(PROMPTS[0], _hf(eos, PROMPTS[0], 12)[:-1]) + "\n"
    # a checkpoint imported before the record: the tokenizer's <|endoftext|>
    from attnkit.inference.loading import lm_eos_id, load_lm_checkpoint, load_lm_tokenizer

    _model, _vocab, config = load_lm_checkpoint(out)
    del config["eos_token_id"]
    tokenizer = load_lm_tokenizer(out, config)
    assert lm_eos_id(config, tokenizer) == tokenizer.eos_id == hf_tokenizer().eos_token_id
    assert lm_eos_id({"tokenizer": "book", "token": "char"}) is None


def test_a_full_context_stops_generation_with_a_message(wide, capsys):
    folder, _eos = wide
    ctx = SIZES["n_positions"]  # 48
    prompt = PROMPTS[1]  # 5 tokens: 43 new ones fill the context
    expected = _hf(folder, prompt, ctx - 5)
    assert len(expected) == ctx - 5
    out, err = _generate(capsys, folder, "--prompt", prompt, "--max-new-tokens", "60")
    assert out == _text(prompt, expected) + "\n"
    assert err == (
        "attnkit lm generate: warning: generation stopped at the model's context_length 48 "
        "(positions='learned' has no position past it): 43 new tokens after a prompt of 5 "
        "tokens, not 60\n"
    )
    out, err = _generate(capsys, folder, "--prompt", prompt, "--max-new-tokens", "43")
    assert out == _text(prompt, expected) + "\n" and err == ""  # it fits: nothing to say


def test_the_library_keeps_its_window_unless_asked_to_stop(wide):
    folder, _eos = wide
    model = gpt2_model(folder)
    rows = [hf_tokenizer()(p)["input_ids"] for p in PROMPTS]  # 4, 5 and 5 tokens
    slid = generate_ids(model, rows, max_new_tokens=50)  # nanoGPT's window past the context
    assert [len(r) for r in slid] == [50, 50, 50]
    with pytest.warns(ContextFullWarning, match="44 new tokens after a prompt of 4 tokens"):
        stopped = generate_ids(model, rows, max_new_tokens=50, stop_at_context=True)
    assert [len(r) for r in stopped] == [44, 43, 43]
    assert [s[: len(t)] for s, t in zip(slid, stopped, strict=True)] == stopped
    with pytest.warns(ContextFullWarning):  # rows 2 and 3 stop before 44
        alone = [generate_ids(model, [r], max_new_tokens=44, stop_at_context=True)[0] for r in rows]
    assert stopped == alone
    text = generate(model, PROMPTS[0], tokenizer=_Codec(), max_new_tokens=12, eos_id=[EOS, 3])
    assert isinstance(text, str)
    with pytest.raises(ValueError, match="eos_id must be a non-negative int"):
        generate_ids(model, rows, max_new_tokens=2, eos_id=-1)


class _Codec:
    def encode(self, text):
        return hf_tokenizer()(text)["input_ids"]

    def decode(self, ids):
        return hf_tokenizer().decode(ids)
