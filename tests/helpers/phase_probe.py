"""Test helper: the probe's phase hooks installed in this process around a small model
wrapped as DDP wraps one (its ``.module``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import torch
from torch import nn

from scalescope.probe.phases import PhaseHooks
from scalescope.probe.recorder import Recorder


class Wrapper(nn.Module):
    """A wrapper like DDP's: the model under ``.module``."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.module(x)


@contextmanager
def watched(tmp_path: Path, device: str = "cpu") -> Iterator[tuple[Recorder, Wrapper]]:
    """A recorder and a watched 8 -> 16 -> 2 MLP on ``device``; the hooks removed after.
    The recorder keeps every row in memory (it flushes every 5 s by default, which a slow
    first step on a loaded machine passes)."""
    recorder = Recorder(tmp_path / "rank-0.arrows", 0, flush_every_s=3600)
    hooks = PhaseHooks(recorder)
    hooks.install()
    model = Wrapper(nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 2))).to(device)
    hooks.watch_forward(model)
    try:
        yield recorder, model
    finally:
        hooks.uninstall()
