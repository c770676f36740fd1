"""Analysis speed: load_run + analyze_run of a synthetic run of 4 ranks x 1,000 steps.

Each step of each rank has the rows a DDP run records: a STEP row, data, forward with
DDP's buffer broadcast, backward with three asynchronous gradient buckets, comm_wait,
optimizer and a memory peak (11 rows, 44k rows in all), with random jitter so that
arrivals differ between ranks. Prints the median of the repeats. Target: < 5 s.

    .venv/bin/python benchmarks/analyze_speed.py --ranks 4 --steps 1000 --repeats 5
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from results import record
from scalescope.analyze import analyze_run
from scalescope.analyze.cross_rank import analyze_cross_rank
from scalescope.events import EventWriter, Kind, RankMeta, RunMeta, load_run
from scalescope.events.run import events_path, rank_meta_path, write_json_atomic

MS = 1_000_000
BUCKETS = (1024 * 1024, 25 * 1024 * 1024, 20 * 1024 * 1024)
STEPS_PER_BATCH = 20
"""Steps per record batch, as the probe flushes."""


def parse() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--repeats", type=int, default=5)
    return p.parse_args()


def _coll(step: int, op: str, t: int, dur: int, nbytes: int, seq: int, tag: str) -> tuple:
    return (step, int(Kind.COLLECTIVE), op, t, dur, nbytes, nbytes // 4, "float32", "0", seq, tag)


def _phase(step: int, name: str, t: int, dur: int) -> tuple:
    return (step, int(Kind.PHASE), name, t, dur, 0, 0, "", "", -1, "")


def step_rows(rng: np.random.Generator, step: int, t: int, seq: int) -> tuple[list, int, int]:
    """One step's rows starting at ``t`` (a ~100 ms step with jitter); rows, next seq, end."""
    data, fwd, bwd = (int(rng.integers(a, b)) for a, b in ((1, 3), (25, 35), (45, 60)))
    data, fwd, bwd = data * MS, fwd * MS, bwd * MS
    rows = [_phase(step, "data", t, data), _phase(step, "forward", t + data, fwd)]
    rows.append(_coll(step, "broadcast", t + data, 80_000, 1024, seq, "buffers"))
    b0 = t + data + fwd
    issue = [b0 + bwd // 3, b0 + 2 * bwd // 3, b0 + bwd]
    for i, (at, nbytes) in enumerate(zip(issue, BUCKETS, strict=True)):
        dur = nbytes // 2_000 + 3 * MS  # about 2 GB/s plus latency
        rows.append(_coll(step, "all_reduce", at, dur, nbytes, seq + 1 + i, "gradients"))
    wait = 8 * MS
    rows.append(_phase(step, "backward", b0, bwd))
    rows.append(_phase(step, "comm_wait", b0 + bwd, wait))
    opt_start = b0 + bwd + wait
    rows.append(_phase(step, "optimizer", opt_start, 5 * MS))
    end = opt_start + 5 * MS
    rows.append((step, int(Kind.STEP), "step", t, end - t, 0, 32, "", "", -1, ""))
    rows.append((step, int(Kind.MEMORY), "rss_peak", 0, 0, 2 * 1024**3, 0, "", "", -1, ""))
    return rows, seq + 4, end


def write_rank(run_dir: Path, rank: int, steps: int) -> None:
    rng = np.random.default_rng(rank)
    writer = EventWriter(events_path(run_dir, rank), rank)
    batch: list = []
    t, seq = 10**12 + rank * 777_777, 0
    for step in range(steps):
        rows, seq, end = step_rows(rng, step, t, seq)
        batch.extend(rows)
        t = end + int(rng.integers(0, 200_000))
        if (step + 1) % STEPS_PER_BATCH == 0:
            writer.write(batch)
            batch = []
    writer.write(batch)
    writer.close()
    write_json_atomic(rank_meta_path(run_dir, rank), RankMeta(rank=rank, status="completed"))


def write_run(run_dir: Path, ranks: int, steps: int) -> int:
    meta = RunMeta(
        run_id="bench", command=["bench"], script="train.py", world_size=ranks,
        nproc_per_node=ranks, warmup_steps=5, status="completed",
    )  # fmt: skip
    write_json_atomic(run_dir / "run.json", meta)
    for rank in range(ranks):
        write_rank(run_dir, rank, steps)
    return len(load_run(run_dir).events)


def main() -> None:
    args = parse()
    with tempfile.TemporaryDirectory(prefix="scalescope-speed-") as tmp:
        run_dir = Path(tmp) / "run"
        rows = write_run(run_dir, args.ranks, args.steps)
        times, cross_times = [], []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            run = load_run(run_dir)
            analysis = analyze_run(run)
            times.append(time.perf_counter() - t0)
            assert analysis.cross_rank is not None
            t1 = time.perf_counter()
            analyze_cross_rank(run, run.meta.warmup_steps)
            cross_times.append(time.perf_counter() - t1)
    print(f"{args.ranks} ranks x {args.steps} steps, {rows:,} rows")
    print(f"load_run + analyze_run: {statistics.median(times):.3f} s (median of {args.repeats})")
    print(f"of which cross-rank:    {statistics.median(cross_times):.3f} s")
    print("target: < 5 s")
    median = statistics.median(times)
    record(
        f"load_run + analyze_run of {args.ranks} ranks x {args.steps} steps", median, "s",
        "< 5 s", median < 5.0,
        f"{rows:,} rows, median of {args.repeats}; cross-rank "
        f"{statistics.median(cross_times):.3f} s",
    )  # fmt: skip


if __name__ == "__main__":
    main()
