"""Test helper (not a test module): write runs by hand with known numbers.

Runs go through the real EventWriter, run.json writer and ``load_run``; the row builders
come from ``run_builders`` (tests/helpers) and are imported from here by the analyze tests.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from run_builders import Row, coll_row, mem_row, phase_row, step_row, write_run_dir

from scalescope.events import RankMeta, Run, RunMeta, load_run
from scalescope.events.run import events_path


def write_run(
    run_dir: Path,
    rows_by_rank: dict[int, list[list[Row]]],
    *,
    world_size: int,
    warmup_steps: int = 1,
    probe: bool = True,
    status: str = "completed",
    launcher_ranks: dict[int, RankMeta] | None = None,
    rank_files: dict[int, RankMeta] | None = None,
    truncate_bytes: dict[int, int] | None = None,
) -> Path:
    """Write run.json, rank meta files and one event stream per rank (a list of batches).

    ``truncate_bytes`` cuts that many bytes off the end of a rank's event file,
    as a killed process would leave it.
    """
    meta = RunMeta(
        run_id="test-run",
        command=["scalescope", "run", "train.py"],
        script="train.py",
        world_size=world_size,
        nproc_per_node=world_size,
        warmup_steps=warmup_steps,
        probe=probe,
        hostnames=["node-a"],
        start_time=1_000.0,
        end_time=1_012.5,
        status=status,
        ranks={str(r): m for r, m in (launcher_ranks or {}).items()},
    )
    write_run_dir(run_dir, meta, rows_by_rank, rank_files)
    for rank, cut in (truncate_bytes or {}).items():
        path = events_path(run_dir, rank)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) - cut])
    return run_dir


def make_run(tmp_path: Path, rows_by_rank: dict[int, list[list[Row]]], **kwargs) -> Run:
    """Write a run under ``tmp_path`` and load it back through ``load_run``."""
    run_dir = tmp_path / f"run-{len(list(tmp_path.glob('run-*')))}"
    return load_run(write_run(run_dir, rows_by_rank, **kwargs))


GRAD_BUCKETS = (4 * 1024 * 1024, 1024 * 1024)
"""Bytes of the two gradient all_reduce buckets of every step."""
BUFFER_BYTES = 1024
"""Bytes of DDP's buffer broadcast before every forward."""
PARAM_BYTES = 8 * 1024 * 1024
"""Bytes of the parameter broadcast at construction (step 0)."""


@dataclass
class SynthRank:
    """Rows of one synthetic rank plus the raw facts a test computes expectations from."""

    rank: int
    rows: list[Row] = field(default_factory=list)
    steps: list[tuple[int, int, int, int]] = field(default_factory=list)
    """(step, start_ns, dur_ns, samples)."""
    phases: list[tuple[int, str, int]] = field(default_factory=list)
    """(step, phase, dur_ns), one per PHASE row."""
    collectives: list[tuple[int, str, int, int, str]] = field(default_factory=list)
    """(step, op, nbytes, dur_ns, tag) of completed collectives."""


def _emit_step(
    r: SynthRank,
    rng: np.random.Generator,
    step: int,
    t: int,
    *,
    accum: int,
    slow: int,
    squeeze: bool,
    seq: int,
) -> tuple[int, int]:
    """Append one step's rows starting at ``t``; return the next start time and seq."""
    start = t
    durs: list[tuple[str, int]] = [("data", int(rng.integers(1, 3) * 1e6) * slow)]
    durs.append(("to_device", int(rng.integers(1, 2) * 1e5)))
    for _ in range(accum):
        durs.append(("forward", int(rng.integers(5, 9) * 1e6) * slow))
        durs.append(("backward", int(rng.integers(8, 15) * 1e6) * slow))
    if step % 2 == 1:
        durs.append(("comm_wait", int(rng.integers(1, 4) * 1e6)))
    durs.append(("optimizer", int(rng.integers(2, 4) * 1e6)))
    for name, dur in durs:
        if name == "forward":
            r.rows.append(coll_row(step, "broadcast", t, 50_000, BUFFER_BYTES, seq, "buffers"))
            r.collectives.append((step, "broadcast", BUFFER_BYTES, 50_000, "buffers"))
            seq += 1
        if name == "backward":
            for nbytes in GRAD_BUCKETS:
                coll_dur = int(nbytes // 2 + rng.integers(0, 500_000))  # about 2 GB/s
                r.rows.append(coll_row(step, "all_reduce", t, coll_dur, nbytes, seq))
                r.collectives.append((step, "all_reduce", nbytes, coll_dur, "gradients"))
                seq += 1
        r.rows.append(phase_row(step, name, t, dur))
        r.phases.append((step, name, dur))
        t += dur
    gap = int(rng.integers(0, 2_000_000))
    total = t - start + gap
    if squeeze:  # a step shorter than its phases: "other" must clamp at 0
        total = (t - start) // 2
    samples = 16 * accum
    r.rows.append(step_row(step, start, total, samples))
    r.steps.append((step, start, total, samples))
    return start + max(total, t - start) + gap, seq


def synth_rank(
    rank: int,
    num_steps: int,
    *,
    warmup_steps: int,
    accum: int = 2,
    seed: int = 0,
    squeeze_step: int | None = None,
) -> SynthRank:
    """A rank of a DDP job: warm-up steps 50x slower, two forwards/backwards per step
    (gradient accumulation), comm_wait only in odd steps, memory peaks every step."""
    rng = np.random.default_rng(seed * 100 + rank)
    r = SynthRank(rank)
    r.rows.append(coll_row(0, "broadcast", 0, 3_000_000, PARAM_BYTES, 0, "parameters"))
    r.collectives.append((0, "broadcast", PARAM_BYTES, 3_000_000, "parameters"))
    t, seq = 10_000_000 + rank * 123_456, 1
    for step in range(num_steps):
        slow = 50 if step < warmup_steps else 1
        t, seq = _emit_step(
            r, rng, step, t, accum=accum, slow=slow, squeeze=step == squeeze_step, seq=seq
        )
        r.rows.append(mem_row(step, "rss_peak", int(1e9) + rank * 1_000 + step * 7))
    return r


def batches_by_step(rows: list[Row], steps_per_batch: int) -> list[list[Row]]:
    """Split rows into record batches of ``steps_per_batch`` steps each, as the probe flushes."""
    batches: dict[int, list[Row]] = {}
    for row in rows:
        batches.setdefault(row[0] // steps_per_batch, []).append(row)
    return [batches[k] for k in sorted(batches)]


def expected_phases(r: SynthRank, first_step: int, end_step: int = 10**9) -> dict[str, dict]:
    """Independent per-rank phase statistics with plain loops and numpy on the raw lists.

    Steps ``first_step <= step < end_step`` that have a STEP row count; phase rows of other
    steps are ignored. Returns {phase: {mean_ms, p50_ms, p95_ms, total_ms, share_pct}}.
    """
    step_dur = {s: d for s, _, d, _ in r.steps if first_step <= s < end_step}
    ids = sorted(step_dur)
    sums: dict[str, dict[int, int]] = {}
    for step, name, dur in r.phases:
        if step in step_dur:
            sums.setdefault(name, dict.fromkeys(ids, 0))[step] += dur
    covered = {s: sum(per[s] for per in sums.values()) for s in ids}
    sums["other"] = {s: max(step_dur[s] - covered[s], 0) for s in ids}
    sums["step"] = dict(step_dur)
    total_step = sum(step_dur.values())
    out = {}
    for name, per in sums.items():
        ms = np.array([per[s] for s in ids], dtype=float) / 1e6
        out[name] = {
            "mean_ms": ms.mean(),
            "p50_ms": np.percentile(ms, 50),
            "p95_ms": np.percentile(ms, 95),
            "total_ms": ms.sum(),
            "share_pct": 100.0 * ms.sum() * 1e6 / total_step,
        }
    return out


def expected_throughput(r: SynthRank, first_step: int, end_step: int = 10**9) -> tuple:
    """(samples, span_s) of one rank over its measured steps."""
    kept = [s for s in r.steps if first_step <= s[0] < end_step]
    samples = sum(s[3] for s in kept)
    span_ns = max(s[1] + s[2] for s in kept) - min(s[1] for s in kept)
    return samples, span_ns / 1e9
