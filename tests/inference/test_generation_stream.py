"""Streaming a byte-level tokenizer's text (GPT-2's): a token that ends inside a UTF-8
character waits for the tokens that complete it, so the streamed pieces add up to the
returned text and never carry a U+FFFD that the next token would change."""

from __future__ import annotations

import torch
from torch import nn

from attnkit.inference.generation import generate


class Bytes:
    """A tokenizer whose ids are bytes: decode reads them as UTF-8 (invalid: U+FFFD)."""

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        return bytes(ids).decode("utf-8", errors="replace")


class Scripted(nn.Module):
    """A recurrent-LM stand-in whose greedy choices are ``script``, one per step."""

    def __init__(self, script: list[int]) -> None:
        super().__init__()
        self.script, self.anchor = script, nn.Parameter(torch.zeros(1))

    def begin_state(self, batch_size: int, device=None):
        return torch.zeros(batch_size, 1, dtype=torch.long)  # (B, 1): steps taken

    def forward(self, X, state):  # X (B, 1), state (B, 1) -> logits (B, 256), state
        logits = torch.zeros(X.shape[0], 256)
        step = int(state[0, 0])
        logits[:, self.script[min(step, len(self.script) - 1)]] = 1.0
        return logits, state + 1


def _streamed(text_bytes: bytes, prompt: str = "ab") -> tuple[list[str], str]:
    # the prompt's tokens take steps too: the script starts after them
    model = Scripted([0] * (len(prompt.encode()) - 1) + list(text_bytes))
    pieces = []
    out = generate(model, prompt, tokenizer=Bytes(), max_new_tokens=len(text_bytes),
                   stream=lambda _, s: pieces.append(s))  # fmt: skip
    return pieces, out


def test_characters_split_over_tokens_stream_whole():
    pieces, out = _streamed("é🙂x東".encode())
    assert out == "abé🙂x東"
    assert pieces == ["é", "🙂", "x", "東"]  # each when its last byte came


def test_invalid_bytes_stream_after_waiting_and_the_text_adds_up():
    pieces, out = _streamed(b"\xff\xfeok\xe6")  # never valid; a character cut at the end
    assert out == "ab\ufffd\ufffdok\ufffd"
    assert "".join(pieces) == out[len("ab") :]
