"""Runs a case's arm under TraceML's launcher (``traceml run traced.py ARM.json``) with the
one change TraceML's quickstart asks of a plain PyTorch loop: ``traceml.init(mode="auto")``
and each training step inside ``traceml.trace_step(model)``. The scripts are not edited: the
wrapped model is the DistributedDataParallel module the script builds, and a traced step runs
from one optimizer step's end to the next's (its batch, forward, backward and optimizer
step, and whatever the script does between steps)."""

from __future__ import annotations

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

    def begin(self) -> None:
        if self.model is not None:
            self.open = traceml.trace_step(self.model)
            self.open.__enter__()

    def end(self) -> None:
        if self.open is not None:
            self.open.__exit__(None, None, None)
            self.open = None


def install(steps: Steps) -> None:
    built = DistributedDataParallel.__init__

    def init(self: DistributedDataParallel, *args: Any, **kwargs: Any) -> None:
        built(self, *args, **kwargs)
        steps.model = self
        steps.begin()

    def stepped(*_: Any) -> None:
        steps.end()
        steps.begin()

    DistributedDataParallel.__init__ = init  # type: ignore[method-assign]
    register_optimizer_step_post_hook(stepped)


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as file:
        arm = json.load(file)
    traceml.init(mode="auto")
    steps = Steps()
    install(steps)
    sys.argv = [arm["script"], *arm["args"]]
    runpy.run_path(arm["script"], run_name="__main__")
