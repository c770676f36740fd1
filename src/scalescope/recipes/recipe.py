"""Large-batch training recipes: learning-rate scaling, gradual warmup, decay, optimizer,
label smoothing, put together as the seed studies use them (docs/recipes.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.optim import Optimizer
from torch.optim.lr_scheduler import (
    ConstantLR,
    LinearLR,
    LRScheduler,
    MultiStepLR,
    PolynomialLR,
    SequentialLR,
)

from scalescope.recipes.optimizers import LAMB, LARS

SCALING_RULES = ("linear", "sqrt", "none")
OPTIMIZERS = ("sgd", "lars", "lamb")
DECAYS = ("step", "poly", "none")


def scale_lr(base_lr: float, global_batch: int, base_batch: int = 256, rule: str = "linear"):
    """The learning rate for ``global_batch`` from ``base_lr`` tuned at ``base_batch``.

    ``linear``: lr × k with k = global_batch / base_batch (Goyal et al. 2017);
    ``sqrt``: lr × √k (Krizhevsky 2014; Hoffer et al. 2017; You et al. 2019 for LAMB).
    """
    if rule not in SCALING_RULES:
        raise ValueError(f"scaling rule {rule!r} is not one of {', '.join(SCALING_RULES)}")
    if base_lr <= 0 or global_batch < 1 or base_batch < 1:
        raise ValueError("base_lr, global_batch and base_batch must be positive")
    k = global_batch / base_batch
    return base_lr * {"linear": k, "sqrt": math.sqrt(k), "none": 1.0}[rule]


def warmup_schedule(
    optimizer: Optimizer,
    warmup_steps: int,
    start_factor: float,
    after: LRScheduler | None = None,
) -> LRScheduler:
    """Gradual warmup (Goyal et al. 2017): the rate rises linearly, step by step, from
    ``start_factor`` × its target to the target over ``warmup_steps``, then ``after`` runs
    (or the rate stays). Call ``scheduler.step()`` after every ``optimizer.step()``."""
    if not 0 < start_factor <= 1:
        raise ValueError(f"start_factor must be in (0, 1], got {start_factor}")
    later = after or ConstantLR(optimizer, factor=1.0, total_iters=0)
    if warmup_steps < 1:
        return later
    warm = LinearLR(optimizer, start_factor, 1.0, total_iters=warmup_steps)
    return SequentialLR(optimizer, [warm, later], milestones=[warmup_steps])


def adaptive_param_groups(model: nn.Module, weight_decay: float) -> list[dict]:
    """Two groups: weights (decayed, layer-wise adapted) and biases and normalisation
    parameters (one-dimensional: neither), the usual split for LARS and LAMB."""
    params = [p for p in model.parameters() if p.requires_grad]
    return [
        {"params": [p for p in params if p.ndim > 1], "weight_decay": weight_decay},
        {"params": [p for p in params if p.ndim <= 1], "weight_decay": 0.0, "adapt": False},
    ]


@dataclass(frozen=True, kw_only=True)
class Recipe:
    """The large-batch rules of one study; :meth:`build` applies them to a model."""

    name: str
    base_lr: float
    """Learning rate at ``base_batch`` images per step."""
    base_batch: int = 256
    scaling: str = "linear"
    warmup_epochs: float = 5.0
    optimizer: str = "sgd"
    momentum: float = 0.9
    weight_decay: float = 1e-4
    trust_coefficient: float = 0.001
    """LARS's η."""
    label_smoothing: float = 0.0
    decay: str = "step"
    """step: ÷10 at ``decay_epochs``; poly: (1 − t/T)² to zero after warmup; none."""
    decay_epochs: tuple[float, ...] = (30.0, 60.0, 80.0)
    citation: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        if self.scaling not in SCALING_RULES or self.optimizer not in OPTIMIZERS:
            raise ValueError(f"recipe {self.name}: unknown scaling or optimizer")
        if self.decay not in DECAYS:
            raise ValueError(f"recipe {self.name}: decay {self.decay!r} not in {DECAYS}")
        if not 0 <= self.label_smoothing < 1 or self.warmup_epochs < 0 or self.base_lr <= 0:
            raise ValueError(f"recipe {self.name}: bad label smoothing, warmup or base_lr")

    def lr(self, global_batch: int) -> float:
        return scale_lr(self.base_lr, global_batch, self.base_batch, self.scaling)

    def warmup_steps(self, steps_per_epoch: int, total_steps: int) -> int:
        """``warmup_epochs`` of steps, at most half the run (a short run still trains)."""
        return min(round(self.warmup_epochs * steps_per_epoch), total_steps // 2)

    def build(self, model: nn.Module, global_batch: int, steps_per_epoch: int,
              total_steps: int) -> Training:  # fmt: skip
        """Optimizer, per-step scheduler and loss for ``model`` trained with ``global_batch``
        images per step (all ranks together) for ``total_steps`` steps."""
        if steps_per_epoch < 1 or total_steps < 1:
            raise ValueError("steps_per_epoch and total_steps must be positive")
        lr = self.lr(global_batch)
        optimizer = self._optimizer(model, lr)
        warmup = self.warmup_steps(steps_per_epoch, total_steps)
        after = self._decay(optimizer, steps_per_epoch, total_steps - warmup, warmup)
        start = min(1.0, self.base_lr / lr)
        scheduler = warmup_schedule(optimizer, warmup, start, after)
        criterion = nn.CrossEntropyLoss(label_smoothing=self.label_smoothing)
        return Training(optimizer, scheduler, criterion, lr, warmup)

    def _optimizer(self, model: nn.Module, lr: float) -> Optimizer:
        if self.optimizer == "sgd":
            return torch.optim.SGD(model.parameters(), lr=lr, momentum=self.momentum,
                                   weight_decay=self.weight_decay)  # fmt: skip
        groups = adaptive_param_groups(model, self.weight_decay)
        if self.optimizer == "lars":
            return LARS(groups, lr=lr, momentum=self.momentum,
                        trust_coefficient=self.trust_coefficient)  # fmt: skip
        return LAMB(groups, lr=lr)

    def _decay(self, optimizer: Optimizer, steps_per_epoch: int, steps: int,
               warmup: int) -> LRScheduler | None:  # fmt: skip
        if self.decay == "poly":
            return PolynomialLR(optimizer, total_iters=max(steps, 1), power=2.0)
        if self.decay == "step":
            at = [round(e * steps_per_epoch) - warmup for e in self.decay_epochs]
            return MultiStepLR(optimizer, [m for m in at if m > 0], gamma=0.1)
        return None


@dataclass(frozen=True)
class Training:
    """What :meth:`Recipe.build` gives: step ``scheduler`` after every optimizer step."""

    optimizer: Optimizer
    scheduler: LRScheduler
    criterion: nn.Module
    lr: float
    """The scaled peak learning rate."""
    warmup_steps: int


GOYAL = Recipe(
    name="goyal", base_lr=0.1, scaling="linear", warmup_epochs=5, optimizer="sgd",
    momentum=0.9, weight_decay=1e-4, decay="step", decay_epochs=(30, 60, 80),
    citation="Goyal et al. 2017, Accurate, Large Minibatch SGD: Training ImageNet in 1 Hour",
)  # fmt: skip
LARS_RECIPE = Recipe(
    name="lars", base_lr=2.0, scaling="sqrt", warmup_epochs=5, optimizer="lars",
    momentum=0.9, weight_decay=5e-5, trust_coefficient=0.001, label_smoothing=0.1,
    decay="poly", citation="You, Gitman and Ginsburg 2017, Large Batch Training of "
    "Convolutional Networks; label smoothing and poly(2) decay as in MLPerf ResNet-50",
)  # fmt: skip
RECIPES = {r.name: r for r in (GOYAL, LARS_RECIPE)}


def get_recipe(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise ValueError(f"unknown recipe {name!r}; choose {' or '.join(RECIPES)}") from None
