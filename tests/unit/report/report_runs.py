"""Test helper (not a test module): small runs with round numbers, written and loaded for real.

Every step of every rank: data 10 ms, forward 30 ms, backward 40 ms, comm_wait 5 ms,
optimizer 5 ms, 100 ms in all (other 10 ms), 32 samples, steps back to back; two gradient
all_reduces of 4 MiB taking 2 ms each. The same collective numbers on every rank.
"""

from __future__ import annotations

from pathlib import Path

from analysed import analysed  # noqa: E402
from run_builders import Row, coll_row, mem_row, phase_row, step_row, write_run_dir

from scalescope.analyze import RunAnalysis
from scalescope.events import RankMeta, RunMeta, load_run

MS = 1_000_000
PHASE_MS = {"data": 10, "forward": 30, "backward": 40, "comm_wait": 5, "optimizer": 5}
STEP_MS = 100
SAMPLES = 32
BUCKET = 4 * 1024 * 1024
ALLREDUCE_MS = 2
WARMUP = 1
STEPS = 5


def rank_rows(num_steps: int = STEPS) -> list[Row]:
    rows = []
    seq = 0
    for step in range(num_steps):
        t = step * STEP_MS * MS
        rows.append(step_row(step, t, STEP_MS * MS, SAMPLES))
        for name, ms in PHASE_MS.items():
            rows.append(phase_row(step, name, t, ms * MS))
            t += ms * MS
        for _ in range(2):
            rows.append(coll_row(step, "all_reduce", t, ALLREDUCE_MS * MS, BUCKET, seq))
            seq += 1
        rows.append(mem_row(step, "rss_peak", 3 * 1024**3))
    return rows


def build(
    run_dir: Path,
    *,
    world_size: int = 4,
    written: tuple[int, ...] | None = None,
    probe: bool = True,
    status: str = "completed",
    rank_status: dict[int, RankMeta] | None = None,
) -> RunAnalysis:
    """Write and analyse a run; ``written`` are the ranks with an event file."""
    ranks = {
        r: RankMeta(rank=r, hostname=f"node-{r // 2}", status="completed", exit_code=0)
        for r in range(world_size)
    }
    ranks |= rank_status or {}
    meta = RunMeta(
        run_id="run-42",
        command=["scalescope", "bench", "resnet18"],
        script="",
        workload="resnet18",
        world_size=world_size,
        nproc_per_node=2,
        warmup_steps=WARMUP,
        probe=probe,
        hostnames=sorted({m.hostname for m in ranks.values() if m.hostname}),
        start_time=100.0,
        end_time=160.0,
        status=status,
        ranks={str(r): m for r, m in ranks.items()},
    )
    events = {r: [rank_rows()] for r in (range(world_size) if written is None else written)}
    write_run_dir(run_dir, meta, events if probe else {}, ranks)
    return analysed(load_run(run_dir))
