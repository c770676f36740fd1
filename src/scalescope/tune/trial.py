"""One trial: start the workload through the launcher, watch its progress, stop it at its time
budget (or when pruned), and measure samples/s from the run's own analysis."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
from torch.distributed.elastic.multiprocessing.api import SignalException

from scalescope.analyze.steps.steps import StepAnalysis, analyze_steps
from scalescope.analyze.summary import RunAnalysis
from scalescope.diagnose.recording import Recording
from scalescope.events.run import RunDirError
from scalescope.events.tail import RunTail
from scalescope.launch.run.runner import RunSpec
from scalescope.launch.run.session import start

POLL_S = 0.5
PROGRESS_EVERY_S = 2.0
KILL_GRACE_S = 10.0
"""After SIGTERM, ranks get this long to flush their events before SIGKILL."""

Progress = Callable[[float, float | None], bool]
"""Called with (seconds since launch, running samples/s or None); True stops the trial."""

SAMPLES_UNIT = "samples/s"
"""Samples of all ranks per second: the unit of every speed when the script's samples are
counted (DataLoader batches, or the DDP module's inputs)."""
STEPS_UNIT = "global steps/s"
"""Steps of the whole job per second (every rank steps once per global step): the unit when
nothing could be counted; it cannot compare configurations with other work per step."""


@dataclass(frozen=True)
class TrialResult:
    status: str
    """ok, failed, pruned or interrupted (the user stopped the study)."""
    samples_per_s: float | None
    unit: str
    """SAMPLES_UNIT, or STEPS_UNIT when the script's samples were not counted."""
    steps: int
    """Measured steps (after warm-up) of all ranks."""
    seconds: float
    run_dir: Path
    error: str | None = None
    stopped_at_budget: bool = False
    samples_per_step: float | None = None
    """Samples of all ranks in one global step (the global batch); None when not counted."""

    def outcome(self) -> dict[str, Any]:
        """The fields every record of a run shares (``TrialRecord``, ``ConfirmRun``): how it
        ended, what it measured and where; the caller adds what the run was."""
        return {
            "status": self.status,
            "samples_per_s": self.samples_per_s,
            "unit": self.unit,
            "seconds": self.seconds,
            "run_dir": str(self.run_dir),
            "error": self.error,
            "samples_per_step": self.samples_per_step,
        }


def throughput(steps: StepAnalysis | None) -> tuple[float | None, str, int]:
    """Global samples/s after warm-up (global steps/s when samples were not counted: the
    slowest rank's steps/s, which paces the job), unit, steps of all ranks."""
    if steps is None or steps.warmup_fallback:
        return None, SAMPLES_UNIT, 0
    count = sum(r.num_steps for r in steps.ranks)
    if steps.samples_per_s is not None:
        return steps.samples_per_s, SAMPLES_UNIT, count
    return steps.steps_per_s, STEPS_UNIT, count


def samples_per_step(steps: StepAnalysis | None) -> float | None:
    """The global batch: each rank's samples per measured step, summed over the ranks."""
    if steps is None or steps.samples_per_s is None:
        return None
    per_rank = [r.samples / r.num_steps for r in steps.ranks if r.num_steps]
    return sum(per_rank) if per_rank else None


class RunningRate:
    """Samples/s of the steps flushed so far (ranks flush every 20 steps or 5 s), reading only
    what the ranks appended since the last call (events/tail.py)."""

    def __init__(self, run_dir: Path, warmup_steps: int) -> None:
        self.tail = RunTail(run_dir, keep_steps=sys.maxsize)
        self.warmup_steps = warmup_steps

    def __call__(self) -> float | None:
        try:
            self.tail.poll()
        except RunDirError:
            return None
        return throughput(analyze_steps(self.tail.window(), self.warmup_steps))[0]


@contextmanager
def scoped_environ(extra: Mapping[str, str]) -> Iterator[None]:
    """``extra`` set for the trial; afterwards the environment is exactly as before (the
    launcher adds its own variables, which must not leak into the next trial)."""
    saved = dict(os.environ)
    os.environ.update(extra)
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def rank_processes(run_dir: Path) -> list[psutil.Process]:
    """This process's descendants that are ranks of the run (and their own children)."""
    marker = str(run_dir.resolve())
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            cmdline = child.cmdline()
        except psutil.Error:
            continue
        if "scalescope.probe.bootstrap" in cmdline and marker in cmdline:
            found.append(child)
    return found


class Watch(threading.Thread):
    """Beside the launcher: reports progress, stops the ranks at the budget or when pruned."""

    def __init__(self, run_dir: Path, warmup: int, budget_s: float, progress: Progress | None):
        super().__init__(daemon=True)
        self.run_dir, self.warmup, self.budget_s, self.progress = (
            run_dir,
            warmup,
            budget_s,
            progress,
        )
        self.done = threading.Event()
        self.reason: str | None = None
        self.last_rate: float | None = None
        self.started = time.monotonic()
        self.rate = RunningRate(run_dir, warmup)

    def run(self) -> None:
        last_report = 0.0
        while not self.done.wait(POLL_S):
            elapsed = time.monotonic() - self.started
            if self.reason is None and elapsed >= self.budget_s:
                self.stop("budget")
            elif self.reason is None and elapsed - last_report >= PROGRESS_EVERY_S:
                last_report = elapsed
                self.last_rate = self.rate()
                if self.progress is not None and self.progress(elapsed, self.last_rate):
                    self.stop("pruned")

    def stop(self, reason: str) -> None:
        self.reason = reason
        ranks = rank_processes(self.run_dir)
        family = ranks + [c for r in ranks for c in _children(r)]
        for proc in ranks:
            _signal(proc, signal.SIGTERM)
        _, alive = psutil.wait_procs(family, timeout=KILL_GRACE_S)
        for proc in alive:
            _signal(proc, signal.SIGKILL)


def _children(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def _signal(proc: psutil.Process, sig: int) -> None:
    with suppress(psutil.Error):
        proc.send_signal(sig)


def run_trial(
    spec: RunSpec, env: Mapping[str, str], budget_s: float, progress: Progress | None = None
) -> TrialResult:
    """Run one trial to its end or its budget; the result says how it ended. Ctrl-C before
    the launcher takes the signal (as the trial starts) is the same interruption as one it
    takes: interrupted, nothing measured."""
    assert spec.run_dir is not None
    run_dir = Path(spec.run_dir)
    watch = Watch(run_dir, spec.warmup_steps, budget_s, progress)
    status = "failed"
    with scoped_environ(env):
        watch.start()
        try:
            status = start(spec, True).status
        except KeyboardInterrupt:
            return _ended(run_dir, watch, "interrupted", None, "interrupted")
        except SignalException:
            raise
        except Exception as exc:  # a bad placement, a launcher error: this trial fails
            return _ended(run_dir, watch, "failed", None, f"{type(exc).__name__}: {exc}")
        finally:
            watch.done.set()
            watch.join()
    return judge(run_dir, status, watch)


def _ended(
    run_dir: Path, watch: Watch, status: str, analysis: RunAnalysis | None, error: str | None
) -> TrialResult:
    analysed = analysis.steps if analysis else None
    rate, unit, steps = throughput(analysed)
    if status == "pruned":
        rate = rate or watch.last_rate
    return TrialResult(
        status=status,
        samples_per_s=rate if status in ("ok", "pruned") else None,
        unit=unit,
        steps=steps,
        seconds=time.monotonic() - watch.started,
        run_dir=run_dir,
        error=error,
        stopped_at_budget=watch.reason == "budget",
        samples_per_step=samples_per_step(analysed),
    )


def judge(run_dir: Path, launch_status: str, watch: Watch) -> TrialResult:
    """ok when steps were measured and the run completed or we stopped it at its budget."""
    try:
        analysis = Recording.load(run_dir).analysis
    except RunDirError as exc:
        return _ended(run_dir, watch, "failed", None, str(exc))
    rate = throughput(analysis.steps)[0]
    if watch.reason == "pruned":
        return _ended(run_dir, watch, "pruned", analysis, None)
    if watch.reason == "budget" and rate is None:
        error = f"no step measured within its {watch.budget_s:g} s budget: killed (hung?)"
        return _ended(run_dir, watch, "failed", analysis, error)
    if watch.reason == "budget" or (launch_status == "completed" and rate is not None):
        return _ended(run_dir, watch, "ok", analysis, None)
    if launch_status == "interrupted":
        return _ended(run_dir, watch, "interrupted", analysis, "interrupted")
    first = analysis.first_failure
    error = first.error if first and first.error else f"run {launch_status}"
    if launch_status == "completed":
        error = "no step measured after the warm-up steps"
    return _ended(run_dir, watch, "failed", analysis, error)
