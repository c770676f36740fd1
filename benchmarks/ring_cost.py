"""Cost of the flight recorder (probe/flight_ring.py) on the probe's hot path.

Two figures, interleaved on and off over repeats, medians printed side by side:

- ns per ring append (a collective's row packed into the memory map and counted), beside
  the recorder's own append of the same row (``Recorder.collective`` + ``completed``, the
  ring off): the ring must cost about 1 µs or less a row;
- the recorder driven as a training step does (4 phases, 3 gradient buckets, a step end: 8
  rows a step, as benchmarks/live_state_cost.py) with the ring on and off: its added time
  per step.

    .venv/bin/python benchmarks/ring_cost.py --rows 200000 --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from live_state_cost import driven_s, report_added
from results import record
from scalescope.events.schema import Kind
from scalescope.probe.flight_ring import RingWriter
from scalescope.probe.recorder import Recorder

TARGET_NS = 1000.0


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--repeats", type=int, default=7)
    return p.parse_args()


def ring_append_ns(tmp: Path, rows: int, tag: str) -> float:
    """ns per append of a collective's row (8 groups, sequence numbers rising)."""
    ring = RingWriter(tmp / f"{tag}.ring", 0, 65_536, 1, 0)
    batch = [
        [i // 100, Kind.COLLECTIVE, "all_reduce", i, 500, 1 << 20, 1 << 18, "float32",
         f"g{i % 8}", i, "gradients", -1]
        for i in range(1000)
    ]  # fmt: skip
    start = time.perf_counter_ns()
    for _ in range(rows // len(batch)):
        for row in batch:
            ring.append(row)
    elapsed = time.perf_counter_ns() - start
    ring.close()
    return elapsed / (rows // len(batch) * len(batch))


def recorder_append_ns(tmp: Path, rows: int, tag: str) -> float:
    """ns per collective the recorder appends and completes (no ring, no live state)."""
    rec = Recorder(tmp / f"{tag}.arrows", 0, flush_every_steps=10**9, flush_every_s=1e9)
    groups = [f"g{i}" for i in range(8)]
    start = time.perf_counter_ns()
    for i in range(rows):
        row = rec.collective("all_reduce", 1 << 20, 1 << 18, "float32", groups[i % 8],
                             "gradients", i)  # fmt: skip
        rec.completed(row, i + 500)
        if i % 1000 == 999:
            rec.rows.clear()
    elapsed = time.perf_counter_ns() - start
    rec.close()
    return elapsed / rows


def step_s(tmp: Path, steps: int, ring: bool, tag: str) -> float:
    """Seconds per step of the recorder's hot path (flushes excluded)."""
    rec = Recorder(tmp / f"{tag}.arrows", 0, flush_every_steps=10**9, flush_every_s=1e9)
    writer = RingWriter(tmp / f"{tag}.ring", 0, 65_536, 1, 0) if ring else None
    rec.sink = writer.append if writer is not None else None
    per_step = driven_s(rec, steps)
    rec.close()
    if writer is not None:
        writer.close()
    return per_step


def main() -> None:
    args = parse()
    ring, own, off, on = [], [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            own.append(recorder_append_ns(Path(tmp), args.rows, f"own{i}"))
            ring.append(ring_append_ns(Path(tmp), args.rows, f"ring{i}"))
            off.append(step_s(Path(tmp), args.steps, False, f"off{i}"))
            on.append(step_s(Path(tmp), args.steps, True, f"on{i}"))
    r, o = statistics.median(ring), statistics.median(own)
    print(f"per row, median of {args.repeats} x {args.rows} rows:")
    print(f"  ring append: {r:.0f} ns   recorder's own append + completion: {o:.0f} ns   "
          f"(ratio ring/recorder {r / o:.2f}; target ring <= {TARGET_NS:.0f} ns)")  # fmt: skip
    print(f"recorder hot path per step (8 rows), median of {args.repeats} x {args.steps} steps:")
    record(
        "flight ring's cost per row appended", r, "ns", f"<= {TARGET_NS:.0f} ns", r <= TARGET_NS,
        f"recorder's own append + completion {o:.0f} ns (ratio {r / o:.2f}), median of "
        f"{args.repeats} x {args.rows} rows",
    )  # fmt: skip
    report_added("flight ring", "8 rows", off, on, args.steps)


if __name__ == "__main__":
    main()
