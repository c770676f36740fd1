"""The scripts' own clock: global samples/s measured by rank 0 between two barriers, written
as JSON to ``--out`` (independent of scalescope's probe)."""

from __future__ import annotations

import json
import time

import torch.distributed as dist


class Clock:
    def __init__(self, warmup_steps: int, samples_per_step: int) -> None:
        self.warmup_steps = warmup_steps
        self.samples_per_step = samples_per_step
        self.started: float | None = None
        self.measured = 0

    def step_done(self, step: int) -> None:
        """Call after step ``step`` (0-based) finished."""
        if step + 1 == self.warmup_steps:
            dist.barrier()
            self.started = time.perf_counter()
        elif step + 1 > self.warmup_steps:
            self.measured += 1

    def write(self, path: str) -> None:
        dist.barrier()
        if not path or dist.get_rank() != 0 or self.started is None or not self.measured:
            return
        seconds = time.perf_counter() - self.started
        world = dist.get_world_size()
        samples = self.measured * self.samples_per_step * world
        doc = {"samples_per_s": samples / seconds, "samples": samples, "seconds": seconds,
               "steps": self.measured, "world_size": world}  # fmt: skip
        with open(path, "w") as f:
            json.dump(doc, f)
