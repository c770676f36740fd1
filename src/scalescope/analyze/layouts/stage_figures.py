"""One rank's pipeline stage measured: its forward, backward and optimizer per measured step
and per microbatch, its sends' and recvs' transfer and wait (analyze/layouts/p2p.py), its
bubble (step − compute − optimizer − transfer; a wait for the peer is bubble), its peak
memory and its blocks' times (probe/pipeline.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.layouts.p2p import P2PAnalysis
from scalescope.analyze.layouts.step_ends import step_ends
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
    lead_ms: float = 0.0
    tail_ms: float = 0.0
    """Its own time before its first action and after its last, per step
    (analyze/layouts/step_ends.py)."""

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
class MeasuredSteps:
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
    def of(cls, events: EventTable, ranks: list[int], warmup: int) -> MeasuredSteps:
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
    measured = MeasuredSteps.of(events, list(of_rank), warmup)
    fwd, bwd, opt = (measured.phase_ms(events, n) for n in ("forward", "backward", "optimizer"))
    peaks = measured.peaks(events)
    ends = step_ends(events, measured)
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
            held=_held(metas.get(rank)), lead_ms=float(ends.lead_ms[i]),
            tail_ms=float(ends.tail_ms[i]),
        ))  # fmt: skip
    return tuple(out)


def _held(meta: PipelineMeta | None) -> tuple[int, ...]:
    held = tuple(meta.stages_held) if meta is not None else ()
    return held if len(held) > 1 else ()
