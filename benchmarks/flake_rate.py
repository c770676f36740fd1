"""Flake rate of the tests that start real ranks: the live stage (pytest ``-m live``, as
``make test`` runs it: three at a time) run N times in a row, optionally beside busy loops.

    .venv/bin/python benchmarks/flake_rate.py --runs 10             # idle machine
    .venv/bin/python benchmarks/flake_rate.py --runs 3 --busy 2     # beside `yes > /dev/null` x2

Prints one markdown row per run (date, load, busy loops, passed, failed, skipped, wall time,
what failed, what skipped and why) for the tally in docs/testing.md. Target: no failure.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from run_all import CaseRow, parse_junit

ROOT = Path(__file__).resolve().parents[1]
STAGE = ["-m", "pytest", "-q", "-n", "3", "--dist", "loadfile", "-m", "live", "-p",
         "no:cacheprovider"]  # fmt: skip


@dataclass
class StageRun:
    started: str
    load: float
    busy: int
    wall_s: float
    passed: int = 0
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)

    def row(self) -> str:
        failed = "; ".join(self.failed) or "-"
        skipped = "; ".join(self.skipped) or "-"
        return (f"| {self.started} | {self.load:.1f} | {self.busy} | {self.passed} | "
                f"{len(self.failed)} | {len(self.skipped)} | {self.wall_s:.0f} s | {failed} | "
                f"{skipped} |")  # fmt: skip


HEADER = (
    "| started (UTC) | load avg | busy loops | passed | failed | skipped | wall | failed tests "
    "| skipped (why) |\n|---|---|---|---|---|---|---|---|---|"
)


def record_cases(cases: list[CaseRow], run: StageRun) -> None:
    for case in cases:
        if case.status == "failed":
            run.failed.append(f"{case.nodeid} ({' '.join(case.reason.split())[:200]})")
        elif case.status == "skipped":
            run.skipped.append(f"{case.nodeid} ({case.reason[:120]})")
        else:
            run.passed += 1


def stage_once(busy: int) -> StageRun:
    loops = [subprocess.Popen(["yes"], stdout=subprocess.DEVNULL) for _ in range(busy)]
    started = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
    run = StageRun(started, os.getloadavg()[0], busy, 0.0)
    try:
        with tempfile.TemporaryDirectory() as tmp:
            junit = Path(tmp) / "junit.xml"
            t0 = time.monotonic()
            subprocess.run([sys.executable, *STAGE, f"--junitxml={junit}"], cwd=ROOT,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
            run.wall_s = time.monotonic() - t0
            if junit.exists():
                record_cases(parse_junit(junit), run)
            else:
                run.failed.append("pytest wrote no report")
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()
    return run


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=10, help="stage runs in a row")
    p.add_argument("--busy", type=int, default=0, help="`yes > /dev/null` loops beside it")
    args = p.parse_args()
    print(HEADER, flush=True)
    failed = 0
    for _ in range(args.runs):
        run = stage_once(args.busy)
        failed += bool(run.failed)
        print(run.row(), flush=True)
    print(f"\n{args.runs - failed} of {args.runs} runs without a failure")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
