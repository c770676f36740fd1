"""Test helper (not a test module): a synthetic many-rank DDP run directory, written through
the real EventWriter and meta files, without launching a process per rank.

Every step of every rank: a STEP row, data, forward, backward, one gradient all_reduce
issued at the end of backward, comm_wait until it completes, optimizer. The all_reduce ends
on every rank together, ``TRANSFER_MS`` after the last rank issued it (as a real one does),
so a slow rank keeps the others waiting and every rank starts the next step together. Ranks
sit ``per_node`` to a host named ``node000``, ``node001``, ...
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from scalescope.events import EventWriter, Kind, RankMeta, RunMeta
from scalescope.events.run import ClockSync, events_path, rank_meta_path, write_json_atomic

MS = 1_000_000
DATA_MS, FORWARD_MS, BACKWARD_MS, OPTIMIZER_MS, TRANSFER_MS = 2.0, 30.0, 50.0, 4.0, 6.0
GRAD_BYTES = 25 * 1024 * 1024
SAMPLES = 32
T0 = 10**12


def host_of(rank: int, per_node: int = 8) -> str:
    return f"node{rank // per_node:03d}"


def _compute_ms(ranks: int, steps: int, slow: Mapping[int, float], seed: int) -> np.ndarray:
    """(ranks, steps) forward + backward ms: 80 ms with 1 % jitter, times each rank's factor."""
    rng = np.random.default_rng(seed)
    factor = np.ones(ranks)
    for rank, f in slow.items():
        factor[rank] = f
    jitter = rng.normal(1.0, 0.01, size=(ranks, steps))
    return (FORWARD_MS + BACKWARD_MS) * jitter * factor[:, None]


def _timeline(compute_ms: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Step starts (steps,), all_reduce issue (ranks, steps) and its common end (steps,), ns."""
    ranks, steps = compute_ms.shape
    compute_ns = (compute_ms * MS).astype(np.int64)
    start = np.empty(steps, dtype=np.int64)
    issue = np.empty((ranks, steps), dtype=np.int64)
    end = np.empty(steps, dtype=np.int64)
    t = T0
    for s in range(steps):
        start[s] = t
        issue[:, s] = t + int(DATA_MS * MS) + compute_ns[:, s]
        end[s] = issue[:, s].max() + int(TRANSFER_MS * MS)
        t = end[s] + int(OPTIMIZER_MS * MS)
    return start, issue, end


def _rank_rows(
    rank: int, start: np.ndarray, issue: np.ndarray, end: np.ndarray, drift_ns: int = 0
) -> list[tuple]:
    """One rank's rows (issue/end: this rank's all_reduce issue and the common end);
    ``drift_ns``: its timestamps slip this much more at each step (an unphysical timeline)."""
    rows: list[tuple] = []
    data, opt = int(DATA_MS * MS), int(OPTIMIZER_MS * MS)
    for s in range(len(start)):
        slip = s * drift_ns
        t, i, e = int(start[s]) + slip, int(issue[s]) + slip, int(end[s]) + slip
        fwd = (i - t - data) * 3 // 8
        bwd = i - t - data - fwd
        rows += [
            (s, int(Kind.STEP), "step", t, e + opt - t, 0, SAMPLES, "", "", -1, ""),
            (s, int(Kind.PHASE), "data", t, data, 0, 0, "", "", -1, ""),
            (s, int(Kind.PHASE), "forward", t + data, fwd, 0, 0, "", "", -1, ""),
            (s, int(Kind.PHASE), "backward", t + data + fwd, bwd, 0, 0, "", "", -1, ""),
            (s, int(Kind.COLLECTIVE), "all_reduce", i, e - i, GRAD_BYTES, GRAD_BYTES // 4,
             "float32", "0", s, "gradients"),
            (s, int(Kind.PHASE), "comm_wait", i, e - i, 0, 0, "", "", -1, ""),
            (s, int(Kind.PHASE), "optimizer", e, opt, 0, 0, "", "", -1, ""),
        ]  # fmt: skip
    return rows


def _rank_meta(rank: int, ranks: int, per_node: int, steps: int) -> RankMeta:
    return RankMeta(
        rank=rank,
        local_rank=rank % per_node,
        world_size=ranks,
        hostname=host_of(rank, per_node),
        status="completed",
        exit_code=0,
        steps=steps,
        clock=[ClockSync(when="start", offset_ns=0, uncertainty_ns=1000)],
    )


def write_many_ranks_run(
    run_dir: Path,
    ranks: int = 64,
    steps: int = 50,
    per_node: int = 8,
    slow: Mapping[int, float] | None = None,
    warmup: int = 2,
    run_id: str = "many",
    drift_ms: Mapping[int, float] | None = None,
    late_every: Mapping[int, tuple[int, float]] | None = None,
) -> Path:
    """A completed run of ``ranks`` x ``steps``; ``slow`` maps ranks to a compute factor
    (1.3: 30 % slower); ``drift_ms`` ranks to a slip of their timeline per step (their
    collectives no longer end together: what no real job records); ``late_every`` ranks to
    (K, ms): the rank's forward and backward take ms more at steps K, 2K, ... only."""
    run_dir = Path(run_dir)
    compute = _compute_ms(ranks, steps, slow or {}, seed=ranks * 1000 + steps)
    for rank, (period, extra_ms) in (late_every or {}).items():
        compute[rank, period::period] += extra_ms
    start, issue, end = _timeline(compute)
    hosts = sorted({host_of(r, per_node) for r in range(ranks)})
    meta = RunMeta(
        run_id=run_id,
        command=["scalescope", "run", "train.py"],
        script="train.py",
        world_size=ranks,
        nproc_per_node=per_node,
        nnodes=len(hosts),
        warmup_steps=warmup,
        hostnames=hosts,
        start_time=1000.0,
        end_time=1000.0 + (int(end[-1]) - T0) / 1e9,
        status="completed",
    )
    write_json_atomic(run_dir / "run.json", meta)
    for rank in range(ranks):
        write_json_atomic(rank_meta_path(run_dir, rank), _rank_meta(rank, ranks, per_node, steps))
        writer = EventWriter(events_path(run_dir, rank), rank)
        drift = int((drift_ms or {}).get(rank, 0.0) * MS)
        writer.write(_rank_rows(rank, start, issue[rank], end, drift))
        writer.close()
    return run_dir
