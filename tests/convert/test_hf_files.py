"""Reading Hugging Face folders without transformers: config, weights, sources."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch

from attnkit.convert import hf_files
from attnkit.convert.hf_files import (
    HFSourceError,
    hf_model_type,
    is_hf_folder,
    read_config,
    read_weights,
    resolve_source,
)


def _folder(tmp_path, config=None, weights=None, name="model.safetensors"):
    from safetensors.torch import save_file

    tmp_path.mkdir(exist_ok=True)
    (tmp_path / "config.json").write_text(json.dumps(config or {"model_type": "marian"}))
    weights = weights or {"a.weight": torch.arange(6.0).reshape(2, 3), "b": torch.ones(2)}
    if name.endswith(".safetensors"):
        save_file(weights, str(tmp_path / name))
    else:
        torch.save(weights, tmp_path / name)
    return tmp_path


def test_weights_from_safetensors_bin_and_shards(tmp_path):
    st = _folder(tmp_path / "st")
    assert torch.equal(read_weights(st)["a.weight"], torch.arange(6.0).reshape(2, 3))
    pt = _folder(tmp_path / "pt", name="pytorch_model.bin")
    assert set(read_weights(pt)) == {"a.weight", "b"}
    sharded = tmp_path / "sharded"
    _folder(sharded, weights={"a.weight": torch.zeros(2)}, name="model-00001.safetensors")
    _folder(sharded, weights={"b": torch.ones(3)}, name="model-00002.safetensors")
    index = {"weight_map": {"a.weight": "model-00001.safetensors", "b": "model-00002.safetensors"}}
    (sharded / "model.safetensors.index.json").write_text(json.dumps(index))
    state = read_weights(sharded)
    assert torch.equal(state["b"], torch.ones(3)) and torch.equal(state["a.weight"], torch.zeros(2))
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        HFSourceError, match=r"holds no weights: expected one of model\.safetensors"
    ):
        read_weights(tmp_path / "empty")


def test_config_and_folder_kind(tmp_path):
    folder = _folder(tmp_path / "m", {"model_type": "gpt2", "n_layer": 2})
    assert read_config(folder)["n_layer"] == 2 and hf_model_type(folder) == "gpt2"
    assert is_hf_folder(folder)
    checkpoint = tmp_path / "attnkit"
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text(json.dumps({"format": "attnkit-checkpoint"}))
    assert not is_hf_folder(checkpoint) and not is_hf_folder(tmp_path / "nowhere")
    (folder / "config.json").write_text("{not json")
    with pytest.raises(HFSourceError, match="is not valid JSON"):
        read_config(folder)
    (folder / "config.json").write_text("[1, 2]")
    with pytest.raises(HFSourceError, match="holds list, not a JSON object"):
        read_config(folder)
    with pytest.raises(HFSourceError, match="not found: not a Hugging Face model folder"):
        read_config(tmp_path / "nowhere")


def test_a_folder_resolves_to_itself_and_a_file_is_refused(tmp_path):
    assert resolve_source(tmp_path) == tmp_path
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(HFSourceError, match="is not a folder"):
        resolve_source(tmp_path / "file.txt")
    with pytest.raises(HFSourceError, match="is not a folder"):
        resolve_source("./not/here")


def test_hub_names_offline_and_without_huggingface_hub(monkeypatch):
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)  # not installed
    with pytest.raises(HFSourceError, match=r"needs huggingface_hub.*huggingface\.co/a/b"):
        resolve_source("a/b", files=("*.spm",))

    class FakeHub:
        @staticmethod
        def snapshot_download(repo, revision=None, allow_patterns=()):
            assert repo == "Helsinki-NLP/opus-mt-en-fr" and revision == "v1"
            assert "*.spm" in allow_patterns and "config.json" in allow_patterns
            raise ConnectionError("Failed to resolve 'huggingface.co'\nmore")

    monkeypatch.setitem(sys.modules, "huggingface_hub", FakeHub)
    with pytest.raises(HFSourceError) as info:
        resolve_source("Helsinki-NLP/opus-mt-en-fr@v1", files=("*.spm", "vocab.json"))
    message = str(info.value)
    assert "ConnectionError: Failed to resolve 'huggingface.co'); offline" in message
    assert "source.spm" not in message and "*.spm, vocab.json" in message
    assert "https://huggingface.co/Helsinki-NLP/opus-mt-en-fr into a folder" in message


def test_heavy_packages_are_imported_inside_functions_only():
    """``import attnkit`` stays light: the convert modules, the Marian tokenizer and the
    loaders import transformers, safetensors, tokenizers, huggingface_hub and
    sentencepiece only inside functions (module level: none of them)."""
    import ast
    import importlib

    heavy = {"transformers", "safetensors", "tokenizers", "huggingface_hub", "sentencepiece"}
    names = ["attnkit.convert.hf_files", "attnkit.convert.marian",
             "attnkit.convert.marian_export", "attnkit.data.marian_tokenizer"]  # fmt: skip
    for name in names:
        source = Path(importlib.import_module(name).__file__).read_text(encoding="utf-8")
        tree = ast.parse(source)
        top = set()
        for node in tree.body:  # module-level statements only
            if isinstance(node, ast.Import):
                top |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                top.add(node.module.split(".")[0])
        assert not top & heavy, (name, top & heavy)
    assert hf_files.WEIGHT_FILES[0] == "model.safetensors"
