"""`scalescope top` at many ranks: the first frame, each refresh while the files grow, and the
peak memory, on synthetic DDP runs of 64 to 1,024 ranks x 1,000 steps.

The runs come from synthetic_run.py (11 rows a rank-step, batches of 20 steps). Each size is
measured in fresh subprocesses, as analyze_speed.py does (the child's peak resident set from
wait4):

- ``top RUN --once``: the command a user runs on the finished run (start, imports, one frame
  with the diagnosis).
- refresh: a copy of the run cut after 600 of its steps (status running) is watched as
  ``scalescope top`` watches it (LiveTop, the diagnosis every 10 s); before each of
  ``--frames`` frames every rank appends its next batch of 20 steps, one frame a second (the
  refresh interval). Timed inside the child after its imports: the first frame (reading 600
  steps of every rank), each refresh, and a frame with nothing new.

Goals (issue 29's item 3; before: ``top --once`` of 1,024 ranks took 4-15 s and 1.09 GB, each
refresh ~1.5 s of CPU): at 1,024 ranks the first frame <= 3 s, a refresh <= 1 s, the peak
memory <= 512 MiB (bounded by the window of 50 steps a rank, not the run). Smaller runs get
the same goals (a live view's budget is the refresh interval, whatever the size).

    .venv/bin/python benchmarks/top_speed.py                 # 64, 256, 1024
    .venv/bin/python benchmarks/top_speed.py --ranks 1024 --frames 10 --keep /tmp/runs
"""

from __future__ import annotations

import argparse
import io
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from analyze_speed import each_size, record_memory, run_child, verdict
from results import record
from synthetic_run import STEPS_PER_BATCH, write_run

MIB = 1024**2
FIRST_GOAL_S, REFRESH_GOAL_S, MEMORY_GOAL = 3.0, 1.0, 512 * MIB
CUT_STEPS = 600
"""The copy watched starts with this many steps of every rank."""
REFRESH_S = 1.0


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", default="64,256,1024", help="sizes, comma-separated")
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--frames", type=int, default=6, help="refresh frames while the files grow")
    p.add_argument("--keep", type=Path, help="write the runs here and keep them")
    p.add_argument("--child-refresh", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    least = CUT_STEPS + args.frames * STEPS_PER_BATCH
    if args.steps < least:
        p.error(f"--steps must be at least {least}: the watched copy starts at {CUT_STEPS} "
                f"steps and grows by {STEPS_PER_BATCH} a frame")  # fmt: skip
    return args


# --- in the child ----------------------------------------------------------------------------


def message_ends(path: Path) -> list[int]:
    """The byte offset after each message of an Arrow IPC stream (the schema's first)."""
    import pyarrow as pa

    reader = pa.BufferReader(pa.py_buffer(path.read_bytes()))
    ends = []
    while True:
        try:
            pa.ipc.read_message(reader)
        except EOFError:
            return ends
        ends.append(reader.tell())


class GrowingRun:
    """A copy of a finished run cut after ``batches`` batches of every rank, status running;
    ``grow`` appends every rank's next batch from the original (read from its file there, so
    the harness holds no run in memory)."""

    def __init__(self, source: Path, copy: Path, batches: int) -> None:
        self.source, self.copy = source, copy
        shutil.rmtree(copy, ignore_errors=True)
        (copy / "events").mkdir(parents=True)
        for name in ("run.json", *(f"ranks/{p.name}" for p in (source / "ranks").iterdir())):
            doc = json.loads((source / name).read_text())
            doc.update(status="running", end_time=None)
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            (copy / name).write_text(json.dumps(doc))
        self.ends: dict[str, list[int]] = {}
        self.at: dict[str, int] = {}
        for path in sorted((source / "events").iterdir()):
            self.ends[path.name] = message_ends(path)
            self.at[path.name] = batches
            self._copy(path.name, 0, self.ends[path.name][batches])

    def _copy(self, name: str, start: int, end: int) -> None:
        with open(self.source / "events" / name, "rb") as f:
            f.seek(start)
            data = f.read(end - start)
        with open(self.copy / "events" / name, "ab") as out:
            out.write(data)

    def grow(self) -> None:
        for name, ends in self.ends.items():
            k = self.at[name]
            if k + 1 < len(ends):
                self._copy(name, ends[k], ends[k + 1])
                self.at[name] = k + 1


def child_refresh(source: Path, copy: Path, frames: int) -> None:
    """In the child: the first frame, ``frames`` refreshes after each rank appended a batch
    (one a second), one frame with nothing new; printed as JSON."""
    from rich.console import Console

    from scalescope.live.run_view import FINDING_EVERY_S, LiveTop

    run = GrowingRun(source, copy, CUT_STEPS // STEPS_PER_BATCH)
    console = Console(file=io.StringIO(), width=120)
    top = LiveTop(copy, finding_every_s=FINDING_EVERY_S)

    def timed() -> float:
        t0 = time.perf_counter()
        console.print(top.frame())
        return time.perf_counter() - t0

    first = timed()
    refresh = []
    for _ in range(frames):
        time.sleep(max(REFRESH_S - (refresh[-1] if refresh else first), 0.0))
        run.grow()
        refresh.append(timed())
    idle = timed()
    analyses = getattr(top, "analyses", -1)  # -1: a scalescope from before the count
    print(json.dumps({"first_s": first, "refresh_s": refresh, "idle_s": idle,
                      "analyses": analyses, "rows": len(top.tail.window())}))  # fmt: skip


# --- the parent ------------------------------------------------------------------------------


def measure_size(ranks: int, args: argparse.Namespace, where: Path) -> None:
    run_dir = where / f"run-{ranks}"
    truth = write_run(run_dir, ranks, args.steps)
    print(f"\n{ranks} ranks x {args.steps} steps: {truth.rows:,} rows generated in "
          f"{truth.generate_s:.1f} s", flush=True)  # fmt: skip
    size = f"{ranks:,} ranks x {args.steps:,} steps"
    once = run_child([sys.executable, "-m", "scalescope.cli", "top", str(run_dir), "--once"])
    print(f"  top --once:             {once.seconds:6.2f} s  (the whole command)")
    print(f"    peak memory:          {once.peak_bytes / MIB:6.0f} MiB "
          f"{verdict(once.peak_bytes, MEMORY_GOAL)}")  # fmt: skip
    record(f"top --once of {size}", once.seconds, "s", "", None,
           "the whole command: start, imports, one frame with the diagnosis")  # fmt: skip
    record_memory(f"top --once of {size}", once, MEMORY_GOAL)
    child = run_child([sys.executable, __file__, "--child-refresh", str(run_dir),
                       str(where / f"growing-{ranks}"), "--frames", str(args.frames)])  # fmt: skip
    got = json.loads(child.output.strip().splitlines()[-1])
    mean, worst = statistics.mean(got["refresh_s"]), max(got["refresh_s"])
    print(f"  first frame (600 steps):{got['first_s']:6.2f} s  "
          f"{verdict(got['first_s'], FIRST_GOAL_S)}")  # fmt: skip
    print(f"  refresh, a batch a rank:{mean:6.2f} s  mean of {len(got['refresh_s'])}, "
          f"worst {worst:.2f} s {verdict(worst, REFRESH_GOAL_S)}")  # fmt: skip
    print(f"  frame, nothing new:     {got['idle_s']:6.2f} s  "
          f"({got['analyses']} analyses of {len(got['refresh_s']) + 2} frames, "
          f"window {got['rows']:,} rows)")  # fmt: skip
    print(f"    peak memory:          {child.peak_bytes / MIB:6.0f} MiB "
          f"{verdict(child.peak_bytes, MEMORY_GOAL)}")  # fmt: skip
    record(f"top first frame of {size}", got["first_s"], "s", f"<= {FIRST_GOAL_S:g} s",
           got["first_s"] <= FIRST_GOAL_S, f"{CUT_STEPS} steps of every rank read")  # fmt: skip
    record(f"top refresh of {size}", worst, "s", f"<= {REFRESH_GOAL_S:g} s",
           worst <= REFRESH_GOAL_S,
           f"worst of {len(got['refresh_s'])} (mean {mean:.2f} s), a batch of 20 steps "
           f"appended by every rank before each")  # fmt: skip
    record_memory(f"top watching {size}", child, MEMORY_GOAL)
    if args.keep is None:
        shutil.rmtree(run_dir, ignore_errors=True)
        shutil.rmtree(where / f"growing-{ranks}", ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.child_refresh is not None:
        child_refresh(*args.child_refresh, args.frames)
        return
    sizes = [int(s) for s in args.ranks.split(",") if s.strip()]
    goals = (f"first frame <= {FIRST_GOAL_S:g} s, refresh <= {REFRESH_GOAL_S:g} s, "
             f"peak memory <= {MEMORY_GOAL / MIB:.0f} MiB")  # fmt: skip
    print(f"sizes {sizes} x {args.steps} steps; goals: {goals}")
    each_size(sizes, args.keep, "scalescope-top-", lambda n, d: measure_size(n, args, d))


if __name__ == "__main__":
    os.environ.setdefault("COLUMNS", "120")
    main()
