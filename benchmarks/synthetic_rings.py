"""The flight recorder rings (``live/rank-N.ring``) of a synthetic DDP job in which one
rank is stuck in a collective its peers completed, and the live states the hang watch
would read of it (issue 50: "a hang at 16,384 ranks still names the rank and the call from
the ring").

The steps are synthetic_run.py's (the ``ddp`` layout: a broadcast and three gradient
buckets a step, every collective on the world group "0", collectives ending together on
every rank). In the step after the last whole one, every rank completed the broadcast and
the first bucket; the stuck rank never completes the second bucket's all_reduce, while the
others completed it and wait in the third (a lost message on the stuck rank's side: the
others' part of the ring all-reduce is done). Each rank's rows are written with the
probe's own writer (probe/flight_ring.py), as the probe appends them, into a ring of
``rows`` rows; ``RecordedSource`` hands the states to the launcher's hang watch
(launch/watch/hang.py) in place of a live job.

    .venv/bin/python benchmarks/synthetic_rings.py /tmp/rings --ranks 64 --rows 1024
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from scalescope.events.files import ring_path
from scalescope.events.live_state import LiveState
from scalescope.probe.flight_ring import RingWriter
from synthetic_run import (
    AR0,
    AR1,
    AR2,
    BCAST,
    BUCKETS,
    BWD,
    DATA,
    FWD,
    ROW_ORDER,
    ROWS_PER_STEP,
    SEQ_PER_STEP,
    STEP,
    Clocks,
    Columns,
    Factors,
    hostnames,
    make_clocks,
    simulate,
)

HANG_IDLE_S = 60.0
"""How long before the rings are read the others entered their last collective."""
DONE_ROWS = (DATA, BCAST, FWD, AR0)
"""The rows of the hang's step every rank completed; the others completed ``AR1`` too."""


@dataclass(frozen=True)
class RingHang:
    """What the rings hold, to check a hang's analysis against."""

    ranks: int
    rows: int
    """Rows each ring holds."""
    stuck_rank: int
    step: int
    """The step the hang is in (every rank completed the steps before)."""
    op: str
    group: str
    seq: int
    nbytes: int
    """The call the stuck rank did not complete."""
    states: dict[int, LiveState]
    """Each rank's live state as the watch would read it."""
    write_s: float
    """Seconds the rings took to write."""


@dataclass(frozen=True)
class RecordedSource:
    """The hang watch's source (launch/watch/sources.py) over generated states: no process
    to flush, signal or stop."""

    recorded: dict[int, LiveState]

    def states(self) -> dict[int, LiveState]:
        return self.recorded

    def unknown(self) -> set[int]:
        return set()

    def flush(self, states: dict[int, LiveState]) -> None:
        return None

    def stacks(self) -> dict[int, str]:
        return {}

    def ended(self, rank: int, state: LiveState) -> str:
        return ""

    def stop(self) -> None:
        return None

    def last_calls(self, rank: int) -> tuple[tuple, str]:
        return (), ""

    def host(self, rank: int) -> str:
        return hostnames(len(self.recorded))[rank // 8]


def _columns(steps: int, others: bool) -> list[list]:
    """The shared columns of a rank's rows (ROW_FIELDS but start and duration, as lists):
    ``steps`` whole steps, then what it completed of the hang's step."""
    done = DONE_ROWS + ((AR1,) if others else ())
    whole, tail = Columns.of(steps, ROW_ORDER["ddp"]), Columns.of(1, done, first=steps)
    names = ("step", "kind", "name", "nbytes", "count", "dtype", "group", "seq", "tag")
    return [whole.arrays[n].to_pylist() + tail.arrays[n].to_pylist() for n in names]


def _write_ring(path: Path, rank: int, rows: int, offset: int, cols: list, start, dur) -> None:
    step, kind, name, nbytes, count, dtype, group, seq, tag = cols
    ring = RingWriter(path, rank, rows, 10_000 + rank, offset)
    peer = [-1] * len(step)
    for row in zip(step, kind, name, start, dur, nbytes, count, dtype, group, seq, tag, peer,
                   strict=True):  # fmt: skip
        ring.append(row)
    ring.close()


def _state(rank: int, wall, steps: int, tl_start, tl_dur, stuck: bool) -> LiveState:
    """The rank's live state: in the hang step's second (stuck) or third bucket."""
    at = AR1 if stuck else AR2
    last_done = AR0 if stuck else AR1
    end = tl_start[steps - 1, STEP] + tl_dur[steps - 1, STEP]
    return LiveState(
        rank=rank, pid=10_000 + rank, steps_done=steps, last_step_end_s=wall(end),
        phase="comm_wait", phase_since_s=wall(tl_start[steps, BWD] + tl_dur[steps, BWD]),
        op="all_reduce", group="0", seq=steps * SEQ_PER_STEP + (at - AR0 + 1),
        nbytes=BUCKETS[at - AR0], entered_s=wall(tl_start[steps, at]), left_s=None,
        last_done_s=wall(tl_start[steps, last_done] + tl_dur[steps, last_done]),
    )  # fmt: skip


def write_rings(
    run_dir: Path, ranks: int, rows: int = 1024, stuck: int | None = None, seed: int = 0
) -> RingHang:
    """``ranks`` rings of ``rows`` rows each in ``run_dir/live``, one rank (``stuck``, by
    default chosen by the seed, never rank 0) short of the others' last call."""
    if ranks < 2 or rows < 2 * ROWS_PER_STEP:
        raise ValueError(f"need 2 ranks or more and {2 * ROWS_PER_STEP} rows or more a ring")
    rng = np.random.default_rng(seed)
    stuck = int(rng.integers(1, ranks)) if stuck is None else stuck
    if not 0 <= stuck < ranks:
        raise ValueError(f"the stuck rank {stuck} is not one of the {ranks} ranks")
    steps = math.ceil(1.1 * rows / ROWS_PER_STEP)  # the rings wrap, as a long run's do
    tl = simulate(rng, ranks, steps + 1, Factors(np.ones(ranks), np.ones(ranks)), None)
    clocks = make_clocks(rng, ranks, 1.0)
    wall_start_ns = (time.time() - HANG_IDLE_S) * 1e9 - tl.start[steps, AR2].max()
    cols = {flag: _columns(steps, flag) for flag in (True, False)}
    states, t0 = {}, time.perf_counter()

    def wall(true_ns: float) -> float:
        return float(wall_start_ns + true_ns) / 1e9

    for rank in range(ranks):
        offset = _wall_offset(clocks, rank, wall_start_ns)
        start, dur = _local(clocks, rank, tl, steps, rank != stuck)
        path = ring_path(run_dir, rank)
        _write_ring(path, rank, rows, offset, cols[rank != stuck], start, dur)
        true = (tl.start[:, :, rank], tl.dur[:, :, rank])
        states[rank] = _state(rank, wall, steps, *true, stuck=rank == stuck)
    at = AR1 - AR0
    return RingHang(
        ranks, rows, stuck, steps, "all_reduce", "0", steps * SEQ_PER_STEP + at + 1,
        BUCKETS[at], states, time.perf_counter() - t0,
    )  # fmt: skip


def _wall_offset(clocks: Clocks, rank: int, wall_start_ns: float) -> int:
    """The rank's wall clock less its ``perf_counter_ns`` (the ring's header)."""
    return round(wall_start_ns - clocks.local(rank, np.zeros(1))[0])


def _local(clocks: Clocks, rank: int, tl, steps: int, others: bool) -> tuple[list, list]:
    """The rank's starts and durations on its own clock, as the ring takes them."""
    done = DONE_ROWS + ((AR1,) if others else ())
    start = np.concatenate([tl.start[:steps, :, rank].ravel(), tl.start[steps, done, rank]])
    dur = np.concatenate([tl.dur[:steps, :, rank].ravel(), tl.dur[steps, done, rank]])
    local = clocks.local(rank, start)
    return local.tolist(), (clocks.local(rank, start + dur) - local).tolist()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", type=Path)
    p.add_argument("--ranks", type=int, default=64)
    p.add_argument("--rows", type=int, default=1024, help="rows each ring holds")
    p.add_argument("--stuck", type=int, help="the stuck rank (default: chosen by the seed)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    try:
        hang = write_rings(args.path, args.ranks, args.rows, args.stuck, args.seed)
    except ValueError as exc:
        p.error(str(exc))
    print(f"{args.path}: {hang.ranks:,} rings of {hang.rows:,} rows in {hang.write_s:.1f} s; "
          f"rank {hang.stuck_rank} has not completed {hang.op} #{hang.seq} (group "
          f"{hang.group}, {hang.nbytes:,} B) of step {hang.step}")  # fmt: skip


if __name__ == "__main__":
    main()
