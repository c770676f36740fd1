"""Test helper (not a test module): real runs for the diagnosis tests, with the machine's
other load measured, and independent measurements of the truth.

The machine is shared (2 cores, other test suites): a run during which other processes used
more than ``MAX_EXTERNAL_PCT`` of the CPUs is repeated once, then the test is skipped with
the load it saw, because its timings are not the run's own. Where the tests have the cpus to
themselves (``make bench`` sets ``ALONE_ENV`` for benchmarks/accuracy), a busy machine cannot be the
reason, so the test fails with the load it measured instead: a broken model cannot hide as
a skip there.
"""

from __future__ import annotations

import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn, TypeVar

import numpy as np
import pytest
from analysed import analysed  # noqa: E402

from conftest import cli_env
from scalescope.diagnose import (
    DEFAULT_THRESHOLDS,
    Diagnosis,
    Thresholds,
    diagnose_run,
    diagnosis_input,
)
from scalescope.diagnose.rules_flops import efficiency
from scalescope.events import load_run

T = TypeVar("T")
ALONE_ENV = "SCALESCOPE_TESTS_ALONE"
"""Set to 1 where nothing else runs beside the tests (``make bench``'s accuracy tests)."""
CLI = [sys.executable, "-m", "scalescope.cli"]
MAX_EXTERNAL_PCT = 5.0
MAX_CPU_SPEED_GAP_PCT = 10.0
"""Cpus whose speedometers (``SPEEDOMETER``) differ by more than this (% of the faster) are
not equally fast: on this VM one vCPU was at times 26-48% slower than the other by them, for
minutes, with no other process and no steal time to show for it; a rank bound to it is then
a real straggler (forward and backward 15-20% longer), which the balanced scenario must not
be. Equal cpus measured within 5%."""
SPEEDOMETER = (
    "import json, os, sys, time\n"
    "import numpy as np\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "stop, times, a = sys.argv[2], [], np.ones(1 << 20, dtype=np.float32)\n"
    "while not os.path.exists(stop):\n"
    "    time.sleep(0.25)\n"
    "    start = time.perf_counter()\n"
    "    x = sum(i * i for i in range(5000)) + float((a * 1.5).sum())\n"
    "    times.append((time.time(), time.perf_counter() - start))\n"
    "print(json.dumps(times))\n"
)
"""A fixed piece of work every 0.25 s on one cpu (~2 ms, under 1% of it: Python arithmetic
and a pass over 4 MB, so a neighbour on the core or on its cache and memory slows it);
prints when it measured and how long the work took, every time."""
ATTEMPTS = 3
RESNET18_ARGS = [
    "bench", "resnet18", "-n", "2", "--bind-to", "core", "--batch-size", "24",
    "--image-size", "112", "--steps", "7", "--warmup-steps", "2",
]  # fmt: skip
"""The balanced workload: one bound core and one thread per rank; the 47 MB of gradients
per step are exposed for 50-150 ms, 4-7% of its ~1.4 s step (at batch 16 they reached 12%
of a 1.1 s step once, above ``exposed_comm_share_pct``; at batch 8 and 128 px, 11%)."""
RATE = "40mbit"
COMM_MODEL = "squeezenet1_1"
"""The comm-bound workload: 1.24 M parameters, 4.9 MB of gradients per step, ~1 s on a
40 Mbit/s link."""
BUSY_LOOP = (
    "import os, sys, time\n"
    "os.sched_setaffinity(0, {int(sys.argv[1])})\n"
    "end = time.monotonic() + float(sys.argv[2])\n"
    "while time.monotonic() < end:\n"
    "    pass\n"
)


def skip_or_fail(reason: str) -> NoReturn:
    """Skip because the machine was busy; fail with the reason where the tests run alone."""
    if os.environ.get(ALONE_ENV) == "1":
        pytest.fail(f"{reason} (with {ALONE_ENV}=1 the cpus should have been the tests' own)")
    pytest.skip(reason)


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
    cpu_work_s: dict[int, float] | None = None
    """Median time of the speedometer's work on each cpu during the run (when measured)."""


def bench_step_ms(run_dir: Path, key: str = "step_times_s") -> float:
    """Mean of the workload's own per-step timing (bench.json) after its warmup, ms."""
    bench = json.loads((run_dir / "bench.json").read_text())
    return 1e3 * statistics.fmean(bench[key][bench["warmup_steps"] :])


def bench_wait_ms(run_dir: Path) -> float:
    """Mean time of a step outside forward, backward and optimizer by the workload's own
    clock (bench.json: step minus compute time), after its warmup, ms: on a CPU, the wait
    for the next batch."""
    return bench_step_ms(run_dir) - bench_step_ms(run_dir, "compute_times_s")


def diagnose_dir(run_dir: Path, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Diagnosis:
    run = load_run(run_dir)
    return diagnose_run(run, analysed(run), thresholds)


def compute_efficiency(run_dir: Path) -> float:
    """Fraction of the estimated peak FLOP/s a run reached while computing."""
    run = load_run(run_dir)
    eff = efficiency(diagnosis_input(run, analysed(run)))
    assert not isinstance(eff, str), eff
    return eff.fraction


class Speedometers:
    """One ``SPEEDOMETER`` per cpu while a run goes on: how fast each cpu really was."""

    def __init__(self, cpus: list[int], workdir: Path) -> None:
        self.cpus, self.stop = cpus, workdir / "speedometers.stop"

    def __enter__(self) -> Speedometers:
        self.stop.unlink(missing_ok=True)
        self.procs = [
            subprocess.Popen(
                [sys.executable, "-c", SPEEDOMETER, str(cpu), str(self.stop)],
                stdout=subprocess.PIPE,
                text=True,
            )
            for cpu in self.cpus
        ]
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop.touch()
        self.samples = {
            cpu: [(float(t), float(s)) for t, s in json.loads(p.communicate(timeout=30)[0])]
            for cpu, p in zip(self.cpus, self.procs, strict=True)
        }
        self.work_s = {cpu: statistics.median(s for _, s in v) for cpu, v in self.samples.items()}

    def work_s_between(self, cpu: int, start: float, end: float) -> float | None:
        """Median time of the work on ``cpu`` measured between two wall-clock times."""
        inside = [s for t, s in self.samples[cpu] if start <= t <= end]
        return statistics.median(inside) if inside else None


def _once(
    args: list[str], cwd: Path, busy_cpu: int | None, env: dict[str, str], speed: list[int]
) -> RealRun:
    cwd.mkdir(parents=True, exist_ok=True)
    run_dir = cwd / f"run-{len(list(cwd.glob('run-*')))}"
    meters = Speedometers(speed, cwd)
    with ExternalLoad() as load, meters:
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
    step_ms = bench_step_ms(run_dir)
    return RealRun(run_dir, diagnose_dir(run_dir), step_ms, load.pct, meters.work_s or None)


def slower_pct(*work_s: float) -> float:
    """How much slower the slowest speedometer time is than the fastest, % of the slowest."""
    return 100.0 * (max(work_s) - min(work_s)) / max(work_s)


def unequal_cores(run: RealRun) -> str | None:
    """Why cpus 0 and 1 were not equally fast during ``run`` (its speedometers), or None."""
    if not run.cpu_work_s:
        return "the cpus' speed was not measured"
    gap = slower_pct(*run.cpu_work_s.values())
    if gap > MAX_CPU_SPEED_GAP_PCT:
        return f"one cpu was {gap:.0f}% slower than the other (speedometers)"
    return None


def speed_gap(a: RealRun, b: RealRun, cpu: int) -> str | None:
    """Why ``cpu`` did not run at one speed in runs ``a`` and ``b`` (their speedometers), or
    None: this VM's vCPUs change speed for minutes (a reference step of 718 ms here took
    1689 ms on CI's machine), so a run compared with one recorded earlier must have had
    the same cpu speed to make the difference its own."""
    if cpu not in (a.cpu_work_s or {}) or cpu not in (b.cpu_work_s or {}):
        return f"the speed of cpu {cpu} was not measured in both runs"
    gap = slower_pct(a.cpu_work_s[cpu], b.cpu_work_s[cpu])
    if gap > MAX_CPU_SPEED_GAP_PCT:
        return f"cpu {cpu} ran {gap:.0f}% slower in one of the two runs (speedometers)"
    return None


def real_run(
    args: list[str],
    cwd: Path,
    busy_cpu: int | None = None,
    env: dict[str, str] | None = None,
    premise: Callable[[RealRun], str | None] | None = None,
    speed: bool | list[int] = False,
) -> RealRun:
    """Run ``scalescope ARGS`` (bench) under the load monitor; retry, then skip, when other
    processes were busy or ``premise`` says why the run is not the scenario it should be.
    ``speed``: measure the speed of cpus 0 and 1 (or of these cpus) during the run
    (``Speedometers``), as a premise does."""
    cpus = speed if isinstance(speed, list) else [0, 1] if speed or premise else []
    seen, premises = [], 0
    for _ in range(ATTEMPTS):
        run = _once(args, cwd, busy_cpu, env or cli_env(), cpus)
        if run.external_pct > MAX_EXTERNAL_PCT:
            seen.append(f"other processes used {run.external_pct:.0f}% of the CPUs")
            continue
        reason = premise(run) if premise is not None else None
        if reason is None:
            return run
        seen.append(reason)
        premises += 1
    reason = f"no clean run in {ATTEMPTS}: {'; '.join(seen)}"
    if premises:  # the vCPUs' own speed, which no scheduling of the tests controls
        pytest.skip(reason)
    skip_or_fail(reason)


def quietly(measure: Callable[..., T], *args: object, **kwargs: object) -> T:
    """``measure(...)`` taken while other processes leave the CPUs alone (else retried,
    then the test is skipped): truths timed in this process, runs recorded side by side."""
    seen = []
    for _ in range(ATTEMPTS + 1):
        with ExternalLoad() as load:
            value = measure(*args, **kwargs)
        if load.pct <= MAX_EXTERNAL_PCT:
            return value
        seen.append(f"{load.pct:.0f}%")
    skip_or_fail(f"other processes used {', '.join(seen)} of the CPUs while measuring")


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


# --- communication over a throttled link between two network namespaces ------------------


def throttle(hosts: list[tuple[str, str, str]], rate: str = RATE) -> str | None:
    """Limit each end of the veth pair (``conftest.veth_hosts``) to ``rate`` with tbf; why it
    could not, or None."""
    for ns, dev, _ in hosts:
        tbf = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf",
               "rate", rate, "burst", "32kbit", "latency", "400ms"]  # fmt: skip
        done = subprocess.run(tbf, capture_output=True, text=True)
        if done.returncode != 0:
            return f"tc tbf is not available: {done.stderr.strip()}"
    return None


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _in_both(hosts: list[tuple[str, str, str]], argv_of: Callable[[int, str], list[str]]) -> None:
    """Run ``argv_of(node, addr)`` in both namespaces at once."""
    procs = [
        subprocess.Popen(
            ["ip", "netns", "exec", ns, "env", f"GLOO_SOCKET_IFNAME={dev}", *argv_of(node, addr)],
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for node, (ns, dev, addr) in enumerate(hosts)
    ]
    outs = [p.communicate(timeout=240) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs


COMM_BENCH = ["bench", COMM_MODEL, "--image-size", "64", "--batch-size", "8", "--steps", "5",
              "--warmup-steps", "1"]  # fmt: skip
"""The comm-bound bench's own options (each node adds its rendezvous and placement)."""


def bench_in_both(hosts: list[tuple[str, str, str]], run_dir: Path) -> float:
    """The comm-bound bench with one rank in each namespace, each on its own cpu (both
    "nodes" see the same two cores); its mean step time, ms."""
    endpoint = f"{hosts[0][2]}:{_port()}"
    _in_both(
        hosts,
        lambda node, addr: [
            *CLI, *COMM_BENCH, "--nnodes", "2", "--node-rank", str(node), "-n", "1",
            "--rdzv-endpoint", endpoint, "--local-addr", addr, "--run-dir", str(run_dir),
            "--cpu-list", str(node), "--no-report",
        ],
    )  # fmt: skip
    return bench_step_ms(run_dir)
