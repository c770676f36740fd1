"""Learning-rate scaling, warmup and the recipes' schedules against closed forms."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from scalescope.recipes import (
    GOYAL,
    LARS,
    LARS_RECIPE,
    get_recipe,
    scale_lr,
    warmup_schedule,
)


def model() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Linear(8, 2))


def rates(training, steps: int) -> list[float]:
    """The learning rate used by each of ``steps`` optimizer steps."""
    out = []
    for _ in range(steps):
        out.append(training.optimizer.param_groups[0]["lr"])
        training.optimizer.step()
        training.scheduler.step()
    return out


def test_scale_lr_rules():
    assert scale_lr(0.1, 8192) == pytest.approx(3.2)  # Goyal et al.: 8k images, lr 3.2
    assert scale_lr(0.1, 8192, rule="sqrt") == pytest.approx(0.1 * math.sqrt(32))
    assert scale_lr(0.1, 64, base_batch=32, rule="none") == 0.1
    with pytest.raises(ValueError, match="scaling rule 'cube' is not one of linear, sqrt"):
        scale_lr(0.1, 512, rule="cube")
    with pytest.raises(ValueError, match="positive"):
        scale_lr(0.1, 0)


def test_warmup_rises_linearly_then_holds():
    w = nn.Parameter(torch.ones(1))
    optimizer = torch.optim.SGD([w], lr=1.6)
    scheduler = warmup_schedule(optimizer, warmup_steps=4, start_factor=0.25)
    seen = []
    for _ in range(7):
        seen.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    want = [1.6 * (0.25 + 0.75 * t / 4) for t in range(4)] + [1.6] * 3
    assert seen == pytest.approx(want)


def test_goyal_at_8k_warms_up_from_the_base_rate_and_divides_by_ten():
    steps_per_epoch = 10
    training = GOYAL.build(model(), global_batch=8192, steps_per_epoch=steps_per_epoch,
                           total_steps=900)  # fmt: skip
    assert training.lr == pytest.approx(3.2) and training.warmup_steps == 50
    assert isinstance(training.optimizer, torch.optim.SGD)
    assert training.optimizer.param_groups[0]["weight_decay"] == 1e-4
    seen = rates(training, 900)
    k = 32
    for t in range(50):
        assert seen[t] == pytest.approx(0.1 * (1 / k + (1 - 1 / k) * t / 50) * k)
    for t, epoch in ((50, 5), (299, 29), (300, 30), (599, 59), (600, 60), (800, 80)):
        assert seen[t] == pytest.approx(3.2 * 0.1 ** sum(epoch >= e for e in (30, 60, 80))), t
    assert training.criterion.label_smoothing == 0.0


def test_lars_recipe_groups_poly_decay_and_label_smoothing():
    net = model()
    training = LARS_RECIPE.build(net, global_batch=1024, steps_per_epoch=4, total_steps=100)
    assert training.lr == pytest.approx(2.0 * math.sqrt(1024 / 256))
    assert isinstance(training.optimizer, LARS)
    weights, others = training.optimizer.param_groups
    assert [p.ndim for p in weights["params"]] == [2, 2]
    assert weights["weight_decay"] == 5e-5 and weights["adapt"]
    assert len(others["params"]) == 4 and others["weight_decay"] == 0 and not others["adapt"]
    assert training.criterion.label_smoothing == 0.1
    seen = rates(training, 100)
    warmup = 20
    assert seen[warmup - 1] < training.lr
    for t in range(warmup, 100):
        done = (t - warmup) / (100 - warmup)
        assert seen[t] == pytest.approx(training.lr * (1 - done) ** 2), t


def test_short_runs_warm_up_for_half_the_run_at_most():
    training = GOYAL.build(model(), global_batch=512, steps_per_epoch=2, total_steps=6)
    assert training.warmup_steps == 3
    assert training.lr == pytest.approx(0.2)


def test_unknown_recipe():
    assert get_recipe("lars") is LARS_RECIPE
    with pytest.raises(ValueError, match="unknown recipe 'adam'; choose goyal or lars"):
        get_recipe("adam")
