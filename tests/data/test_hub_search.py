"""``attnkit.data.hub.download(..., search=...)``: local folders before the cache, offline."""

from __future__ import annotations

import hashlib
import urllib.error
import urllib.request

import pytest

from attnkit.data import hub


@pytest.fixture
def toy(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise urllib.error.URLError("network disabled in tests")

    monkeypatch.setattr(urllib.request, "urlopen", refuse)
    sha1 = hashlib.sha1(b"right\n").hexdigest()
    monkeypatch.setitem(hub.DATA_HUB, "toy", (hub.DATA_URL + "toy.txt", sha1))
    for name, content in (("a", b"wrong\n"), ("b", b"right\n"), ("c", b"right\n")):
        (tmp_path / name).mkdir()
        (tmp_path / name / "toy.txt").write_bytes(content)
    return sha1


def test_search_folders_in_order_skipping_a_wrong_sha1(tmp_path, toy):
    got = hub.download("toy", tmp_path / "cache", search=(tmp_path / "a", tmp_path / "c"))
    assert got == tmp_path / "c" / "toy.txt"
    got = hub.download("toy", tmp_path / "cache", search=[tmp_path / "b", tmp_path / "c"])
    assert got == tmp_path / "b" / "toy.txt"
    assert not (tmp_path / "cache").exists()  # found in a search folder: cache untouched


def test_the_cache_comes_after_the_search_folders(tmp_path, toy):
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "toy.txt").write_bytes(b"right\n")
    got = hub.download("toy", tmp_path / "cache", search=(tmp_path / "missing", tmp_path / "a"))
    assert got == tmp_path / "cache" / "toy.txt"


def test_offline_error_lists_every_place(tmp_path, toy):
    wrong = hashlib.sha1(b"wrong\n").hexdigest()
    with pytest.raises(hub.DatasetUnavailableError) as info:
        hub.download("toy", tmp_path / "cache", search=(tmp_path / "missing", tmp_path / "a"))
    assert (
        f"Looked for toy.txt (sha1 {toy}) in: {tmp_path / 'missing'}: no toy.txt; "
        f"{tmp_path / 'a'}: toy.txt has sha1 {wrong}, expected {toy} (not used); "
        f"{tmp_path / 'cache'}: no toy.txt. Pass a local copy instead (--data FILE), "
        f"or place it at {tmp_path / 'cache' / 'toy.txt'}."
    ) in str(info.value)


def test_offline_error_in_chinese(tmp_path, toy):
    from attnkit import use_language

    with use_language("zh"), pytest.raises(hub.DatasetUnavailableError) as info:
        hub.download("toy", tmp_path / "cache", search=(tmp_path / "missing",))
    assert str(info.value) == (
        "无法下载'toy'（来自" + hub.DATA_URL + "toy.txt）（<urlopen error network disabled "
        f"in tests>）。是否处于离线状态？在这些位置查找过toy.txt（sha1 {toy}）："
        f"{tmp_path / 'missing'}：没有toy.txt；{tmp_path / 'cache'}：没有toy.txt。"
        f"请改为传入本地副本（--data FILE），或把它放在{tmp_path / 'cache' / 'toy.txt'}。"
    )
