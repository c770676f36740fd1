"""Pipeline stages: each stage's compute per microbatch, its bubble against the schedule's
theory, the stage that bounds the pipeline, and which blocks to move.

A rank's stage comes from its meta (``PipelineMeta``, read from
``torch.distributed.pipelining``) or, for a hand-written loop, from the point-to-point
pairs: ranks linked by sends and recvs in a chain, stage 0 the end of the chain that sends
before it receives in a step.

Per stage, per measured step (ms): ``compute`` is its forward and backward phases (the sum
of its microbatches'), ``transfer`` its time blocked in sends and recvs after the peer
arrived (analyze/layouts/p2p.py), ``wait`` its time blocked before. The bubble is the step's time
in which the stage neither computes (forward, backward, optimizer) nor moves data:
step − compute − optimizer − transfer; a wait for the peer is bubble.

Theory: (p − 1)/(m + p − 1) of the step for GPipe and 1F1B, (p − 1)/(v·m + p − 1) for an
interleaved schedule whose p ranks hold v stages each (p·v stages, m microbatches), 0 for
a zero-bubble schedule. A rank holding several stages is reported as its first stage, its
figures those of all the stages it holds; no block move is proposed there (its stages'
borders are not one).

Proposal (analyze/layouts/block_move.py): the bound stage (the largest compute per
microbatch) gives blocks at its border to a neighbour, k at a time, costed by the blocks'
measured forward + backward; the schedule is replayed (analyze/layouts/schedule_replay.py)
with the measured times before and after each move, and the shortest replayed step wins.
The measured figures per stage are analyze/layouts/stage_figures.py's.

Costs (analyze/layouts/stage_fixes.py): the schedule replayed with the bound stage at its
peers' pace (``paced``) and over twice the microbatches (``doubled``), each against the replay
with the measured times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.layouts.block_move import (
    BlockMove,
    propose_move,
    stage_costs,
)
from scalescope.analyze.layouts.measured_steps import MeasuredSteps
from scalescope.analyze.layouts.p2p import P2PAnalysis
from scalescope.analyze.layouts.schedule_replay import schedule_order, zero_bubble
from scalescope.analyze.layouts.stage_figures import StageFigures, stage_figures
from scalescope.analyze.layouts.stage_fixes import (
    ReplayedFix,
    at_peers_pace,
    pipeline_replay,
    twice_the_microbatches,
)
from scalescope.events import EventTable, Kind
from scalescope.events.run import PipelineMeta


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
    paced: ReplayedFix | None = None
    """The bound stage at its peers' pace, replayed (analyze/layouts/stage_fixes.py)."""
    doubled: ReplayedFix | None = None
    """Twice the microbatches of the same batch, replayed."""

    @property
    def pipeline_ranks(self) -> int:
        """p: the ranks one microbatch passes through (the stages over v)."""
        return self.stages // max(self.chunks_per_rank, 1)

    @property
    def shape(self) -> str:
        """``4 stages``, or ``4 stages on 2 ranks`` where each rank holds several."""
        if self.chunks_per_rank > 1:
            return f"{self.stages} stages on {self.pipeline_ranks} ranks"
        return f"{self.stages} stages"


def theory_bubble_pct(ranks: int, microbatches: int, chunks: int = 1) -> float:
    """(p − 1)/(v·m + p − 1), in %: p ranks in the pipeline, v stages each."""
    if ranks < 2 or microbatches < 1:
        return 0.0
    return 100 * (ranks - 1) / (chunks * microbatches + ranks - 1)


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
        chunks = max(len(any_meta.stages_held), 1)
        of_rank = {r: meta.stage for r, meta in metas.items()}
    else:
        chain = infer_chain(events, p2p, warmup)
        if chain is None:
            return None
        of_rank, stages, schedule, chunks = chain, len(chain), "inferred", 1
        m = _forwards_per_step(events, min(chain, key=chain.__getitem__), warmup)
    if stages < 2:
        return None
    figures = stage_figures(events, of_rank, m, warmup, p2p, metas)
    costs = stage_costs(figures)
    step_ms = sum(f.step_ms for f in figures) / len(figures)
    theory = 0.0 if zero_bubble(schedule) else theory_bubble_pct(stages // chunks, m, chunks)
    bound = max(costs, key=lambda s: costs[s])
    order = (_chain_order(events, of_rank, m, warmup) if schedule == "inferred"
             else schedule_order(schedule, chunks))  # fmt: skip
    replay = pipeline_replay(figures, m, step_ms, order, chunks, p2p)
    return PipelineAnalysis(
        stages=stages,
        microbatches=m,
        schedule=schedule,
        chunks_per_rank=chunks,
        theory_bubble_pct=theory,
        ranks=figures,
        bound_stage=bound,
        step_ms=step_ms,
        move=propose_move(figures, m, step_ms, schedule, p2p) if chunks == 1 else None,
        paced=at_peers_pace(replay, bound) if replay is not None else None,
        doubled=twice_the_microbatches(replay) if replay is not None else None,
    )


def _forwards_per_step(events: EventTable, rank: int, warmup: int) -> int:
    """Microbatches of a hand-written loop: the forward phases per measured step."""
    measured = MeasuredSteps.of(events, [rank], warmup)
    rows = events.of_kind(Kind.PHASE)
    rows = rows.select(rows.name == events.symbols.id_of("forward"))
    hit, _ = measured.rows_in(rows)
    return max(round(int(hit.sum()) / max(int(measured.count[0]), 1)), 1)


def _chain_order(events: EventTable, of_rank: dict[int, int], m: int, warmup: int) -> str:
    """A hand-written chain's order: ``gpipe`` where the first stage runs all of a measured
    step's ``m`` forwards before its first backward, else ``1f1b``."""
    first = min(of_rank, key=of_rank.__getitem__)
    fwd, bwd = events.symbols.id_of("forward"), events.symbols.id_of("backward")
    phases = (events.name == fwd) | (events.name == bwd)
    rows = events.select(
        (events.kind == Kind.PHASE) & (events.rank == first) & (events.step >= warmup) & phases
    )
    if len(rows) == 0:
        return "1f1b"
    step = int(rows.step.min())
    mine = rows.select(rows.step == step)
    names = mine.name[np.argsort(mine.start_ns, kind="stable")]
    before = int(np.argmax(names == bwd)) if (names == bwd).any() else len(names)
    return "gpipe" if before >= m else "1f1b"


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
