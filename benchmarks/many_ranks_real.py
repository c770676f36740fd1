"""Real many-rank runs: `scalescope run -n 128 --oversubscribe` of a tiny DDP script (gloo)
on this machine, then `scalescope report RUN --json`.

Records how long it takes until every rank has started (its probe's start, from the launch),
until the run has ended, and to report it; and checks the structure: every rank's meta and
event file, and a report with every rank. No targets: figures to read (on 2 cores they are
bound by starting 128 Python processes that import torch). Each rank holds ~150-250 MiB of
its own (measured: ~400 MiB with torch and the probe), so 128 ranks need ~56 GiB: with
``--fit`` the run takes the largest multiple of 8 ranks up to ``--ranks`` that the memory
available holds (and says so), else it is skipped when 128 do not fit.

    .venv/bin/python benchmarks/many_ranks_real.py --ranks 128 --steps 3 --fit
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from results import record, skipped

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "e2e" / "scripts" / "ddp_train.py"
MIB_PER_RANK = 450
"""What a rank of the tiny script needs of its own (measured ~415 MiB on CPU, gloo)."""
SPARE_MIB = 2048
"""Left to the launcher, the report and the rest of the machine."""


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=128)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--timeout", type=float, default=1500.0, help="seconds for the run")
    p.add_argument("--fit", action="store_true", help="fewer ranks when memory is short")
    return p.parse_args()


def available_mib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) / 1024
    return float("inf")


def cli(*args: object, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env.pop("OMP_NUM_THREADS", None)
    command = [sys.executable, "-m", "scalescope.cli", *map(str, args)]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)  # fmt: skip


def check(run_dir: Path, report: dict, ranks: int) -> list[str]:
    """What is missing of a complete run of ``ranks`` ranks; empty when nothing."""
    problems = []
    metas = sorted((run_dir / "ranks").glob("rank-*.json"))
    events = sorted((run_dir / "events").glob("rank-*.arrows"))
    if len(metas) != ranks or len(events) != ranks:
        problems.append(f"{len(metas)} rank files and {len(events)} event files of {ranks}")
    if report.get("world_size") != ranks or len(report.get("ranks") or []) != ranks:
        problems.append(f"the report has {len(report.get('ranks') or [])} ranks of {ranks}")
    if report.get("status") != "completed":
        problems.append(f"status {report.get('status')}")
    return problems


def started_s(run_dir: Path, launched: float) -> float:
    """Seconds from the launch until the last rank's probe started."""
    starts = [json.loads(p.read_text())["start_time"] for p in (run_dir / "ranks").glob("*.json")]
    return max(starts) - launched if starts else float("nan")


def ranks_that_fit(wanted: int, fit: bool) -> int:
    """``wanted`` when the memory holds them; with ``fit`` the largest multiple of 8 below
    that does (at least 8); 0 when none."""
    holds = int((available_mib() - SPARE_MIB) // MIB_PER_RANK)
    if holds >= wanted:
        return wanted
    return holds // 8 * 8 if fit and holds >= 8 else 0


def run_and_report(ranks: int, steps: int, timeout: float) -> tuple[float, float, float]:
    """Seconds until every rank started, until the run ended, and of report --json."""
    with tempfile.TemporaryDirectory(prefix="scalescope-many-") as tmp:
        work, run_dir = Path(tmp), Path(tmp) / "run"
        launched, t0 = time.time(), time.perf_counter()
        run = cli("run", "-n", ranks, "--oversubscribe", "--run-dir", run_dir, "--no-report",
                  SCRIPT, "--steps", steps, cwd=work, timeout=timeout)  # fmt: skip
        finished = time.perf_counter() - t0
        if run.returncode != 0:
            raise SystemExit(f"run failed ({run.returncode}): {run.stderr[-2000:]}")
        start = started_s(run_dir, launched)
        t1 = time.perf_counter()
        rep = cli("report", run_dir, "--json", work / "report.json", cwd=work, timeout=600)
        reported = time.perf_counter() - t1
        if rep.returncode != 0:
            raise SystemExit(f"report failed ({rep.returncode}): {rep.stderr[-2000:]}")
        problems = check(run_dir, json.loads((work / "report.json").read_text()), ranks)
    if problems:
        raise SystemExit("incomplete: " + "; ".join(problems))
    return start, finished, reported


def main() -> None:
    args = parse()
    ranks = ranks_that_fit(args.ranks, args.fit)
    need = f"{args.ranks} ranks need ~{args.ranks * MIB_PER_RANK:,} MiB"
    free = f"{available_mib():,.0f} MiB available"
    label = f"{ranks or args.ranks} ranks x {args.steps} steps, tiny DDP model, oversubscribed"
    if ranks == 0:
        skipped(f"run of {label}", "s", "", f"{need}, {free}")
        print(f"skipped: {need}, {free}")
        return
    detail = "all rank and event files, a report with every rank"
    if ranks < args.ranks:
        print(f"{need}, {free}: running {ranks}")
        detail += f"; {need}, {free}: ran {ranks}"
    start, finished, reported = run_and_report(ranks, args.steps, args.timeout)
    print(f"{label}: every rank started after {start:.1f} s, the run ended after "
          f"{finished:.1f} s, report --json took {reported:.1f} s")  # fmt: skip
    record(f"time until every rank started, {label}", start, "s", "", None, detail)
    record(f"time until the run ended, {label}", finished, "s", "", None, detail)
    record(f"report --json of the run, {label}", reported, "s", "", None, detail)


if __name__ == "__main__":
    main()
