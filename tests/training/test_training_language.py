"""A training run speaks the language in force: its epoch lines, a skipped step and the
loss guard's stop in Chinese under ``use_language("zh")``, the same English as before
under ``"en"``."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from attnkit import use_language
from attnkit.training.engine import Engine, EngineConfig, StepLoss, Task
from attnkit.training.guard import TrainingDivergedError


class _Linear(Task):
    """y = sum(x) with a squared loss; ``poison``: the optimizer steps whose loss is NaN."""

    name = "linear"

    def __init__(self, poison=()):
        g = torch.Generator().manual_seed(1)
        x = torch.randn(8, 3, generator=g, dtype=torch.float64)
        self._batches = [(x[:4], x[:4].sum(1, keepdim=True)), (x[4:], x[4:].sum(1, keepdim=True))]
        self.poison, self.seen = set(poison), 0

    def batches(self, epoch, rank, world_size):
        return self._batches

    def loss(self, ctx, batch, carry):
        x, y = batch
        loss_sum = ((ctx.net(x) - y) ** 2).sum()
        if self.seen in self.poison:
            loss_sum = loss_sum * float("nan")
        self.seen += 1
        return StepLoss(loss_sum, torch.tensor(x.shape[0]))


def _fit(language: str, capsys, poison=(), **settings) -> list[str]:
    torch.manual_seed(0)
    model = nn.Linear(3, 1, bias=False).double()
    config = EngineConfig(epochs=2, lr=0.05, seed=None, optimizer="sgd", **settings)
    with use_language(language):
        Engine(model, _Linear(poison), config).fit()
    return capsys.readouterr().out.splitlines()


def test_epoch_lines_and_a_skipped_step(capsys):
    zh = _fit("zh", capsys, poison={0})
    en = _fit("en", capsys, poison={0})
    assert len(zh) == len(en) == 3
    assert zh[0] == (
        "第1步（第1个迭代周期，第1/2个批量）：非有限值（损失nan，梯度范数nan）："
        "跳过这一步（连续第1次）"
    )
    assert en[0] == (
        "step 1 (epoch 1, batch 1/2): non-finite loss nan, gradient norm nan: the step is "
        "skipped (1 in a row)"
    )
    speed = r"\d[\d,]*"
    assert re.fullmatch(
        rf"迭代周期1/2：训练损失3\.028，{speed}词元/秒（跳过了1个非有限值的步）", zh[1]
    )
    assert re.fullmatch(
        rf"epoch 1/2: train loss 3\.028, {speed} tokens/s \(1 non-finite step\(s\) skipped\)", en[1]
    )
    assert re.fullmatch(rf"迭代周期2/2：训练损失3\.239，{speed}词元/秒", zh[2])
    assert re.fullmatch(rf"epoch 2/2: train loss 3\.239, {speed} tokens/s", en[2])


def test_the_loss_guard_stops_in_chinese(capsys):
    with pytest.raises(TrainingDivergedError) as info:
        _fit("zh", capsys, poison={0, 1}, max_nonfinite_steps=2)
    assert str(info.value) == (
        "训练已停止：连续2步的损失或梯度范数为非有限值，直到第1步（第1个迭代周期，第2/2个批量）"
        "（损失nan，梯度范数nan）；这些步都没有应用。没有out_dir：什么也没有保存。"
        "可以尝试更低的学习率--lr（本次为0.05）、更小的--clip（本次为1）、"
        "预热（--schedule inverse_sqrt --warmup-steps 300）；--resume会从保留的检查点继续"
    )
    with pytest.raises(TrainingDivergedError) as info:
        _fit("en", capsys, poison={0, 1}, max_nonfinite_steps=2)
    assert str(info.value) == (
        "training stopped: 2 steps in a row had a non-finite loss or gradient norm, up to "
        "step 1 (epoch 1, batch 2/2) (loss nan, gradient norm nan); none of them was applied. "
        "No out_dir: nothing is saved. Try a lower --lr (this run: 0.05), a smaller --clip "
        "(this run: 1), a warm-up (--schedule inverse_sqrt --warmup-steps 300); --resume goes "
        "on from the checkpoint kept"
    )
