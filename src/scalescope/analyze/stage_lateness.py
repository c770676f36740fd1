"""On a pipeline, who keeps whom waiting: lateness judged between stages along the sends
and recvs, and between ranks as replicas only within a stage.

Ranks of different stages do different work, so their arrivals at a ``(group, seq)``
instance say nothing about who is slow; and a send or recv does not queue behind the rank's
earlier ops on its group as a collective does (``matching``'s arrival), so a pair's
instance there reads an asynchronous send, completed when the rank waited for it at the end
of its step, as a rank arriving a step late. Here instead:

- a pair's *late* side is the one issued later (common clock); the time it kept its peer
  waiting is the peer's blocked time before that issue (``P2PSides.blocked_wait_ns``), laid
  on the late rank's clock just before its issue, cut at the start of its step;
- of that window, the time the late rank was itself blocked waiting (for a peer, or in a
  blocking collective) is not its own: a light stage that waits for a heavy one passes the
  wait on, and the heavy stage is late at its own pairs;
- a rank's lateness in a measured step is the union of its windows less its own waiting in
  them: never more than the step. A pair counts as one it was clearly late at when its own
  part of the window exceeds the tie tolerance;
- a stage that waits for a heavier one (more compute per microbatch, by more than
  ``HEAVIER_PCT``), directly or through the stages it waits for, is late at no pair: in a
  pipeline held to the pace of its bound stage every other stage waits each microbatch,
  and a light stage's compute just after its input came late only passes that lateness
  on (speeding it up would leave its peer waiting for the bound stage as long);
- a collective instance is judged as today only where every rank in it holds one stage
  (replicas); one that spans stages is not judged.

The straggler of a pipeline is a rank of the bound stage (``PipelineAnalysis.bound_stage``:
the most compute per microbatch) or none.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.sorting import index_in
from scalescope.analyze.layouts.p2p import P2PSides, analyze_p2p
from scalescope.analyze.layouts.pipeline import PipelineAnalysis, analyze_pipeline
from scalescope.analyze.ranks.matching import Matched
from scalescope.analyze.steps.step_slots import StepSlots, SyncWaits
from scalescope.events import Run

KEY_BITS = 62
"""A slot's number and a time in it share one int64 key of this many bits."""
HEAVIER_PCT = 5.0
"""A stage this much costlier per microbatch than another is the heavier one; closer costs
are equal (measurement noise)."""


@dataclass(frozen=True)
class StageLayout:
    """Each rank's pipeline stage and the stage that bounds the pipeline."""

    stage: np.ndarray
    """Per rank number: its stage, -1 for a rank the pipeline does not name."""
    bound_stage: int
    cost: np.ndarray
    """Per stage: its compute per microbatch (ms; the slowest of its ranks)."""

    def of(self, ranks: np.ndarray) -> np.ndarray:
        ranks = np.asarray(ranks, dtype=np.int64)
        inside = (ranks >= 0) & (ranks < len(self.stage))
        return np.where(inside, self.stage[np.where(inside, ranks, 0)], -1)


def stage_layout(
    run: Run,
    warmup_steps: int,
    slots: StepSlots,
    sides: P2PSides | None,
    pipeline: PipelineAnalysis | None = None,
) -> StageLayout | None:
    """The run's stages from ``pipeline`` when the caller has it, else as the pipeline
    analysis finds them (the ranks' metas, or a chain of sends and recvs); None off a
    pipeline."""
    if pipeline is None:
        metas = {r: m.pipeline for r, m in run.ranks.items() if m.pipeline is not None}
        if not metas and sides is None:
            return None
        p2p = analyze_p2p(run.events, sides, slots) if sides is not None and not metas else None
        pipeline = analyze_pipeline(run.events, metas, warmup_steps, p2p)
    if pipeline is None or pipeline.stages < 2:
        return None
    stage = np.full(max(f.rank for f in pipeline.ranks) + 1, -1, dtype=np.int64)
    cost = np.zeros(max(f.stage for f in pipeline.ranks) + 1)
    for f in pipeline.ranks:
        stage[f.rank] = f.stage
        cost[f.stage] = max(cost[f.stage], f.compute_ms_per_microbatch)
    return StageLayout(stage, pipeline.bound_stage, cost)


def replica_instances(m: Matched, layout: StageLayout) -> np.ndarray:
    """Per instance of ``m``: every rank in it holds the same (known) stage."""
    if m.num_instances == 0:
        return np.zeros(0, dtype=bool)
    stage = layout.of(m.rank)
    low = np.minimum.reduceat(stage, m.first)
    high = np.maximum.reduceat(stage, m.first)
    return (low == high) & (low >= 0)


@dataclass(frozen=True)
class StageLateness:
    """Per rank of ``slots.ranks``, over the pairs between stages of measured steps."""

    late_ns: np.ndarray
    """Its lateness: per step, the union of its windows less its own waiting in them."""
    late_count: np.ndarray
    """Pairs it was clearly late at."""
    clear: np.ndarray
    """Pairs it took part in that had a clearly late side."""


@dataclass(frozen=True)
class _Windows:
    """The late sides' windows on their own clocks, in their slots."""

    side: np.ndarray
    """The late side's index in the sides."""
    peer_side: np.ndarray
    """Its peer's, the side that waited."""
    slot: np.ndarray
    start: np.ndarray
    end: np.ndarray


def _waits_for_heavier(layout: StageLayout, waiting: np.ndarray, late: np.ndarray) -> np.ndarray:
    """Per stage: it waits for a heavier stage, directly (``waiting`` waited for ``late``)
    or through the stages it waits for (the closure over a few stages)."""
    n = len(layout.cost)
    reach = np.eye(n, dtype=bool)
    ok = (waiting >= 0) & (late >= 0)
    reach[waiting[ok], late[ok]] = True
    while True:
        wider = (reach.astype(np.int64) @ reach.astype(np.int64)) > 0
        if (wider == reach).all():
            break
        reach = wider
    heaviest = np.where(reach, layout.cost[None, :], 0.0).max(axis=1)
    return heaviest > layout.cost * (1 + HEAVIER_PCT / 100)


def _windows(sides: P2PSides, slots: StepSlots, layout: StageLayout, tie_ns: int) -> _Windows:
    """The windows of the pairs between stages in measured steps, except those of a stage
    that waits for a heavier one."""
    pairs = np.arange(sides.pairs)
    send, recv = pairs, pairs + sides.pairs
    recv_late = sides.issue_ns[recv] > sides.issue_ns[send]
    late = np.where(recv_late, recv, send)
    early = np.where(recv_late, send, recv)
    slot = slots.slot_of(sides.rank[late], sides.step[late])
    kept = sides.blocked_wait_ns[early].astype(np.int64)
    late_stage, early_stage = layout.of(sides.rank[late]), layout.of(sides.rank[early])
    across = (late_stage != early_stage) & (late_stage >= 0) & (early_stage >= 0)
    keep = across & (slot >= 0) & (kept > 0) & (sides.issue_ns[late] != sides.issue_ns[early])
    waited = keep & (kept > tie_ns)
    lighter = _waits_for_heavier(layout, early_stage[waited], late_stage[waited])
    keep &= ~lighter[np.maximum(late_stage, 0)]
    late, early, slot, kept = late[keep], early[keep], slot[keep], kept[keep]
    end = sides.local_issue_ns[late].astype(np.int64)
    start = end - kept
    if slots.start_ns is not None:
        start = np.maximum(start, slots.start_ns[slot])
    return _Windows(late, early, slot, start, np.maximum(start, end))


def _union(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The intervals [a, b) merged: sorted, disjoint."""
    order = np.argsort(a, kind="stable")
    a, b = a[order], b[order]
    if len(a) == 0:
        return a, b
    reach = np.maximum.accumulate(b)
    first = np.flatnonzero(np.r_[True, a[1:] > reach[:-1]])
    return a[first], np.maximum.reduceat(b, first)


def _covered_before(u: tuple[np.ndarray, np.ndarray], x: np.ndarray) -> np.ndarray:
    """Length of the merged intervals ``u`` that lies before each key ``x``."""
    if len(u[0]) == 0:
        return np.zeros(len(x), dtype=np.int64)
    covered = np.r_[0, np.cumsum(u[1] - u[0])]
    i = np.searchsorted(u[0], x, side="right") - 1
    j = np.maximum(i, 0)
    inside = np.clip(x - u[0][j], 0, u[1][j] - u[0][j])
    return np.where(i >= 0, covered[j] + inside, 0)


def _own_parts(w: _Windows, waits: SyncWaits, slots: StepSlots) -> tuple[np.ndarray, np.ndarray]:
    """Per window, its own part (less the late rank's waiting in it); per slot, the union
    of its windows less that waiting. Times become one key per slot (the slot's number
    above the time since the slot's first window), so each slot's intervals lie apart."""
    n = len(slots.keys)
    mine = (waits.wait_ns > 0) & (np.bincount(w.slot, minlength=n) > 0)[waits.slot]
    v_slot = waits.slot[mine]
    v_start = waits.start_ns[mine].astype(np.int64)
    v_end = v_start + waits.wait_ns[mine].astype(np.int64)
    base = np.full(n, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(base, w.slot, w.start)
    longest = int((w.end - base[w.slot]).max(initial=0))
    shift = min(max(longest.bit_length(), 1), KEY_BITS - max(n, 1).bit_length())
    cap = (1 << shift) - 1

    def key(slot: np.ndarray, t: np.ndarray) -> np.ndarray:
        return (slot.astype(np.int64) << shift) + np.clip(t - base[slot], 0, cap)

    waited = _union(key(v_slot, v_start), key(v_slot, v_end))
    wa, wb = key(w.slot, w.start), key(w.slot, w.end)
    own = (wb - wa) - (_covered_before(waited, wb) - _covered_before(waited, wa))
    ua, ub = _union(wa, wb)
    merged = (ub - ua) - (_covered_before(waited, ub) - _covered_before(waited, ua))
    per_slot = np.bincount(ua >> shift, weights=merged.astype(np.float64), minlength=n)
    return own, per_slot


def stage_lateness(
    sides: P2PSides | None,
    slots: StepSlots,
    layout: StageLayout,
    waits: SyncWaits | None,
    tie_ns: int,
) -> StageLateness:
    """Every rank's lateness toward the other stages (module doc); ``waits``: the ranks'
    waiting in sends, recvs and blocking collectives (``joined``)."""
    ranks = slots.ranks
    zeros = np.zeros(len(ranks))
    if sides is None or sides.pairs == 0 or len(slots.keys) == 0:
        return StageLateness(zeros, zeros.astype(np.int64), zeros.astype(np.int64))
    w = _windows(sides, slots, layout, tie_ns)
    if len(w.slot) == 0:
        return StageLateness(zeros, zeros.astype(np.int64), zeros.astype(np.int64))
    if waits is None:
        empty = np.zeros(0, dtype=np.int64)
        waits = SyncWaits(empty, empty, empty, empty, np.zeros(0))
    own, per_slot = _own_parts(w, waits, slots)
    clear = own > tie_ns

    def count(rank: np.ndarray) -> np.ndarray:
        return np.bincount(index_in(ranks, rank), minlength=len(ranks))

    late_rank, peer_rank = sides.rank[w.side][clear], sides.rank[w.peer_side][clear]
    return StageLateness(
        late_ns=slots.per_rank_sum(per_slot),
        late_count=count(late_rank),
        clear=count(late_rank) + count(peer_rank),
    )


@dataclass(frozen=True)
class StageJudging:
    """How a pipeline's lateness is judged: its layout, the instances of ``Matched``
    compared as replicas, and the ranks' lateness between stages."""

    layout: StageLayout
    replicas: np.ndarray
    between: StageLateness


def judge_stages(
    run: Run,
    warmup_steps: int,
    slots: StepSlots,
    sides: P2PSides | None,
    m: Matched | None,
    waits: SyncWaits | None,
    tie_ns: int,
    pipeline: PipelineAnalysis | None = None,
) -> StageJudging | None:
    """The judging of a pipeline's lateness (module doc); None off a pipeline."""
    layout = stage_layout(run, warmup_steps, slots, sides, pipeline)
    if layout is None:
        return None
    replicas = replica_instances(m, layout) if m is not None else np.zeros(0, dtype=bool)
    return StageJudging(layout, replicas, stage_lateness(sides, slots, layout, waits, tie_ns))


def judged_lateness(
    ranks: np.ndarray, m: Matched, inst_ok: np.ndarray, staged: StageJudging | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per rank of ``ranks``: the instances with a clearly-last rank it took part in, those
    it was last at, its lateness (ns), over the instances of ``inst_ok``. On a pipeline
    (``staged``): only the instances of replicas of one stage, and the pairs between
    stages as judged there."""
    judged = inst_ok if staged is None else inst_ok & staged.replicas
    last = judged & (m.last_rank >= 0)

    def per_rank(of: np.ndarray, weights: np.ndarray | None = None) -> np.ndarray:
        return np.bincount(index_in(ranks, of), weights=weights, minlength=len(ranks))

    clear = per_rank(m.rank[last[m.inst]])
    count = per_rank(m.last_rank[last])
    late_ns = per_rank(m.last_rank[last], m.lateness_ns[last].astype(np.float64))
    if staged is None:
        return clear, count, late_ns
    b = staged.between
    return clear + b.clear, count + b.late_count, late_ns + b.late_ns
