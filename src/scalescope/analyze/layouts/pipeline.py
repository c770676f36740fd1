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

from scalescope.analyze.layouts.p2p import P2PAnalysis
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
    held: tuple[int, ...] = ()
    """Every stage the rank holds, where it holds more than one (interleaved schedules)."""

    @property
    def label(self) -> str:
        """``stage 1``, or ``the rank of stages 1, 3`` for a rank holding both."""
        if self.held:
            return "the rank of stages " + ", ".join(map(str, self.held))
        return f"stage {self.stage}"

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


ZERO_BUBBLE_NAMES = ("ZeroBubble", "ZBV", "DualPipe")
"""Schedules that fill the bubble with the weight gradients' backward (ZB-H1/H2, ZB-V,
DualPipeV): none left in theory, with equal forward, input- and weight-backward times."""


def zero_bubble(schedule: str) -> bool:
    return any(name in schedule for name in ZERO_BUBBLE_NAMES)


def theory_bubble_pct(ranks: int, microbatches: int, chunks: int = 1) -> float:
    """(p − 1)/(v·m + p − 1), in %: p ranks in the pipeline, v stages each."""
    if ranks < 2 or microbatches < 1:
        return 0.0
    return 100 * (ranks - 1) / (chunks * microbatches + ranks - 1)


@dataclass(frozen=True)
class _Measured:
    """Each rank's measured steps (its STEP rows of steps >= the warm-up; all of them where
    none is), for all ranks at once: a 1,024-rank run has millions of rows, and a pass over
    them per rank was the pipeline analysis' whole cost."""

    ranks: np.ndarray
    """Ascending."""
    position: np.ndarray
    """Per rank number: its index in ``ranks``, -1 for any other."""
    count: np.ndarray
    """Per rank: measured STEP rows."""
    step_ms: np.ndarray
    keys: np.ndarray
    """The measured (rank index, step) pairs packed in one key, ascending."""
    steps_of: list[np.ndarray]
    """Per rank: its measured step numbers, as recorded."""
    span: int

    @classmethod
    def of(cls, events: EventTable, ranks: list[int], warmup: int) -> _Measured:
        ranks_arr = np.array(sorted(ranks), dtype=np.int64)
        position = np.full(max(int(events.rank.max(initial=0)), int(ranks_arr[-1])) + 1, -1)
        position[ranks_arr] = np.arange(len(ranks_arr))
        rows = events.of_kind(Kind.STEP)
        pos = position[rows.rank]
        mine = pos >= 0
        late = mine & (rows.step >= warmup)
        any_late = np.bincount(pos[late], minlength=len(ranks_arr)) > 0
        keep = np.flatnonzero(mine & (late | ~any_late[np.maximum(pos, 0)]))
        at, step = pos[keep], rows.step[keep].astype(np.int64)
        n = len(ranks_arr)
        count = np.bincount(at, minlength=n)
        total = np.bincount(at, weights=rows.dur_ns[keep].astype(np.float64), minlength=n)
        with np.errstate(invalid="ignore", divide="ignore"):
            step_ms = np.where(count > 0, total / np.maximum(count, 1) / 1e6, 0.0)
        span = int(step.max(initial=0)) + 1
        order = np.argsort(at, kind="stable")
        steps_of = np.split(step[order], np.cumsum(count)[:-1])
        return cls(ranks_arr, position, count, step_ms, np.unique(at * span + step), steps_of,
                   span)  # fmt: skip

    def rows_in(self, rows: EventTable) -> tuple[np.ndarray, np.ndarray]:
        """Of ``rows``: those of a rank's measured step, and their rank index."""
        pos = self.position[rows.rank]  # sized for every rank of the table
        inside = (pos >= 0) & (rows.step >= 0) & (rows.step < self.span)
        key = np.where(inside, pos * self.span + rows.step, -1)
        hit = inside & np.isin(key, self.keys)
        return hit, pos

    def phase_ms(self, events: EventTable, name: str) -> np.ndarray:
        """Per rank: the ``name`` phases' time per measured step (ms)."""
        rows = events.of_kind(Kind.PHASE)
        rows = rows.select(rows.name == events.symbols.id_of(name))
        hit, pos = self.rows_in(rows)
        total = np.bincount(pos[hit], weights=rows.dur_ns[hit].astype(np.float64),
                            minlength=len(self.ranks))  # fmt: skip
        return total / 1e6 / np.maximum(self.count, 1)

    def peaks(self, events: EventTable) -> list[int | None]:
        rows = events.of_kind(Kind.MEMORY)
        hit, pos = self.rows_in(rows)
        peak = np.full(len(self.ranks), np.iinfo(np.int64).min, dtype=np.int64)
        np.maximum.at(peak, pos[hit], rows.nbytes[hit].astype(np.int64))
        has = np.bincount(pos[hit], minlength=len(self.ranks)) > 0
        return [int(v) if h else None for v, h in zip(peak, has, strict=True)]


def _blocks(meta: PipelineMeta | None, steps: np.ndarray) -> tuple[BlockCost, ...]:
    if meta is None:
        return ()

    def mean_ms(values: list[int]) -> float:
        picked = np.asarray(values, dtype=np.int64)[steps[steps < len(values)]]
        return int(picked.sum()) / len(picked) / 1e6 if len(picked) else 0.0

    return tuple(
        BlockCost(b.name, mean_ms(b.forward_ns), mean_ms(b.backward_ns)) for b in meta.blocks
    )


def stage_figures(
    events: EventTable,
    of_rank: dict[int, int],
    microbatches: int,
    warmup: int,
    p2p: P2PAnalysis | None,
    metas: dict[int, PipelineMeta],
) -> tuple[StageFigures, ...]:
    """Every rank's stage figures (``of_rank``: rank -> stage), in rank order."""
    measured = _Measured.of(events, list(of_rank), warmup)
    fwd, bwd, opt = (measured.phase_ms(events, n) for n in ("forward", "backward", "optimizer"))
    peaks = measured.peaks(events)
    mine = {r.rank: r for r in (p2p.ranks if p2p else ())}
    m = max(microbatches, 1)
    out = []
    for i, rank in enumerate(measured.ranks.tolist()):
        step_ms = float(measured.step_ms[i])
        f, b, o = float(fwd[i]), float(bwd[i]), float(opt[i])
        own = mine.get(rank)
        transfer = own.transfer_ms_per_step if own else 0.0
        bubble = max(step_ms - f - b - o - transfer, 0.0)
        out.append(StageFigures(
            rank=rank, stage=of_rank[rank], step_ms=step_ms, forward_ms=f, backward_ms=b,
            optimizer_ms=o, transfer_ms=transfer, wait_ms=own.wait_ms_per_step if own else 0.0,
            bubble_ms=bubble, bubble_pct=100 * bubble / step_ms if step_ms else 0.0,
            forward_ms_per_microbatch=f / m, backward_ms_per_microbatch=b / m,
            peak_memory_bytes=peaks[i], blocks=_blocks(metas.get(rank), measured.steps_of[i]),
            held=_held(metas.get(rank)),
        ))  # fmt: skip
    return tuple(out)


def _held(meta: PipelineMeta | None) -> tuple[int, ...]:
    held = tuple(meta.stages_held) if meta is not None else ()
    return held if len(held) > 1 else ()


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
    costs = _stage_costs(figures)
    step_ms = sum(f.step_ms for f in figures) / len(figures)
    theory = 0.0 if zero_bubble(schedule) else theory_bubble_pct(stages // chunks, m, chunks)
    return PipelineAnalysis(
        stages=stages,
        microbatches=m,
        schedule=schedule,
        chunks_per_rank=chunks,
        theory_bubble_pct=theory,
        ranks=figures,
        bound_stage=max(costs, key=lambda s: costs[s]),
        step_ms=step_ms,
        move=propose_move(figures, m, step_ms) if chunks == 1 else None,
    )


def _forwards_per_step(events: EventTable, rank: int, warmup: int) -> int:
    """Microbatches of a hand-written loop: the forward phases per measured step."""
    measured = _Measured.of(events, [rank], warmup)
    rows = events.of_kind(Kind.PHASE)
    rows = rows.select(rows.name == events.symbols.id_of("forward"))
    hit, _ = measured.rows_in(rows)
    return max(round(int(hit.sum()) / max(int(measured.count[0]), 1)), 1)


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
