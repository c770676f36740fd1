"""Runs a case's arm under TraceML's launcher (``traceml run traced.py ARM.json``) with the
one change TraceML's quickstart asks of a plain PyTorch loop: ``traceml.init(mode="auto")``
and each training step inside ``traceml.trace_step(model)``. The scripts are not edited: the
wrapped model is the DistributedDataParallel module the script builds (a DeepSpeed job's
engine; in a loop without either, the module its optimizer steps), and a traced step runs
from one optimizer step's end to the next's (its batch, forward, backward and optimizer
step, and whatever the script does between steps)."""

from __future__ import annotations

import gc
import json
import runpy
import sys
from contextlib import AbstractContextManager
from typing import Any

import torch
import traceml_ai as traceml
from torch.nn.parallel import DistributedDataParallel
from torch.optim.optimizer import register_optimizer_step_post_hook


class Steps:
    """The open ``trace_step``: entered once the model exists, re-entered after each step."""

    def __init__(self) -> None:
        self.model: torch.nn.Module | None = None
        self.open: AbstractContextManager[None] | None = None
        self.searched = False

    def begin(self) -> None:
        if self.model is not None:
            self.open = traceml.trace_step(self.model)
            self.open.__enter__()

    def end(self) -> None:
        if self.open is not None:
            self.open.__exit__(None, None, None)
            self.open = None


def stepped_module(optimizer: torch.optim.Optimizer) -> torch.nn.Module | None:
    """A loop with no DDP module (its gradients all-reduced by hand): the module a user would
    trace, the outermost whose parameters the optimizer steps; traced from its second step."""
    first = optimizer.param_groups[0]["params"][0]
    owners = [m for m in gc.get_objects() if isinstance(m, torch.nn.Module)
              and any(p is first for p in m.parameters())]  # fmt: skip
    return max(owners, key=lambda m: sum(1 for _ in m.modules()), default=None)


def install(steps: Steps) -> None:
    built = DistributedDataParallel.__init__

    def init(self: DistributedDataParallel, *args: Any, **kwargs: Any) -> None:
        built(self, *args, **kwargs)
        steps.model = self
        steps.begin()

    def stepped(optimizer: torch.optim.Optimizer, *_: Any) -> None:
        steps.end()
        if steps.model is None and not steps.searched:
            steps.model, steps.searched = stepped_module(optimizer), True
        steps.begin()

    DistributedDataParallel.__init__ = init  # type: ignore[method-assign]
    register_optimizer_step_post_hook(stepped)


def install_deepspeed(steps: Steps) -> None:
    """A DeepSpeed job's model is its engine (an ``nn.Module``), from ``deepspeed.initialize``;
    its steps end at the optimizer's, which the engine steps inside its own."""
    import deepspeed

    built = deepspeed.initialize

    def initialize(*args: Any, **kwargs: Any) -> Any:
        out = built(*args, **kwargs)
        steps.model = out[0]
        steps.begin()
        return out

    deepspeed.initialize = initialize


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as file:
        arm = json.load(file)
    traceml.init(mode="auto")
    steps = Steps()
    install(steps)
    if arm.get("wrap") == "deepspeed":
        install_deepspeed(steps)
    sys.argv = [arm["script"], *arm["args"]]
    runpy.run_path(arm["script"], run_name="__main__")
