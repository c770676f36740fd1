"""Batch 32, and batch 512 with the goyal or the lars recipe, reach the same accuracy on a
real task.

The data set is generated here: three interleaved noisy spirals (2,048 training and 2,048
test points), which a small MLP separates only by learning a non-linear boundary. Batch
512 with the small batch's rate and the same epochs (16× fewer steps) falls short, so the
test shows the recipe (linear scaling with gradual warmup) is what closes the gap.

The lars recipe runs with its own numbers (base rate 2.0 at batch 256, square-root scaling,
trust coefficient 0.001, poly decay, label smoothing), made for 90-epoch ImageNet: each
step moves a layer by about rate × 0.001 of its norm, so on this task it needs LARS_EPOCHS
epochs (160 steps of 512, still 4× fewer than batch 32's 640) to reach the same accuracy.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch
from torch import nn

from scalescope.recipes import GOYAL, LARS, LARS_RECIPE, Recipe

TARGET = 0.95
EPOCHS = 10
LARS_EPOCHS = 40
SMALL_BATCH, LARGE_BATCH = 32, 512
SMALL_LR = 0.02


def spirals(n: int, seed: int, classes: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=g)
    radius = torch.rand(n, generator=g) * 3 + 0.3
    angle = radius * 1.6 + labels * (2 * math.pi / classes)
    points = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], 1)
    return points + 0.2 * torch.randn(n, 2, generator=g), labels


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                         nn.Linear(64, 3))  # fmt: skip


def accuracy_after_training(batch: int, recipe: Recipe | None, epochs: int = EPOCHS) -> float:
    """Test accuracy after ``epochs`` epochs at ``batch``: plain momentum SGD at SMALL_LR,
    or the recipe's optimizer, per-step schedule and loss."""
    x, y = spirals(2048, seed=0)
    x_test, y_test = spirals(2048, seed=1)
    model = mlp()
    steps_per_epoch = len(x) // batch
    if recipe is None:
        optimizer = torch.optim.SGD(model.parameters(), lr=SMALL_LR, momentum=0.9)
        scheduler, criterion = None, nn.CrossEntropyLoss()
    else:
        training = recipe.build(model, batch, steps_per_epoch, steps_per_epoch * epochs)
        optimizer, scheduler = training.optimizer, training.scheduler
        criterion = training.criterion
    order = torch.Generator().manual_seed(0)
    for _ in range(epochs):
        shuffled = torch.randperm(len(x), generator=order)
        for i in range(steps_per_epoch):
            idx = shuffled[i * batch : (i + 1) * batch]
            optimizer.zero_grad()
            criterion(model(x[idx]), y[idx]).backward()
            optimizer.step()
            if scheduler is not None:
                scheduler.step()
    with torch.no_grad():
        return (model(x_test).argmax(1) == y_test).float().mean().item()


@pytest.fixture(autouse=True)
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny matrices: more threads only contend
    yield
    torch.set_num_threads(threads)


def test_batch_512_with_the_goyal_recipe_reaches_the_small_batch_accuracy():
    goyal = dataclasses.replace(GOYAL, base_lr=SMALL_LR, base_batch=SMALL_BATCH)
    training = goyal.build(mlp(), LARGE_BATCH, 2048 // LARGE_BATCH, 40)
    assert training.lr == pytest.approx(SMALL_LR * 16) and training.warmup_steps == 20
    small = accuracy_after_training(SMALL_BATCH, None)
    large = accuracy_after_training(LARGE_BATCH, goyal)
    untreated = accuracy_after_training(LARGE_BATCH, None)
    assert small >= TARGET, small
    assert large >= TARGET, large
    assert untreated < TARGET - 0.1, untreated


def test_batch_512_with_the_lars_recipe_reaches_the_small_batch_accuracy():
    steps_per_epoch = 2048 // LARGE_BATCH
    total_steps = steps_per_epoch * LARS_EPOCHS
    training = LARS_RECIPE.build(mlp(), LARGE_BATCH, steps_per_epoch, total_steps)
    assert training.lr == pytest.approx(2.0 * math.sqrt(LARGE_BATCH / 256))
    assert training.warmup_steps == 5 * steps_per_epoch
    assert isinstance(training.optimizer, LARS)
    assert accuracy_after_training(LARGE_BATCH, LARS_RECIPE, LARS_EPOCHS) >= TARGET
