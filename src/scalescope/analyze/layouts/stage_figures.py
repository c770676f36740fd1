"""One rank's pipeline stage measured: its forward, backward and optimizer per measured step
and per microbatch, its sends' and recvs' transfer and wait (analyze/layouts/p2p.py), its
bubble (step − compute − optimizer − transfer; a wait for the peer is bubble), its peak
memory and its blocks' times (probe/pipeline.py)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.layouts.measured_steps import MeasuredSteps
from scalescope.analyze.layouts.p2p import P2PAnalysis
from scalescope.analyze.layouts.step_ends import step_ends
from scalescope.events import EventTable
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
