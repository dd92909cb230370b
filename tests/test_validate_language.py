"""The argument checks speak the language in force: Chinese under ``use_language("zh")``,
with the argument's name and the values in the message, and the same English as before
under ``"en"``."""

from __future__ import annotations

import pytest

from attnkit import MultiHeadAttention, set_language, use_language
from attnkit._validate import boolean, index, one_of, positive_int, probability, real
from attnkit.training.guard import LossGuard, TrainingDivergedError, hints
from attnkit.training.task import Task


def _message(check, *args, **kwargs) -> tuple[type, str]:
    with pytest.raises((TypeError, ValueError)) as info:
        check(*args, **kwargs)
    return info.type, str(info.value)


CASES = [
    (
        (positive_int, "num_heads", 0),
        "num_heads must be a positive int, got 0",
        "num_heads必须是正整数，实际为0",
    ),
    (
        (positive_int, "batch_size", "8"),
        "batch_size must be a positive int, got '8' (str)",
        "batch_size必须是正整数，实际为'8'（str）",
    ),
    (
        (index, "rank", 4, 4),
        "rank must be an int in [0, 4), got 4",
        "rank必须是[0, 4)内的整数，实际为4",
    ),
    (
        (probability, "dropout", 1.5),
        "dropout must be in [0, 1), got 1.5",
        "dropout必须在[0, 1)内，实际为1.5",
    ),
    (
        (boolean, "pre_norm", 1),
        "pre_norm must be a bool, got 1 (int)",
        "pre_norm必须是布尔值，实际为1（int）",
    ),
    (
        (one_of, "arch", "gru", ("rnn", "transformer")),
        "arch must be one of 'rnn', 'transformer', got 'gru'",
        "arch必须是'rnn', 'transformer'之一，实际为'gru'",
    ),
]


@pytest.mark.parametrize(("call", "english", "chinese"), CASES)
def test_errors_in_chinese_and_english(call, english, chinese):
    check, *args = call
    with use_language("zh"):
        kind_zh, text_zh = _message(check, *args)
    with use_language("en"):
        kind_en, text_en = _message(check, *args)
    assert (text_zh, text_en) == (chinese, english)
    assert kind_zh is kind_en  # the language changes the words, never the exception


def test_bounds_are_joined_in_the_language_in_force():
    with use_language("zh"):
        _, text = _message(real, "lr", -1.0, above=0.0, at_most=1.0)
    assert text == "lr必须是> 0且<= 1的有限数，实际为-1.0"
    with use_language("en"):
        _, text = _message(real, "lr", -1.0, above=0.0, at_most=1.0)
    assert text == "lr must be a finite number > 0 and <= 1, got -1.0"
    with use_language("zh"):
        _, text = _message(real, "temperature", float("nan"))
    assert text == "temperature必须是有限数，实际为nan"


def test_a_value_error_under_zh_still_names_the_argument():
    with use_language("zh"), pytest.raises(ValueError) as info:
        MultiHeadAttention(num_hiddens=10, num_heads=3)
    text = str(info.value)
    assert "num_heads" in text and "num_hiddens" in text
    assert text == "num_hiddens（10）必须能被num_heads（3）整除"


def test_set_language_reaches_the_checks_and_none_goes_back():
    try:
        set_language("zh")
        _, text = _message(positive_int, "num_layers", -2)
        assert text == "num_layers必须是正整数，实际为-2"
    finally:
        set_language(None)
    with use_language("en"):
        assert _message(positive_int, "num_layers", -2)[1] == (
            "num_layers must be a positive int, got -2"
        )


class _Config:
    epochs, lr, clip, schedule, warmup_steps, precision = 10, 0.003, None, "constant", 0, "bf16"


class _Context:
    config = _Config()


def test_the_training_progress_line():
    row = {"epoch": 3, "train_loss": 2.34567, "tokens_per_s": 12345.6}
    with use_language("zh"):
        line = Task.epoch_line(None, _Context(), row)
    assert line == "迭代周期3/10：训练损失2.346，12,346词元/秒"
    with use_language("en"):
        line = Task.epoch_line(None, _Context(), row)
    assert line == "epoch 3/10: train loss 2.346, 12,346 tokens/s"


def test_the_loss_guard_and_its_hints():
    guard = LossGuard(max_nonfinite=2, factor=0)
    with use_language("zh"):
        skipped = guard.step(float("nan"), 100, 1.0, "第5步")
        assert skipped == "第5步：非有限值（损失nan，梯度范数1）：跳过这一步（连续第1次）"
        with pytest.raises(TrainingDivergedError, match="连续2步的损失或梯度范数为非有限值"):
            guard.step(float("nan"), 100, 1.0, "第6步")
        tips = hints(_Config())
    assert tips == (
        "可以尝试更低的学习率--lr（本次为0.003）、梯度裁剪（--clip 1）、"
        "预热（--schedule inverse_sqrt --warmup-steps 300）、--precision fp32；"
        "--resume会从保留的检查点继续"
    )
    with use_language("en"):
        assert hints(_Config()) == (
            "Try a lower --lr (this run: 0.003), clipping (--clip 1), a warm-up (--schedule "
            "inverse_sqrt --warmup-steps 300), --precision fp32; --resume goes on from the "
            "checkpoint kept"
        )
