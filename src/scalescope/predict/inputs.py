"""What a recorded run tells the model: per-rank times per step, gradient buckets, the
run's own α-β of its gradient transfers, placement, memory peak and the model's cost.

Every figure is a mean over measured steps (after warm-up) and over ranks; the spread of
compute time across steps is kept for the uncertainty band.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from scalescope.analyze.columns.slot_index import measured_steps
from scalescope.analyze.comm.alpha_beta import AlphaBetaFit, bandwidth_fit, fit_alpha_beta
from scalescope.analyze.summary import RunAnalysis
from scalescope.bench.flops import SCRIPT_MODEL_UNKNOWN, why_no_flops
from scalescope.diagnose.recording import Recording
from scalescope.diagnose.rules_input import rank_threads, rank_times
from scalescope.events import Kind, Run
from scalescope.predict.costs import ModelCost, model_cost

GRADIENTS = "gradients"


@dataclass(frozen=True, kw_only=True)
class Placement:
    """How the ranks of one node shared its cores."""

    ranks_per_node: int
    threads_per_rank: int
    node_cores: int
    """Usable physical cores of a node."""
    other_threads: float = 0.0
    """Runnable threads of other processes on the node, measured (``other_threads``)."""

    @property
    def cores_per_rank(self) -> float:
        """Core-equivalents a rank gets: its threads, or its fair share of a node whose
        runnable threads (the job's and other processes') outnumber its cores."""
        threads = self.ranks_per_node * self.threads_per_rank + self.other_threads
        return self.threads_per_rank * min(1.0, self.node_cores / threads)

    @property
    def core_share(self) -> float:
        """The fraction of a core each runnable thread gets: 1 where the node has a core
        for each, less where they time-slice."""
        return self.cores_per_rank / max(self.threads_per_rank, 1)

    @property
    def active_cores(self) -> int:
        """Cores busy at once on a node."""
        return min(self.ranks_per_node * self.threads_per_rank, self.node_cores)


@dataclass(frozen=True, kw_only=True)
class RunInputs:
    run_dir: str
    world_size: int
    nodes: int
    placement: Placement
    per_rank_batch: float
    """Samples per rank per step."""
    compute_ms: float
    """forward + backward + optimizer per step, mean over ranks."""
    compute_cv: float
    """Standard deviation / mean of the per-step compute time."""
    backward_ms: float
    data_ms: float
    other_ms: float
    exposed_ms: float
    """Exposed gradient transfer per step: the least comm_wait over the ranks."""
    waiting_ms: float
    """comm_wait above that least one, mean over ranks: waiting for late ranks."""
    step_ms: float
    samples_per_s: float
    buckets: tuple[int, ...]
    """Bytes of each gradient allreduce of one step, in issue order."""
    transfer_fit: AlphaBetaFit | None
    """α-β of the gradient allreduces' transfer (after the last rank arrived); None with
    one rank; from a single bucket size, all bandwidth (``alpha_beta.bandwidth_fit``)."""
    peak_memory_bytes: int | None
    precision: str
    cost: ModelCost | None
    """FLOPs and bytes per sample of a bench run's model; None for scripts, or where torch
    is missing and nothing was counted before."""
    no_cost: str = SCRIPT_MODEL_UNKNOWN
    """Why ``cost`` is None, in words (``bench.flops.why_no_flops``)."""
    hardware: dict[str, Any]
    """The run's hardware facts (run.json)."""


def cpu_share(run: Run) -> float | None:
    """CPU time / wall time of the ranks' processes, mean over ranks (cores they got)."""
    shares = [
        m.cpu_s / (m.end_time - m.start_time)
        for m in run.ranks.values()
        if m.cpu_s is not None and m.end_time is not None and m.end_time > m.start_time
    ]
    return float(np.mean(shares)) if shares else None


def other_threads(placement: Placement, share: float | None) -> float:
    """Runnable threads of other processes, from the share of the cores the ranks got.

    Linux shares a full node's cores equally between runnable threads: a rank of t threads
    gets ``t · K / (k t + N)`` cores, so ``N = K t / share − k t``. Only a node the job
    filled by itself (k t ≥ K) says this: on a node with idle cores, a rank that used less
    than its cores may simply have waited (for data, for the network).
    """
    k, t, cores = placement.ranks_per_node, placement.threads_per_rank, placement.node_cores
    if share is None or share <= 0 or k * t < cores:
        return 0.0
    return max(0.0, cores * t / share - k * t)


def ran_share(run: Run) -> float | None:
    """CPU time / (CPU time + run-queue wait) of the ranks' threads, mean over ranks: the
    share of a core a runnable thread got; None where a rank did not record its wait."""
    metas = list(run.ranks.values())
    if not metas or any(m.cpu_s is None or m.runqueue_wait_s is None for m in metas):
        return None
    shares = [
        m.cpu_s / (m.cpu_s + m.runqueue_wait_s)
        for m in metas
        if m.cpu_s is not None and m.runqueue_wait_s is not None and m.cpu_s > 0
    ]
    return float(np.mean(shares)) if shares else None


def waited_threads(placement: Placement, share: float | None) -> float:
    """Runnable threads of other processes, from the share of a core each runnable thread
    got (``ran_share``): ``K / (k t + N)``, so ``N = K / share − k t``.

    For ranks of several threads: their CPU share says nothing, since outside parallel ops
    (start-up, the Python loop, serial ops) one thread of t runs and the others sleep; a
    16-thread rank on a quiet 16-core node used 3.3 cores on average (H100, 2026-11-28),
    which ``other_threads`` took for 62 other threads. The run-queue wait counts only
    threads that were ready to run and had no core.
    """
    k, t, cores = placement.ranks_per_node, placement.threads_per_rank, placement.node_cores
    if share is None or share <= 0:
        return 0.0
    return max(0.0, cores / min(share, 1.0) - k * t)


def _placement(run: Run, analysis: RunAnalysis) -> Placement:
    meta = run.meta
    hardware = meta.hardware
    cores = [hardware.get(k) for k in ("physical_cores", "usable_cores")]
    known = [c for c in cores if isinstance(c, int) and c > 0]
    threads = [t for t in (rank_threads(m) for m in run.ranks.values()) if t]
    per_node = meta.nproc_per_node or max(1, analysis.world_size // max(meta.nnodes, 1))
    placement = Placement(
        ranks_per_node=per_node,
        threads_per_rank=max(threads) if threads else 1,
        node_cores=min(known) if known else per_node,
    )
    if placement.threads_per_rank > 1:
        other = waited_threads(placement, ran_share(run))
    else:
        other = other_threads(placement, cpu_share(run))
    return replace(placement, other_threads=other)


def _buckets(run: Run) -> tuple[int, ...]:
    """Gradient allreduce sizes of rank 0's last measured step, in issue order."""
    rows = run.events.of_kind(Kind.COLLECTIVE)
    rows = rows.select(rows.where("tag", GRADIENTS) & (rows.rank == rows.rank.min()))
    steps = measured_steps(run.events, run.meta.warmup_steps).rows
    if len(rows) == 0 or len(steps) == 0:
        return ()
    mine = rows.select(rows.step == int(steps.step.max()))
    mine = mine if len(mine) else rows.select(rows.step == int(rows.step.max()))
    order = np.argsort(mine.start_ns, kind="stable")
    return tuple(int(b) for b in mine.nbytes[order])


def _transfer_fit(analysis: RunAnalysis) -> AlphaBetaFit | None:
    cross = analysis.cross_rank
    if cross is None:
        return None
    points = [
        (w.nbytes, w.transfer_avg_us * 1e-6)
        for w in cross.waits
        if w.tag == GRADIENTS and w.transfer_avg_us > 0
    ]
    if not points:
        return None
    if len({n for n, _ in points}) == 1:
        time_s = _mean([t for _, t in points])
        return bandwidth_fit("all_reduce", "run", analysis.world_size, points[0][0], time_s)
    sizes, times = zip(*points, strict=True)
    return fit_alpha_beta("all_reduce", "run", analysis.world_size, list(sizes), list(times))


def _compute_cv(run: Run) -> float:
    events, warmup = run.events, run.meta.warmup_steps
    phases = events.of_kind(Kind.PHASE)
    phases = phases.select(phases.step >= warmup)
    mask = np.isin(phases.name, [phases.symbols.id_of(p) for p in ("forward", "backward")])
    keys = (phases.rank[mask].astype(np.int64) << 32) + phases.step[mask].astype(np.int64)
    _, slot = np.unique(keys, return_inverse=True)
    values = np.bincount(slot.reshape(-1), weights=phases.dur_ns[mask].astype(np.float64))
    return float(values.std() / values.mean()) if len(values) > 1 and values.mean() > 0 else 0.0


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else 0.0


def _peak_memory(analysis: RunAnalysis) -> int | None:
    steps = analysis.steps
    peaks = [m.peak_bytes for r in steps.ranks for m in r.memory] if steps else []
    return max(peaks) if peaks else None


def run_inputs(run_dir: Path | str) -> RunInputs:
    """Measure a run directory; a run with no measured step is a ValueError."""
    rec = Recording.load(run_dir)
    run, analysis = rec.run, rec.analysis
    times = rank_times(analysis)
    if analysis.steps is None or not times or not analysis.steps.samples_per_s:
        raise ValueError(f"{run_dir}: no measured step with samples (probe off or no step)")
    phase = {p: _mean([t.phases.get(p, 0.0) for t in times]) for p in
             ("data", "backward", "comm_wait")}  # fmt: skip
    compute = _mean([t.compute_ms or 0.0 for t in times])
    step = _mean([t.step_ms for t in times])
    cross = analysis.cross_rank
    overlap = cross.overlap if cross is not None else None
    exposed = phase["comm_wait"]
    if overlap is not None and overlap.exposed_transfer_ms_per_step is not None:
        exposed = overlap.exposed_transfer_ms_per_step
    accounted = phase["data"] + compute + phase["comm_wait"]
    return RunInputs(
        run_dir=str(run_dir),
        world_size=analysis.world_size,
        nodes=max(run.meta.nnodes, 1),
        placement=_placement(run, analysis),
        per_rank_batch=_mean([t.samples_per_step or 0.0 for t in times]),
        compute_ms=compute,
        compute_cv=_compute_cv(run),
        backward_ms=phase["backward"],
        data_ms=phase["data"],
        other_ms=max(step - accounted, 0.0),
        exposed_ms=exposed,
        waiting_ms=max(phase["comm_wait"] - exposed, 0.0),
        step_ms=step,
        samples_per_s=analysis.steps.samples_per_s,
        buckets=_buckets(run),
        transfer_fit=_transfer_fit(analysis),
        peak_memory_bytes=_peak_memory(analysis),
        precision="bf16" if run.meta.options.get("bf16") else "fp32",
        cost=model_cost(run.meta.workload, run.meta.options),
        no_cost=why_no_flops(run.meta.workload, run.meta.options),
        hardware=dict(run.meta.hardware),
    )
