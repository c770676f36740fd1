"""Analysis speed and memory at scale: `scalescope report RUN --json` and load_run +
analyze_run of synthetic DDP runs of 64 to 4,096 ranks x 1,000 steps.

The runs come from synthetic_run.py: collectives synchronise as a real job's do, every rank
on its host's clock (offset and drift, with the clock samples the probe records), nodes of
8 ranks (11 rows a rank-step). Each size is measured in fresh subprocesses, so each peak
memory (the child's maximum resident set, from wait4) is that size's alone: one runs the
command a user runs, one times load_run + analyze_run inside (after its imports).

Targets (issue 29), on a 2-core machine: 1,024 ranks x 1,000 steps <= 10 s and <= 2 GiB;
4,096 ranks <= 45 s and <= 6 GiB. Other sizes get the 1,024-rank goal scaled linearly with
ranks (64: 0.625 s and 128 MiB): strict for small runs, where starting Python and importing
scalescope (~1.5 s, ~75 MiB) is most of the cost.

    .venv/bin/python benchmarks/analyze_speed.py                       # 64, 256, 1024
    .venv/bin/python benchmarks/analyze_speed.py --ranks 4096 --steps 1000
    .venv/bin/python benchmarks/analyze_speed.py --ranks 256 --plant slow_node --keep /tmp/runs
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from results import record
from synthetic_run import PLANTS, write_run

GIB = 1024**3
MIB = 1024**2
GOALS = {1024: (10.0, 2 * GIB), 4096: (45.0, 6 * GIB)}
"""ranks -> (seconds, bytes) of issue 29, for 1,000 steps."""
CHILD_TIMEOUT_S = 1800.0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="64,256,1024", help="sizes, comma-separated")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=1, help="runs of each measurement (median)")
    p.add_argument("--plant", choices=PLANTS, help="plant a problem in every run")
    p.add_argument("--keep", type=Path, help="write the runs here and keep them")
    p.add_argument("--skip-analyze", action="store_true", help="time only report --json")
    p.add_argument("--child-analyze", type=Path, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def goal(ranks: int, steps: int) -> tuple[float, float]:
    """(seconds, bytes): issue 29's, else the 1,024-rank goal scaled by ranks and steps."""
    if ranks in GOALS and steps == 1000:
        return GOALS[ranks]
    seconds, memory = GOALS[1024]
    scale = ranks / 1024 * steps / 1000
    return seconds * scale, memory * scale


@dataclass(frozen=True)
class Measured:
    seconds: float
    peak_bytes: int
    output: str = ""


def measure_report(run_dir: Path, out: Path) -> Measured:
    command = [sys.executable, "-m", "scalescope.cli", "report", str(run_dir), "--json", str(out)]
    return run_child(command)


def measure_analyze(run_dir: Path) -> Measured:
    """load_run + analyze_run as the child timed them (after its imports), its peak memory."""
    child = run_child([sys.executable, __file__, "--child-analyze", str(run_dir)])
    inside = json.loads(child.output.strip().splitlines()[-1])
    return Measured(inside["load_s"] + inside["analyze_s"], child.peak_bytes, child.output)


def run_child(command: list[str]) -> Measured:
    """Wall time, peak resident memory and output of one child."""
    with tempfile.TemporaryFile("w+") as log:
        t0 = time.perf_counter()
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
        status, peak_kib = _wait4(proc.pid, CHILD_TIMEOUT_S)
        seconds = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
        log.seek(0)
        out = log.read()
    name = " ".join(Path(c).name for c in command[1:4])
    if status < 0:
        raise SystemExit(f"{name} ran past {CHILD_TIMEOUT_S:.0f} s:\n{out[-2000:]}")
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed ({proc.returncode}):\n{out[-2000:]}")
    return Measured(seconds, peak_kib * 1024, out)


def _wait4(pid: int, timeout_s: float) -> tuple[int, int]:
    """(wait status, peak RSS in KiB) of the child, by wait4: this child's own peak, where
    RUSAGE_CHILDREN would give the largest of all children so far. Status -1: killed at the
    time limit."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, status, usage = os.wait4(pid, os.WNOHANG)
        if done:
            return status, usage.ru_maxrss
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            _, _, usage = os.wait4(pid, 0)
            return -1, usage.ru_maxrss
        time.sleep(0.02)


def child_analyze(run_dir: Path) -> None:
    """In the child: time load_run and analyze_run after the imports; print them as JSON."""
    from scalescope.diagnose.recording import Recording
    from scalescope.events import load_run

    t0 = time.perf_counter()
    run = load_run(run_dir)
    t1 = time.perf_counter()
    analysis = Recording.of(run).analysis
    analysis.reported()  # every part the report JSON holds
    t2 = time.perf_counter()
    waits = [w.wait_ms_per_step for w in analysis.cross_rank.ranks] if analysis.cross_rank else []
    print(json.dumps({"load_s": t1 - t0, "analyze_s": t2 - t1, "rows": len(run.events),
                      "max_wait_ms": max(waits, default=0.0)}))  # fmt: skip


def median_of(runs: list[Measured]) -> Measured:
    """The median time; the largest peak."""
    return Measured(statistics.median(r.seconds for r in runs), max(r.peak_bytes for r in runs),
                    runs[-1].output)  # fmt: skip


def wait_share(report_json: Path) -> tuple[float, float]:
    """(largest wait per step over ranks, mean step) in ms, from the report's JSON."""
    doc = json.loads(report_json.read_text())
    ranks = (doc.get("cross_rank") or {}).get("ranks") or []
    wait = max((r["wait_ms_per_step"] for r in ranks), default=0.0)
    return wait, float((doc.get("steps") or {}).get("mean_step_ms") or 0.0)


def verdict(value: float, target: float) -> str:
    return f"{value / target:5.2f}x the goal ({'met' if value <= target else 'missed'})"


def measure_size(ranks: int, args: argparse.Namespace, where: Path) -> None:
    run_dir = where / f"run-{ranks}"
    truth = write_run(run_dir, ranks, args.steps, args.plant)
    print(f"\n{ranks} ranks x {args.steps} steps: {truth.rows:,} rows generated in "
          f"{truth.generate_s:.1f} s (plant: {truth.plant or 'none'})", flush=True)  # fmt: skip
    seconds_goal, bytes_goal = goal(ranks, args.steps)
    size = f"{ranks:,} ranks x {args.steps:,} steps"
    scaled = "" if ranks in GOALS and args.steps == 1000 else " (1,024-rank goal scaled)"
    out = where / f"report-{ranks}.json"
    rep = median_of([measure_report(run_dir, out) for _ in range(args.repeats)])
    wait_ms, step_ms = wait_share(out)
    print(f"  report --json:          {rep.seconds:7.1f} s  {verdict(rep.seconds, seconds_goal)}")
    print(f"    peak memory:          {rep.peak_bytes / MIB:7.0f} MiB "
          f"{verdict(rep.peak_bytes, bytes_goal)}")  # fmt: skip
    print(f"    largest wait per step {wait_ms:.1f} ms of a {step_ms:.1f} ms step")
    _record(f"report --json of {size}", rep, seconds_goal, bytes_goal, scaled,
            f"largest rank wait {wait_ms:.1f} ms of a {step_ms:.1f} ms step")  # fmt: skip
    if not args.skip_analyze:
        ana = median_of([measure_analyze(run_dir) for _ in range(args.repeats)])
        inside = json.loads(ana.output.strip().splitlines()[-1])  # the last repeat's split
        busy = ana.seconds
        print(
            f"  load_run + analyze_run: {busy:7.1f} s  {verdict(busy, seconds_goal)} "
            f"(load {inside['load_s']:.1f} s, analyze {inside['analyze_s']:.1f} s)"
        )
        print(f"    peak memory:          {ana.peak_bytes / MIB:7.0f} MiB "
              f"{verdict(ana.peak_bytes, bytes_goal)}")  # fmt: skip
        _record(f"load_run + analyze_run of {size}", Measured(busy, ana.peak_bytes),
                seconds_goal, bytes_goal, scaled,
                f"load {inside['load_s']:.1f} s, analyze {inside['analyze_s']:.1f} s")  # fmt: skip
    if args.keep is None:
        shutil.rmtree(run_dir, ignore_errors=True)


def _record(
    figure: str, m: Measured, seconds_goal: float, bytes_goal: float, scaled: str, detail: str
) -> None:
    record(figure, m.seconds, "s", f"<= {seconds_goal:.3g} s{scaled}",
           m.seconds <= seconds_goal, detail)  # fmt: skip
    record_memory(figure, m, bytes_goal, scaled)


def record_memory(figure: str, m: Measured, bytes_goal: float, scaled: str = "") -> None:
    record(f"peak memory of {figure}", m.peak_bytes / MIB, "MiB",
           f"<= {bytes_goal / MIB:,.0f} MiB{scaled}", m.peak_bytes <= bytes_goal,
           "the child's maximum resident set")  # fmt: skip


def each_size(sizes: list[int], keep: Path | None, prefix: str, measure) -> None:
    """``measure(ranks, folder)`` for each size, its runs kept in ``keep`` or a temporary
    folder."""
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        for ranks in sizes:
            measure(ranks, keep)
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        for ranks in sizes:
            measure(ranks, Path(tmp))


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.child_analyze is not None:
        child_analyze(args.child_analyze)
        return
    sizes = [int(s) for s in args.ranks.split(",") if s.strip()]
    print(f"sizes {sizes} x {args.steps} steps; goals: 1,024 ranks <= 10 s and <= 2 GiB, "
          "4,096 <= 45 s and <= 6 GiB, others the 1,024-rank goal scaled linearly")  # fmt: skip
    each_size(sizes, args.keep, "scalescope-speed-", lambda n, d: measure_size(n, args, d))


if __name__ == "__main__":
    main()
