"""Rank 0's terminal output while the bench trains: progress bar and throughput lines."""

from __future__ import annotations

import time

import torch
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from scalescope.bench.throughput import HEADER, format_step_line, throughput


class Display:
    """Rank 0's output: plain lines, plus a progress bar when stdout is a terminal.

    Off a terminal the lines go out through `print` untouched (tabs kept, no wrapping), so
    logs stay parseable like tf_cnn_benchmarks output.
    """

    def __init__(
        self, enabled: bool, total: int, description: str, console: Console | None = None
    ) -> None:
        self.enabled = enabled
        self.console = console or Console(markup=False)
        self.progress: Progress | None = None
        if enabled and self.console.is_terminal:
            self.progress = Progress(
                TextColumn("{task.description}", markup=False),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                console=self.console,
                transient=True,
            )
            self.task = self.progress.add_task(description, total=total)

    def __enter__(self) -> Display:
        if self.progress is not None:
            self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.progress is not None:
            self.progress.stop()

    def line(self, text: str) -> None:
        if not self.enabled:
            return
        if self.progress is not None:
            self.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            print(text, flush=True)

    def advance(self) -> None:
        if self.progress is not None:
            self.progress.advance(self.task)


class StepReporter:
    """Times every step and prints the throughput lines.

    A step's time runs from the end of the previous step's reporting to the end of
    `optimizer.step()`, so it covers waiting for data but not this class's own output.
    Its compute time runs from `compute_starts()` (the batch is on the device) to the same
    end: the workload's own measure of forward, backward (with DDP's communication inside
    it) and optimizer, independent of the probe.
    The loss is kept as a tensor and read once per line, so steps never wait on it.
    """

    def __init__(
        self,
        display: Display,
        device: torch.device,
        warmup: int,
        total: int,
        images_per_step: int,
        display_every: int,
    ) -> None:
        self.display, self.device = display, device
        self.warmup, self.total = warmup, total
        self.images_per_step, self.display_every = images_per_step, display_every
        self.step_times: list[float] = []
        self.compute_times: list[float] = []
        self.compute_start: float | None = None
        self.loss_sum: torch.Tensor | None = None
        self.loss_count = 0
        self.last_loss: torch.Tensor | None = None
        self.first_loss: torch.Tensor | None = None
        self.clock = time.perf_counter()

    def compute_starts(self) -> None:
        self.compute_start = time.perf_counter()

    def after_step(self, loss: torch.Tensor) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        end = time.perf_counter()
        self.step_times.append(end - self.clock)
        if self.compute_start is not None:
            self.compute_times.append(end - self.compute_start)
        self.last_loss = loss.detach()
        if self.first_loss is None:
            self.first_loss = self.last_loss
        self.loss_sum = self.last_loss if self.loss_sum is None else self.loss_sum + self.last_loss
        self.loss_count += 1
        self.display.advance()
        self._report(len(self.step_times))
        self.clock = time.perf_counter()

    def _report(self, step: int) -> None:
        measured = step - self.warmup
        if measured == 0:
            self.display.line("Done warm up")
            self.display.line(HEADER)
            self.loss_sum, self.loss_count = None, 0
        elif measured > 0 and (
            measured == 1 or measured % self.display_every == 0 or step == self.total
        ):
            if self.display.enabled:
                stats = throughput(self.step_times[self.warmup :], self.images_per_step)
                self.display.line(format_step_line(measured, stats, self.window_loss()))
            self.loss_sum, self.loss_count = None, 0

    def window_loss(self) -> float:
        """Mean loss of the steps since the previous line."""
        assert self.loss_sum is not None
        return self.loss_sum.item() / self.loss_count
