"""Pipeline stages: each stage's compute per microbatch, its bubble against the schedule's
theory, the stage that bounds the pipeline, and which blocks to move.

A rank's stage comes from its meta (``PipelineMeta``, read from
``torch.distributed.pipelining``) or, for a hand-written loop, from the point-to-point
pairs: ranks linked by sends and recvs in a chain, stage 0 the end of the chain that sends
before it receives in a step.

Per stage, per measured step (ms): ``compute`` is its forward and backward phases (the sum
of its microbatches'), ``transfer`` its time blocked in sends and recvs after the peer
arrived (analyze/p2p.py), ``wait`` its time blocked before. The bubble is the step's time
in which the stage neither computes (forward, backward, optimizer) nor moves data:
step − compute − optimizer − transfer; a wait for the peer is bubble.

Theory: (p − 1)/(m + p − 1) of the step for GPipe and 1F1B, (p − 1)/(v·m + p − 1) for an
interleaved schedule with v stages per rank (p stages, m microbatches).

Proposal: the bound stage (the largest compute per microbatch) gives blocks at its border to
a neighbour, k at a time, costed by the blocks' measured forward + backward; the move that
leaves the smallest slowest stage wins. Predicted step = measured step − (m + p − 1) × (the
slowest stage's compute per microbatch now − after the move): the step of a p-stage pipeline
is (m + p − 1) slots of the slowest stage plus transfers and the optimizer, which the move
leaves as they are.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.p2p import P2PAnalysis
from scalescope.events import EventTable, Kind
from scalescope.events.run import PipelineMeta


@dataclass(frozen=True)
class StageFigures:
    """One rank's stage, means per measured step (ms)."""

    rank: int
    stage: int
    step_ms: float
    forward_ms: float
    backward_ms: float
    optimizer_ms: float
    transfer_ms: float
    wait_ms: float
    """Blocked in sends and recvs waiting for the peer (part of the bubble)."""
    bubble_ms: float
    bubble_pct: float
    """% of the step."""
    forward_ms_per_microbatch: float
    backward_ms_per_microbatch: float
    peak_memory_bytes: int | None
    blocks: tuple[BlockCost, ...] = ()

    @property
    def compute_ms_per_microbatch(self) -> float:
        return self.forward_ms_per_microbatch + self.backward_ms_per_microbatch


@dataclass(frozen=True)
class BlockCost:
    """A block's forward and backward per measured step (ms, all microbatches)."""

    name: str
    forward_ms: float
    backward_ms: float


@dataclass(frozen=True)
class BlockMove:
    """Move ``blocks`` blocks (``names``) from stage ``source`` to stage ``target``."""

    source: int
    target: int
    blocks: int
    names: tuple[str, ...]
    slowest_ms_per_microbatch: float
    """The slowest stage's compute per microbatch after the move."""
    predicted_step_ms: float


@dataclass(frozen=True)
class PipelineAnalysis:
    stages: int
    microbatches: int
    schedule: str
    """The schedule's class name; ``inferred`` for a chain read from the sends and recvs."""
    chunks_per_rank: int
    """v: stages a rank holds (interleaved schedules)."""
    theory_bubble_pct: float
    ranks: tuple[StageFigures, ...]
    bound_stage: int
    """The stage with the largest compute per microbatch."""
    step_ms: float
    """The mean of the ranks' measured steps."""
    move: BlockMove | None


def theory_bubble_pct(stages: int, microbatches: int, chunks: int = 1) -> float:
    """(p − 1)/(v·m + p − 1), in %."""
    if stages < 2 or microbatches < 1:
        return 0.0
    return 100 * (stages - 1) / (chunks * microbatches + stages - 1)


def _phase_ms(events: EventTable, rank: int, steps: np.ndarray, name: str) -> float:
    rows = events.select(
        (events.kind == Kind.PHASE)
        & (events.rank == rank)
        & (events.name == events.symbols.id_of(name))
        & np.isin(events.step, steps)
    )
    return float(rows.dur_ns.sum()) / 1e6 / max(len(steps), 1)


def _measured_steps(events: EventTable, rank: int, warmup: int) -> tuple[np.ndarray, float]:
    """The rank's measured step numbers and their mean duration (ms)."""
    rows = events.select((events.kind == Kind.STEP) & (events.rank == rank))
    keep = rows.step >= warmup
    if not keep.any():
        keep = np.ones(len(rows), dtype=bool)
    dur = rows.dur_ns[keep]
    return rows.step[keep], float(dur.mean()) / 1e6 if len(dur) else 0.0


def _peak(events: EventTable, rank: int, steps: np.ndarray) -> int | None:
    rows = events.select(
        (events.kind == Kind.MEMORY) & (events.rank == rank) & np.isin(events.step, steps)
    )
    return int(rows.nbytes.max()) if len(rows) else None


def _blocks(meta: PipelineMeta | None, steps: np.ndarray) -> tuple[BlockCost, ...]:
    if meta is None:
        return ()

    def mean_ms(values: list[int]) -> float:
        picked = [values[s] for s in steps if s < len(values)]
        return sum(picked) / len(picked) / 1e6 if picked else 0.0

    return tuple(
        BlockCost(b.name, mean_ms(b.forward_ns), mean_ms(b.backward_ns)) for b in meta.blocks
    )


def stage_figures(
    events: EventTable,
    rank: int,
    stage: int,
    microbatches: int,
    warmup: int,
    p2p: P2PAnalysis | None,
    meta: PipelineMeta | None = None,
) -> StageFigures:
    steps, step_ms = _measured_steps(events, rank, warmup)
    fwd, bwd = (_phase_ms(events, rank, steps, n) for n in ("forward", "backward"))
    opt = _phase_ms(events, rank, steps, "optimizer")
    mine = [r for r in (p2p.ranks if p2p else ()) if r.rank == rank]
    transfer = mine[0].transfer_ms_per_step if mine else 0.0
    wait = mine[0].wait_ms_per_step if mine else 0.0
    bubble = max(step_ms - fwd - bwd - opt - transfer, 0.0)
    m = max(microbatches, 1)
    return StageFigures(
        rank=rank,
        stage=stage,
        step_ms=step_ms,
        forward_ms=fwd,
        backward_ms=bwd,
        optimizer_ms=opt,
        transfer_ms=transfer,
        wait_ms=wait,
        bubble_ms=bubble,
        bubble_pct=100 * bubble / step_ms if step_ms else 0.0,
        forward_ms_per_microbatch=fwd / m,
        backward_ms_per_microbatch=bwd / m,
        peak_memory_bytes=_peak(events, rank, steps),
        blocks=_blocks(meta, steps),
    )


def _stage_costs(figures: tuple[StageFigures, ...]) -> dict[int, float]:
    """Compute per microbatch of each stage (the slowest of its ranks)."""
    out: dict[int, float] = {}
    for f in figures:
        out[f.stage] = max(out.get(f.stage, 0.0), f.compute_ms_per_microbatch)
    return out


def _border_blocks(f: StageFigures, toward_next: bool, k: int) -> tuple[BlockCost, ...]:
    """The ``k`` blocks of ``f`` at its border with the next stage (its last) or the
    previous (its first)."""
    return f.blocks[-k:] if toward_next else f.blocks[:k]


def propose_move(
    figures: tuple[StageFigures, ...], microbatches: int, step_ms: float
) -> BlockMove | None:
    """The move of border blocks from the bound stage to a neighbour that leaves the
    smallest slowest stage; None when no move makes it smaller (or no block costs)."""
    costs = _stage_costs(figures)
    if len(costs) < 2:
        return None
    bound = max(costs, key=lambda s: costs[s])
    source = next(f for f in figures if f.stage == bound)
    m, p = max(microbatches, 1), len(costs)
    best: BlockMove | None = None
    now = costs[bound]
    for target in (bound - 1, bound + 1):
        if target not in costs:
            continue
        for k in range(1, len(source.blocks)):
            moved = _border_blocks(source, target > bound, k)
            per_mb = sum(b.forward_ms + b.backward_ms for b in moved) / m
            after = {**costs, bound: now - per_mb, target: costs[target] + per_mb}
            slowest = max(after.values())
            if slowest >= now - 1e-9 or (best and slowest >= best.slowest_ms_per_microbatch):
                continue
            best = BlockMove(
                source=bound,
                target=target,
                blocks=k,
                names=tuple(b.name for b in moved),
                slowest_ms_per_microbatch=slowest,
                predicted_step_ms=step_ms - (m + p - 1) * (now - slowest),
            )
    return best


def analyze_pipeline(
    events: EventTable,
    metas: dict[int, PipelineMeta],
    warmup: int,
    p2p: P2PAnalysis | None,
) -> PipelineAnalysis | None:
    """The pipeline's figures from the ranks' metas, else from a chain of p2p pairs; None
    without a pipeline."""
    if metas:
        any_meta = next(iter(metas.values()))
        stages, m, schedule = any_meta.stages, any_meta.microbatches, any_meta.schedule
        chunks = max(len(any_meta.stages_held), 1) if "Interleaved" in schedule else 1
        of_rank = {r: meta.stage for r, meta in metas.items()}
    else:
        chain = infer_chain(events, p2p, warmup)
        if chain is None:
            return None
        of_rank, stages, schedule, chunks = chain, len(chain), "inferred", 1
        m = _forwards_per_step(events, min(chain, key=chain.__getitem__), warmup)
    if stages < 2:
        return None
    figures = tuple(
        stage_figures(events, r, s, m, warmup, p2p, metas.get(r))
        for r, s in sorted(of_rank.items())
    )
    costs = _stage_costs(figures)
    step_ms = sum(f.step_ms for f in figures) / len(figures)
    return PipelineAnalysis(
        stages=stages,
        microbatches=m,
        schedule=schedule,
        chunks_per_rank=chunks,
        theory_bubble_pct=theory_bubble_pct(stages, m, chunks),
        ranks=figures,
        bound_stage=max(costs, key=lambda s: costs[s]),
        step_ms=step_ms,
        move=propose_move(figures, m, step_ms),
    )


def _forwards_per_step(events: EventTable, rank: int, warmup: int) -> int:
    """Microbatches of a hand-written loop: the forward phases per measured step."""
    steps, _ = _measured_steps(events, rank, warmup)
    rows = events.select(
        (events.kind == Kind.PHASE)
        & (events.rank == rank)
        & (events.name == events.symbols.id_of("forward"))
        & np.isin(events.step, steps)
    )
    return max(round(len(rows) / max(len(steps), 1)), 1)


def infer_chain(events: EventTable, p2p: P2PAnalysis | None, warmup: int) -> dict[int, int] | None:
    """rank -> stage for ranks whose sends and recvs form one chain (each linked to at most
    two others, both ways); stage 0 the end whose first send or recv of a measured step is
    a send. None for any other pattern."""
    if p2p is None:
        return None
    links: dict[int, set[int]] = {}
    for t in p2p.peers:
        links.setdefault(t.rank, set()).add(t.peer)
    if len(links) < 2 or any(len(n) > 2 for n in links.values()):
        return None
    ends = [r for r, n in links.items() if len(n) == 1]
    if len(ends) != 2:
        return None
    first = [r for r in ends if _sends_first(events, r, warmup)]
    if len(first) != 1:
        return None
    order, prev = [first[0]], None
    while len(order) < len(links):
        nxt = [n for n in links[order[-1]] if n != prev]
        if not nxt:
            return None
        prev = order[-1]
        order.append(nxt[0])
    return {r: i for i, r in enumerate(order)}


def _sends_first(events: EventTable, rank: int, warmup: int) -> bool:
    send, recv = events.symbols.id_of("send"), events.symbols.id_of("recv")
    rows = events.select(
        (events.kind == Kind.COLLECTIVE)
        & (events.rank == rank)
        & ((events.name == send) | (events.name == recv))
        & (events.step >= warmup)
    )
    if len(rows) == 0:
        return False
    return bool(rows.name[int(np.argmin(rows.start_ns))] == send)
