"""Cost of the live state file (events/live_state.py) on the probe's hot path.

Drives the probe's Recorder as a training step does (data, forward, backward with three
gradient buckets issued and completed, optimizer: 4 phases, 3 collectives, a step end;
11 live-state updates per step) with the live state on and off, interleaved, and prints
the median time per step of each and their difference. The file is written through a
memory map: no system call per update.

    .venv/bin/python benchmarks/live_state_cost.py --steps 20000 --repeats 7
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from results import record
from scalescope.events.live_state_writer import LiveStateWriter
from scalescope.probe.recorder import Recorder


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=20_000)
    p.add_argument("--repeats", type=int, default=7)
    return p.parse_args()


def driven_s(rec: Recorder, steps: int) -> float:
    """Seconds per step of ``rec`` driven as a training step does (4 phases, 3 gradient
    buckets issued and completed, a step end; its rows dropped, never flushed)."""
    clock = time.perf_counter_ns
    start = time.perf_counter()
    for _ in range(steps):
        for name in ("data", "forward", "backward"):
            t = clock()
            rec.enter_phase(name, t)
            if name == "backward":
                for nbytes in (1 << 20, 25 << 20, 20 << 20):
                    row = rec.collective("all_reduce", nbytes, nbytes // 4, "float32", "0",
                                         "gradients", clock())  # fmt: skip
                    rec.completed(row, clock())
            rec.phase(name, t, clock())
        t = clock()
        rec.enter_phase("optimizer", t)
        rec.phase("optimizer", t, clock())
        rec.end_step(clock())
        rec.rows.clear()
    elapsed = time.perf_counter() - start
    return elapsed / steps


def one_pass(tmp: Path, steps: int, live: bool, tag: str) -> float:
    """Seconds per step of the recorder's hot path (flushes excluded: every 10^9 steps)."""
    rec = Recorder(tmp / f"{tag}.arrows", 0, flush_every_steps=10**9, flush_every_s=1e9)
    if live:
        rec.live = LiveStateWriter(tmp / f"{tag}.state", 1, 0)
    per_step = driven_s(rec, steps)
    rec.close()
    if rec.live is not None:
        rec.live.close()
    return per_step


def main() -> None:
    args = parse()
    on, off = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.repeats):
            off.append(one_pass(Path(tmp), args.steps, False, f"off{i}"))
            on.append(one_pass(Path(tmp), args.steps, True, f"on{i}"))
    print(f"recorder hot path per step, median of {args.repeats} x {args.steps} steps:")
    report_added("live state", "11 updates", off, on, args.steps)


def report_added(what: str, per_step: str, off: list[float], on: list[float],
                 steps: int) -> None:  # fmt: skip
    """The medians of the driven step's seconds with ``what`` off and on, printed and recorded
    as the time it adds per step (``per_step``: what it does in a step)."""
    a, b = statistics.median(off), statistics.median(on)
    print(f"  {what} off: {a * 1e6:.1f} µs   on: {b * 1e6:.1f} µs   "
          f"added: {(b - a) * 1e6:.1f} µs/step (ratio on/off {b / a:.2f})")  # fmt: skip
    for step_ms in (10, 100):
        print(f"  on a {step_ms} ms step: {(b - a) * 1e3 / step_ms * 100:.3f} % of the step")
    record(
        f"{what}'s added time per step of the recorder's hot path ({per_step})",
        (b - a) * 1e6, "µs", "", None,
        f"off {a * 1e6:.1f} µs, on {b * 1e6:.1f} µs, median of {len(off)} x {steps} "
        f"steps; {100 * (b - a) / 0.1:.3f} % of a 100 ms step",
    )  # fmt: skip


if __name__ == "__main__":
    main()
