"""The public API at scale: ``scalescope.load(run_dir)`` of a synthetic DDP run (load_run +
analyze_run behind it), then each of its Arrow tables, timed in a fresh subprocess whose peak
resident memory is its own (analyze_speed.py's ``run_child``).

Target (issue 37): loading the 1,024-rank x 1,000-step run <= 10 s and <= 2 GiB, like
``report``. The tables are figures to read (no target): they are built when asked for, and
``waits()`` matches every collective across ranks again (the analysis keeps only its sums).

    .venv/bin/python benchmarks/api_load.py                        # 1,024 ranks x 1,000 steps
    .venv/bin/python benchmarks/api_load.py --ranks 64 --steps 200
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from analyze_speed import GIB, MIB, measure_analyze, run_child
from results import record
from synthetic_run import write_run

TABLES = ("steps", "phases", "collectives", "waits", "ranks")
GOAL_S, GOAL_BYTES = 10.0, 2 * GIB
"""For 1,024 ranks x 1,000 steps; other sizes get it scaled by ranks x steps."""


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=1024)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--tables", action="store_true", help="build every table too")
    p.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def child(run_dir: Path, with_tables: bool) -> None:
    """In the child: time ``load`` (after its imports) and then each table."""
    from scalescope import load  # the API's modules imported here, before the clock starts

    t0 = time.perf_counter()
    recording = load(run_dir)
    times = {"load_s": time.perf_counter() - t0}
    rows = {}
    for name in TABLES if with_tables else ():
        t0 = time.perf_counter()
        rows[name] = getattr(recording, name)().num_rows
        times[f"{name}_s"] = time.perf_counter() - t0
    print(json.dumps({**times, "rows": rows, "events": len(recording.run.events)}))


def measure(run_dir: Path, with_tables: bool) -> tuple[dict, int]:
    command = [sys.executable, __file__, "--child", str(run_dir)]
    done = run_child([*command, "--tables"] if with_tables else command)
    return json.loads(done.output.strip().splitlines()[-1]), done.peak_bytes


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.child is not None:
        child(args.child, args.tables)
        return
    scale = args.ranks / 1024 * args.steps / 1000
    goal_s, goal_bytes = GOAL_S * scale, GOAL_BYTES * scale
    size = f"{args.ranks:,} ranks x {args.steps:,} steps"
    with tempfile.TemporaryDirectory(prefix="scalescope-api-") as tmp:
        run_dir = Path(tmp) / "run"
        truth = write_run(run_dir, args.ranks, args.steps)
        print(f"{size}: {truth.rows:,} rows generated in {truth.generate_s:.1f} s", flush=True)
        loaded, load_peak = measure(run_dir, with_tables=False)
        baseline = measure_analyze(run_dir)  # the same work by hand, under the same load
        tables, tables_peak = measure(run_dir, with_tables=True)
    print(f"  load:   {loaded['load_s']:6.1f} s, peak {load_peak / MIB:,.0f} MiB "
          f"(goal {goal_s:.3g} s, {goal_bytes / MIB:,.0f} MiB)")  # fmt: skip
    record(f"scalescope.load of {size}", loaded["load_s"], "s", f"<= {goal_s:.3g} s",
           loaded["load_s"] <= goal_s, "load_run + analyze_run, after the imports")  # fmt: skip
    record(f"peak memory of scalescope.load of {size}", load_peak / MIB, "MiB",
           f"<= {goal_bytes / MIB:,.0f} MiB", load_peak <= goal_bytes,
           "the child's maximum resident set")  # fmt: skip
    print(f"  load_run + analyze_run by hand: {baseline.seconds:6.1f} s, peak "
          f"{baseline.peak_bytes / MIB:,.0f} MiB")  # fmt: skip
    record(f"load_run + analyze_run of {size} (beside it)", baseline.seconds, "s", "", None,
           "analyze_speed.py's child, to compare under the same load")  # fmt: skip
    for name in TABLES:
        seconds, rows = tables[f"{name}_s"], tables["rows"][name]
        print(f"  {name + '()':14s} {seconds:6.2f} s  {rows:,} rows")
        record(f"Recording.{name}() of {size}", seconds, "s", "", None, f"{rows:,} rows")
    print(f"  load and every table: peak {tables_peak / MIB:,.0f} MiB")
    record(f"peak memory of load and every table of {size}", tables_peak / MIB, "MiB", "",
           None, "the child's maximum resident set")  # fmt: skip


if __name__ == "__main__":
    main()
