"""Test helper (not a test module): small runs with round numbers, written and loaded for real.

Every step of every rank: data 10 ms, forward 30 ms, backward 40 ms, comm_wait 5 ms,
optimizer 5 ms, 100 ms in all (other 10 ms), 32 samples, steps back to back; two gradient
all_reduces of 4 MiB taking 2 ms each. The same collective numbers on every rank.
"""

from __future__ import annotations

from pathlib import Path

from scalescope.analyze import RunAnalysis, analyze_run
from scalescope.events import EventWriter, Kind, RankMeta, RunMeta, load_run
from scalescope.events.run import events_path, rank_meta_path, write_json_atomic

MS = 1_000_000
PHASE_MS = {"data": 10, "forward": 30, "backward": 40, "comm_wait": 5, "optimizer": 5}
STEP_MS = 100
SAMPLES = 32
BUCKET = 4 * 1024 * 1024
ALLREDUCE_MS = 2
WARMUP = 1
STEPS = 5


def rank_rows(num_steps: int = STEPS) -> list[tuple]:
    rows = []
    seq = 0
    for step in range(num_steps):
        t = step * STEP_MS * MS
        rows.append((step, int(Kind.STEP), "step", t, STEP_MS * MS, 0, SAMPLES, "", "", -1, ""))
        for name, ms in PHASE_MS.items():
            rows.append((step, int(Kind.PHASE), name, t, ms * MS, 0, 0, "", "", -1, ""))
            t += ms * MS
        for _ in range(2):
            rows.append(
                (step, int(Kind.COLLECTIVE), "all_reduce", t, ALLREDUCE_MS * MS, BUCKET,
                 BUCKET // 4, "float32", "0", seq, "gradients")
            )  # fmt: skip
            seq += 1
        rows.append((step, int(Kind.MEMORY), "rss_peak", 0, 0, 3 * 1024**3, 0, "", "", -1, ""))
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
        str(r): RankMeta(rank=r, hostname=f"node-{r // 2}", status="completed", exit_code=0)
        for r in range(world_size)
    }
    ranks |= {str(r): m for r, m in (rank_status or {}).items()}
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
        ranks=ranks,
    )
    write_json_atomic(run_dir / "run.json", meta)
    for r, m in ranks.items():
        write_json_atomic(rank_meta_path(run_dir, int(r)), m)
    if probe:
        for r in range(world_size) if written is None else written:
            writer = EventWriter(events_path(run_dir, r), r)
            writer.write(rank_rows())
            writer.close()
    return analyze_run(load_run(run_dir))
