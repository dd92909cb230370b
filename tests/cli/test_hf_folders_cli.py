"""A Hugging Face folder gone wrong in the usual ways is one line on stderr naming the file
and what to do (exit 1; the traceback with --debug): an interrupted download, a clone
without `git lfs pull`, a config.json that does not match its weights or lacks its
model_type, missing tokenizer files; legacy hub names (gpt2 ...) resolve as the hub maps
them, and offline say which files to download where; harmless config flags are accepted."""

from __future__ import annotations

import json
import shutil
import sys

import pytest
import torch
from tests.convert.gpt2_fixtures import hf_gpt2, tiny_gpt2
from tests.convert.marian_fixtures import marian_folder

from attnkit.cli import main
from attnkit.convert.hf_files import LEGACY_HUB_NAMES, HFSourceError, resolve_source
from attnkit.i18n import use_language

LFS = "version https://git-lfs.github.com/spec/v1\noid sha256:{}\nsize 59208\n".format("0" * 64)


def _copy(source, tmp_path, name="model"):
    folder = tmp_path / name
    shutil.copytree(source, folder)
    return folder


def _edit_config(folder, **changes):
    config = json.loads((folder / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            config.pop(key, None)
        else:
            config[key] = value
    (folder / "config.json").write_text(json.dumps(config))


def _truncate(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _to_bin(folder):
    from safetensors.torch import load_file

    torch.save(load_file(str(folder / "model.safetensors")), folder / "pytorch_model.bin")
    (folder / "model.safetensors").unlink()
    return folder / "pytorch_model.bin"


def _one_line_error(argv, capsys, command, prefix="attnkit {command}: error: "):
    capsys.readouterr()  # what building the fixtures printed
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert out == "" and err.count("\n") == 1, err
    assert err.startswith(prefix.format(command=command)), err
    return err


def _translate(folder):
    return ["translate", "run", "--checkpoint", str(folder), "The street was wide."]


def _generate(folder):
    return ["lm", "generate", "--checkpoint", str(folder), "--prompt", "Hello"]


def _break(case, folder):
    """Break ``folder`` as ``case`` says; return the file the message must name."""
    weights = folder / "model.safetensors"
    if case == "truncated safetensors":
        _truncate(weights)
    elif case == "truncated bin":
        weights = _to_bin(folder)
        _truncate(weights)
    elif case == "lfs safetensors":
        weights.write_text(LFS)
    elif case == "lfs bin":
        weights = _to_bin(folder)
        weights.write_text(LFS)
    elif case == "garbage safetensors":
        weights.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{not a json header")
    return weights


SAYS = {
    "truncated safetensors": "is truncated: it has 29604 bytes, its header says 59208 (an "
    "interrupted download?); download model.safetensors again",
    "truncated bin": "cannot be read (",
    "lfs safetensors": "is a Git LFS pointer, not the file itself (the repository was cloned "
    "without Git LFS): run `git lfs pull` in ",
    "lfs bin": "is a Git LFS pointer, not the file itself",
    "garbage safetensors": "the file is truncated or damaged (an interrupted download?); "
    "download model.safetensors again",
}


@pytest.mark.parametrize("case", list(SAYS))
def test_broken_marian_weights_are_one_line_naming_the_file(case, tmp_path, capsys):
    folder = _copy(marian_folder(), tmp_path)
    named = _break(case, folder)
    err = _one_line_error(_translate(folder), capsys, "translate")
    assert f"error: {named} " in err and SAYS[case] in err, err
    if case.endswith("bin"):
        assert named.name in err.rsplit("download ", 1)[-1] or "git lfs pull" in err
    with pytest.raises(HFSourceError):  # --debug: the traceback
        main([*_translate(folder), "--debug"])
    # the import says the same
    err = _one_line_error(["translate", "import", "--from", "hf", str(folder),
                           str(tmp_path / "out")], capsys, "translate")  # fmt: skip
    assert f"error: {named} " in err and SAYS[case] in err


@pytest.mark.parametrize("case", ["truncated safetensors", "lfs safetensors", "lfs bin"])
def test_broken_gpt2_weights_are_one_line_naming_the_file(case, tmp_path, capsys):
    folder = _copy(tiny_gpt2(), tmp_path)
    named = _break(case, folder)
    err = _one_line_error(_generate(folder), capsys, "lm")
    assert f"error: {named} " in err, err
    assert ("git lfs pull" in err) == case.startswith("lfs")
    err = _one_line_error(["lm", "import", "--from", "hf", str(folder), str(tmp_path / "o")],
                          capsys, "lm")  # fmt: skip
    assert f"error: {named} " in err


def test_a_config_that_does_not_match_its_weights_names_the_files_tensors(tmp_path, capsys):
    folder = _copy(marian_folder(), tmp_path)
    _edit_config(folder, encoder_ffn_dim=64, decoder_ffn_dim=64)
    err = _one_line_error(_translate(folder), capsys, "translate")
    assert err == (
        f"attnkit translate: error: {folder / 'model.safetensors'}: model.encoder.layers.0."
        "fc1.weight has shape (32, 16), but config.json's sizes make it (64, 16) (and 11 more "
        "tensors): the config does not match the weights; use the config.json that came with "
        "them\n"
    )
    assert "encoder.blks" not in err  # not attnkit's own parameter names
    gpt2 = _copy(tiny_gpt2(), tmp_path, "gpt2")
    _edit_config(gpt2, n_embd=64)
    err = _one_line_error(_generate(gpt2), capsys, "lm")
    assert f"the weights in {gpt2 / 'model.safetensors'}: wte.weight has shape (360, 32), " in err
    assert "expected (360, 64) for config.json's sizes (and 27 more tensors)" in err


def test_model_type_missing_or_unknown(tmp_path, capsys):
    folder = _copy(marian_folder(), tmp_path)
    config = folder / "config.json"
    _edit_config(folder, model_type=None)
    err = _one_line_error(_translate(folder), capsys, "translate")
    assert err.endswith(
        f'error: {config} has no "model_type": its architectures (MarianMTModel) make it '
        '"marian"; add "model_type": "marian" to it\n'
    )
    _edit_config(folder, architectures=None)
    err = _one_line_error(_translate(folder), capsys, "translate")
    assert f'{config} has no "model_type": add the model\'s type to it (attnkit reads' in err
    _edit_config(folder, model_type="bert")
    err = _one_line_error(_translate(folder), capsys, "translate")
    assert err.endswith(
        f"error: {config}: model_type 'bert' is not read here: attnkit reads MarianMT "
        "translators (model_type 'marian')\n"
    )
    err = _one_line_error(_generate(folder), capsys, "lm")
    assert "model_type 'bert' is not read here: attnkit reads GPT-2 language models" in err
    gpt2 = _copy(tiny_gpt2(), tmp_path, "gpt2")
    _edit_config(gpt2, model_type=None)
    err = _one_line_error(["lm", "import", "--from", "hf", str(gpt2), str(tmp_path / "o")],
                          capsys, "lm")  # fmt: skip
    assert 'its architectures (GPT2LMHeadModel) make it "gpt2"' in err


def test_missing_config_and_tokenizer_files(tmp_path, capsys):
    folder = _copy(marian_folder(), tmp_path)
    (folder / "config.json").unlink()
    err = _one_line_error(_translate(folder), capsys, "translate")
    assert f"{folder / 'config.json'} is missing: the weights need the config.json" in err
    folder = _copy(marian_folder(), tmp_path, "nospm")
    (folder / "target.spm").unlink()
    err = _one_line_error(_translate(folder), capsys, "translate")
    assert f"{folder} is not a complete Marian tokenizer: it lacks target.spm" in err
    assert "download them from the model's page" in err
    (folder / "target.spm").write_text(LFS)
    err = _one_line_error(_translate(folder), capsys, "translate")
    assert f"{folder / 'target.spm'} is a Git LFS pointer" in err
    gpt2 = _copy(tiny_gpt2(), tmp_path, "gpt2")
    (gpt2 / "merges.txt").unlink()
    err = _one_line_error(_generate(gpt2), capsys, "lm")
    assert "holds no GPT-2 tokenizer: put its tokenizer.json, or vocab.json and merges.txt" in err


def test_chinese_error_keeps_the_file_and_the_command(tmp_path, capsys, monkeypatch):
    folder = _copy(marian_folder(), tmp_path)
    (folder / "model.safetensors").write_text(LFS)
    monkeypatch.setenv("ATTNKIT_LANG", "zh")
    with use_language("zh"):
        err = _one_line_error(_translate(folder), capsys, "translate", "attnkit {command}：错误：")
    assert err.endswith(
        f"{folder / 'model.safetensors'}是Git LFS指针，而不是文件本身（克隆仓库时没有使用Git LFS）："
        f"请在{folder}中运行`git lfs pull`，或者重新下载model.safetensors\n"
    )


class _Hub:
    """huggingface_hub's snapshot_download, recording what is asked; offline for every
    name but ``serves`` (whose files it copies from ``source``)."""

    def __init__(self, source=None, serves=()):
        self.asked, self.source, self.serves = [], source, serves

    def snapshot_download(self, repo, revision=None, allow_patterns=()):
        self.asked.append((repo, tuple(allow_patterns)))
        if repo not in self.serves:
            raise ConnectionError("Failed to resolve 'huggingface.co'")
        return str(self.source)


def test_legacy_hub_names_resolve_as_the_hub_maps_them(tmp_path, monkeypatch, capsys):
    assert LEGACY_HUB_NAMES["gpt2"] == "openai-community/gpt2"
    assert LEGACY_HUB_NAMES["distilgpt2"] == "distilbert/distilgpt2"
    hub = _Hub(tiny_gpt2(), serves=("openai-community/gpt2",))
    monkeypatch.setitem(sys.modules, "huggingface_hub", hub)
    monkeypatch.chdir(tmp_path)  # no folder named gpt2 here
    assert resolve_source("gpt2") == tiny_gpt2()
    repo, patterns = hub.asked[0]
    assert repo == "openai-community/gpt2" and "*.safetensors" in patterns
    assert "*.bin" not in patterns and "generation_config.json" in patterns  # one weights set
    assert main([*_generate("gpt2"), "--max-new-tokens", "3"]) == 0
    assert capsys.readouterr().out.startswith("Hello")
    # offline: which files, from where, into which folder; the old cache name tried too
    offline = _Hub()
    monkeypatch.setitem(sys.modules, "huggingface_hub", offline)
    err = _one_line_error(_generate("gpt2-medium"), capsys, "lm")
    assert [r for r, _p in offline.asked] == ["openai-community/gpt2-medium", "gpt2-medium"]
    assert (
        "download config.json, model.safetensors (or pytorch_model.bin), vocab.json, "
        "merges.txt, tokenizer.json from https://huggingface.co/openai-community/gpt2-medium "
        "into a folder (e.g. ./gpt2-medium) and pass that folder instead" in err
    )
    (tmp_path / "gpt2").mkdir()  # a folder of that name here is the folder, not the hub
    err = _one_line_error(_generate("gpt2"), capsys, "lm")
    assert "'gpt2/config.json' not found" in err


def test_a_model_without_safetensors_fetches_the_bin_weights(tmp_path, monkeypatch):
    folder = _copy(tiny_gpt2(), tmp_path)
    _to_bin(folder)

    class Hub(_Hub):
        def snapshot_download(self, repo, revision=None, allow_patterns=()):
            super().snapshot_download(repo, revision, allow_patterns)
            return str(folder if "*.bin" in allow_patterns else tmp_path / "empty")

    (tmp_path / "empty").mkdir()
    hub = Hub(serves=("distilbert/distilgpt2",))
    monkeypatch.setitem(sys.modules, "huggingface_hub", hub)
    assert resolve_source("distilgpt2") == folder
    assert ["*.bin" in p for _r, p in hub.asked] == [False, True]


# keys the real config.json files carry (Helsinki-NLP/opus-mt-en-fr, openai-community/gpt2,
# distilgpt2) that change nothing at inference
OPUS_KEYS = {"_name_or_path": "/tmp/Helsinki-NLP/opus-mt-en-fr", "_num_labels": 3,
             "add_bias_logits": False, "add_final_layer_norm": False,
             "architectures": ["MarianMTModel"], "bos_token_id": 0, "classif_dropout": 0.0,
             "classifier_dropout": 0.0, "decoder_layerdrop": 0.0, "encoder_layerdrop": 0.0,
             "extra_pos_embeddings": 82, "gradient_checkpointing": False,
             "id2label": {"0": "LABEL_0", "1": "LABEL_1", "2": "LABEL_2"}, "init_std": 0.02,
             "is_encoder_decoder": True, "label2id": {"LABEL_0": 0, "LABEL_1": 1, "LABEL_2": 2},
             "max_length": 512, "normalize_before": False, "normalize_embedding": False,
             "num_beams": 4, "num_hidden_layers": 2, "output_past": True,
             "static_position_embeddings": True, "torch_dtype": "float32",
             "transformers_version": "4.22.0.dev0", "use_cache": True}  # fmt: skip
GPT2_KEYS = {"architectures": ["GPT2LMHeadModel"], "n_ctx": 48, "initializer_range": 0.02,
             "summary_activation": None, "summary_first_dropout": 0.1,
             "summary_proj_to_labels": True, "summary_type": "cls_index", "summary_use_proj": True,
             "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
             "_num_labels": 1, "id2label": {"0": "LABEL_0"}, "label2id": {"LABEL_0": 0},
             "gradient_checkpointing": False, "use_cache": False, "torch_dtype": "float32",
             "transformers_version": "4.26.0.dev0", "_name_or_path": "gpt2",
             "reorder_and_upcast_attn": True, "output_past": True}  # fmt: skip


def test_harmless_config_flags_are_accepted(tmp_path, capsys):
    folder = _copy(marian_folder(), tmp_path)
    _edit_config(folder, **OPUS_KEYS)
    assert main(_translate(folder)) == 0
    gpt2 = _copy(tiny_gpt2(), tmp_path, "gpt2")
    _edit_config(gpt2, **GPT2_KEYS)
    assert main([*_generate(gpt2), "--max-new-tokens", "4"]) == 0
    capsys.readouterr()
    # reorder_and_upcast_attn: float32 scores either way; the same logits as transformers'
    from transformers import GPT2LMHeadModel

    from attnkit.convert.gpt2 import gpt2_model

    hf = GPT2LMHeadModel.from_pretrained(gpt2, attn_implementation="eager").eval()
    assert hf.config.reorder_and_upcast_attn
    ids = torch.tensor([[5, 17, 40, 3, 99, 7]])
    with torch.no_grad():
        got, want = gpt2_model(gpt2)(ids), hf(ids).logits
    assert (got - want).abs().max().item() < 1e-5
    assert (want - hf_gpt2()(ids).logits).abs().max().item() < 1e-5
