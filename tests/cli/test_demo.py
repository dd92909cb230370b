"""``attnkit demo`` end to end on a tiny corpus."""

from __future__ import annotations

import re

from attnkit.cli import main


def test_demo_end_to_end_tiny(tmp_path, capsys):
    args = ["demo", "--out", str(tmp_path), "--epochs", "1", "--num-pairs", "1500", "--no-progress"]
    assert main(args) == 0
    out = capsys.readouterr().out
    bleu = float(re.search(r"test BLEU ([\d.]+)", out).group(1))
    assert 0.0 <= bleu <= 100.0
    ck = tmp_path / "transformer"
    for name in ("config.json", "curves.png", "attention_1.png", "attention_all_heads.png"):
        assert (ck / name).stat().st_size > 0, name
    assert "attnkit translate run --checkpoint" in out
    assert f"attnkit serve --checkpoint {ck}" in out
    # a second run finds the finished checkpoint and does not train again
    assert main(args) == 0
    assert "already trained" in capsys.readouterr().out
