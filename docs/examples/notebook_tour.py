"""The worked example of docs/api.md, as a notebook would run it cell by cell.

    python docs/examples/notebook_tour.py RUN_DIR [OTHER_RUN_DIR]

Tests run it on a recorded run (tests/unit/api/test_notebook_tour.py). Pandas is used where
installed (``pip install 'scalescope[notebook]'``); the Arrow part runs without it.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pyarrow.compute as pc

import scalescope


def tour(run_dir: Path, other: Path | None, out: Path) -> dict[str, object]:
    rec = scalescope.load(run_dir)

    # Per-rank figures: who is slow, who waits.
    ranks = rec.ranks()
    print(ranks.select(["rank", "host", "measured_steps", "mean_step_ms", "wait_ms_per_step"]))

    # The measured steps (past warm-up): the mean of each phase, in ms, with Arrow alone.
    steps = rec.steps().filter(pc.field("measured"))
    timed = [c for c in steps.column_names if c.endswith("_ns") and c != "start_ns"]
    phase_ms = {c.removesuffix("_ns"): pc.mean(steps[c]).as_py() / 1e6 for c in timed}
    print(phase_ms)

    # Collectives: calls and bytes per op, then waiting versus transfer per op.
    calls = rec.collectives().group_by("op").aggregate([("nbytes", "sum"), ("op", "count")])
    print(calls)
    waits = rec.waits().filter(pc.field("measured"))
    print(waits.group_by("op").aggregate([("wait_ns", "mean"), ("transfer_ns", "mean")]))

    # The diagnosis: the findings, most costly first.
    for f in rec.findings:
        print(f"{f.level}: {f.bottleneck}: {f.summary}")

    # The same as pandas DataFrames, where pandas is installed.
    try:
        df = rec.frame("steps")
    except ImportError as exc:
        print(exc)
    else:
        print(df[df.measured].groupby("rank")["dur_ns"].mean() / 1e6)

    # What `scalescope report` prints and writes.
    rec.print_report()
    written = [
        rec.write_json(out / "report.json"),
        rec.write_dashboard(out / "dashboard.html"),
        rec.write_timeline(out / "timeline.json", steps=2, ranks="0-1"),
    ]
    if other is not None:
        comparison = scalescope.compare(rec, other)
        comparison.print()
        written.append(comparison.write_json(out / "compare.json"))
    return {"recording": rec, "phase_ms": phase_ms, "written": written}


def main(argv: list[str]) -> None:
    if not argv or len(argv) > 2:
        raise SystemExit(__doc__.splitlines()[2].strip())
    other = Path(argv[1]) if len(argv) > 1 else None
    with tempfile.TemporaryDirectory() as tmp:
        tour(Path(argv[0]), other, Path(tmp))


if __name__ == "__main__":
    main(sys.argv[1:])
