"""Test helper (not a test module): real runs for the diagnosis tests, with the machine's
other load measured, and independent measurements of the truth.

The machine is shared (2 cores, other test suites): a run during which other processes used
more than ``MAX_EXTERNAL_PCT`` of the CPUs is repeated once, then the test is skipped with
the load it saw, because its timings are not the run's own.
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_env
from scalescope.analyze.summary import analyze_run
from scalescope.diagnose import (
    DEFAULT_THRESHOLDS,
    Diagnosis,
    Thresholds,
    diagnose_run,
    diagnosis_input,
)
from scalescope.diagnose.rules_flops import efficiency
from scalescope.events import load_run

CLI = [sys.executable, "-m", "scalescope.cli"]
MAX_EXTERNAL_PCT = 5.0
MAX_CPU_SPREAD_PCT = 8.0
"""Ranks doing the same work on cores of equal speed use CPU times this close (% of their
mean); on this VM a vCPU is sometimes 10-30% slower than the other, for seconds, with no
other process and no steal time to show for it."""
ATTEMPTS = 3
BUSY_LOOP = (
    "import os, sys, time\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "end = time.monotonic() + float(sys.argv[2])\n"
    "while time.monotonic() < end:\n"
    "    pass\n"
)


def _busy_cpu_s() -> float:
    """CPU time the whole machine spent busy since boot (/proc/stat), seconds."""
    with open("/proc/stat") as f:
        ticks = [int(v) for v in f.readline().split()[1:9]]
    busy = sum(ticks) - ticks[3] - ticks[4]
    return busy / os.sysconf("SC_CLK_TCK")


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


class ExternalLoad:
    """Share of the machine's CPUs that processes other than ours used in a window."""

    def __enter__(self) -> ExternalLoad:
        self._t, self._busy, self._ours = time.monotonic(), _busy_cpu_s(), self._own()
        return self

    @staticmethod
    def _own() -> float:
        own = resource.getrusage(resource.RUSAGE_SELF)
        return _children_cpu_s() + own.ru_utime + own.ru_stime

    def __exit__(self, *exc: object) -> None:
        wall = time.monotonic() - self._t
        external = (_busy_cpu_s() - self._busy) - (self._own() - self._ours)
        self.pct = max(0.0, 100.0 * external / (wall * (os.cpu_count() or 1)))


@dataclass
class RealRun:
    run_dir: Path
    diagnosis: Diagnosis
    step_ms: float
    """Mean measured step time from bench.json: the workload's own timing."""
    external_pct: float


def bench_step_ms(run_dir: Path, key: str = "step_times_s") -> float:
    """Mean of the workload's own per-step timing (bench.json) after its warmup, ms."""
    bench = json.loads((run_dir / "bench.json").read_text())
    return 1e3 * statistics.fmean(bench[key][bench["warmup_steps"] :])


def diagnose_dir(run_dir: Path, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Diagnosis:
    run = load_run(run_dir)
    return diagnose_run(run, analyze_run(run), thresholds)


def compute_efficiency(run_dir: Path) -> float:
    """Fraction of the estimated peak FLOP/s a run reached while computing."""
    run = load_run(run_dir)
    eff = efficiency(diagnosis_input(run, analyze_run(run)))
    assert not isinstance(eff, str), eff
    return eff.fraction


def _once(args: list[str], cwd: Path, busy_cpu: int | None, env: dict[str, str]) -> RealRun:
    run_dir = cwd / f"run-{len(list(cwd.glob('run-*')))}"
    with ExternalLoad() as load:
        busy = None
        if busy_cpu is not None:
            loop = [sys.executable, "-c", BUSY_LOOP, str(busy_cpu), "240"]
            busy = subprocess.Popen(loop)
        try:
            proc = subprocess.run(
                [*CLI, *args, "--run-dir", str(run_dir), "--no-report"],
                cwd=cwd,
                env=env,
                capture_output=True,
                text=True,
                timeout=240,
            )
        finally:
            if busy is not None:
                busy.kill()
                busy.wait()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return RealRun(run_dir, diagnose_dir(run_dir), bench_step_ms(run_dir), load.pct)


def unequal_cores(run: RealRun) -> str | None:
    """Why the ranks' cores were not equally fast during ``run``, or None.

    The kernel's CPU time of each rank process (rank files) is independent of the probe's
    phase timing: ranks with the same work on equal cores use the same CPU time."""
    cpu = [m.cpu_s for m in load_run(run.run_dir).ranks.values()]
    if any(c is None for c in cpu) or len(cpu) < 2:
        return "the rank files lack their CPU time"
    spread = 100.0 * (max(cpu) - min(cpu)) / statistics.fmean(cpu)
    if spread > MAX_CPU_SPREAD_PCT:
        return f"the ranks' CPU times differed by {spread:.0f}%"
    return None


def real_run(
    args: list[str],
    cwd: Path,
    busy_cpu: int | None = None,
    env: dict[str, str] | None = None,
    premise: Callable[[RealRun], str | None] | None = None,
) -> RealRun:
    """Run ``scalescope ARGS`` (bench) under the load monitor; retry, then skip, when other
    processes were busy or ``premise`` says why the run is not the scenario it should be."""
    seen = []
    for _ in range(ATTEMPTS):
        run = _once(args, cwd, busy_cpu, env or cli_env())
        if run.external_pct > MAX_EXTERNAL_PCT:
            seen.append(f"other processes used {run.external_pct:.0f}% of the CPUs")
            continue
        reason = premise(run) if premise is not None else None
        if reason is None:
            return run
        seen.append(reason)
    pytest.skip(f"no clean run in {ATTEMPTS}: {'; '.join(seen)}")
    raise AssertionError("unreachable")


def quietly(measure: Callable[..., float], *args: object, **kwargs: object) -> float:
    """``measure(...)`` taken while other processes leave the CPUs alone (else retried,
    then the test is skipped): the truths are timed in this process."""
    seen = []
    for _ in range(ATTEMPTS + 1):
        with ExternalLoad() as load:
            value = measure(*args, **kwargs)
        if load.pct <= MAX_EXTERNAL_PCT:
            return value
        seen.append(f"{load.pct:.0f}%")
    pytest.skip(f"other processes used {', '.join(seen)} of the CPUs while timing the truth")
    raise AssertionError("unreachable")


def warnings(d: Diagnosis) -> list[str]:
    return [f.code for f in d.findings if f.level == "warning"]


def noise_images(root: Path, count: int, width: int, height: int) -> Path:
    """An ImageFolder of ``count`` JPEGs of random noise in 2 classes (costly to decode)."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for i in range(count):
        folder = root / f"class{i % 2}"
        folder.mkdir(parents=True, exist_ok=True)
        pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
        Image.fromarray(pixels).save(folder / f"{i:03d}.jpg", quality=90)
    return root


class OneCore:
    """Run the test process on one cpu with one torch thread, as one bound rank runs."""

    def __init__(self, cpu: int = 0) -> None:
        self.cpus = {cpu}

    def __enter__(self) -> OneCore:
        import torch

        self._cpus, self._threads = os.sched_getaffinity(0), torch.get_num_threads()
        os.sched_setaffinity(0, self.cpus)
        torch.set_num_threads(1)
        return self

    def __exit__(self, *exc: object) -> None:
        import torch

        os.sched_setaffinity(0, self._cpus)
        torch.set_num_threads(self._threads)


def time_loader_ms(data: Path, image_size: int, batch: int, epochs: int = 2) -> float:
    """Mean time of one batch of the bench's own ImageFolder pipeline, 0 workers, 1 core."""
    from torch.utils.data import DataLoader

    from scalescope.bench.data import image_folder

    loader = DataLoader(image_folder(data, image_size), batch_size=batch, shuffle=True)
    with OneCore():
        next(iter(loader))
        start, batches = time.perf_counter(), 0
        for _ in range(epochs):
            batches += sum(1 for _ in loader)
        return 1e3 * (time.perf_counter() - start) / batches
