"""Which blocks to move between pipeline stages, and the step it buys, by replaying the
schedule (analyze/layouts/schedule_replay.py) before and after the move.

Each stage's times come from its busiest rank (the largest compute per microbatch): its
forward and backward per microbatch; its recvs' transfer per message (p2p's ``PeerTotals``:
blocked after the peer arrived); its own time, the step less its phases, its waits for the
peer and its recvs' transfer (where its sends and recvs were recorded; else none is known):
before its first action and after its last once a step (analyze/layouts/step_ends.py), the
rest over the 2m − 1 gaps between its actions; its optimizer. The replay with these times is
the step before the move, set beside the measured step (``replay_error_pct``).

A move: k = 1, 2, … blocks at the bound stage's border with a neighbour go to it, each with
its measured forward and backward ÷ m; the move whose replay is the shortest step wins, none
where no move shortens it. A move leaves every stage's own time and transfers as they are:
under 1F1B the step is about (m − 1) × the slowest stage + the sum of the stages, and a move
changes only the first term."""

from __future__ import annotations

from dataclasses import dataclass, replace

from scalescope.analyze.layouts.p2p import P2PAnalysis
from scalescope.analyze.layouts.schedule_replay import StageTimes, replay_step, schedule_order
from scalescope.analyze.layouts.stage_figures import BlockCost, StageFigures


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
    """The schedule replayed after the move."""
    replayed_step_ms: float
    """The schedule replayed with the measured times: the step before the move."""
    replay_error_pct: float
    """The replay before the move against the measured step: (replayed − measured) ÷ measured."""

    @property
    def gain_ms(self) -> float:
        """What the move saves per step: both steps from the same replay."""
        return self.replayed_step_ms - self.predicted_step_ms


def stage_costs(figures: tuple[StageFigures, ...]) -> dict[int, float]:
    """Compute per microbatch of each stage (the slowest of its ranks)."""
    out: dict[int, float] = {}
    for f in figures:
        out[f.stage] = max(out.get(f.stage, 0.0), f.compute_ms_per_microbatch)
    return out


def busiest_per_stage(figures: tuple[StageFigures, ...]) -> dict[int, StageFigures]:
    """Each stage's rank of the largest compute per microbatch."""
    out: dict[int, StageFigures] = {}
    for f in figures:
        if (
            f.stage not in out
            or f.compute_ms_per_microbatch > out[f.stage].compute_ms_per_microbatch
        ):
            out[f.stage] = f
    return out


def stage_times(
    f: StageFigures, microbatches: int, p2p: P2PAnalysis | None, chunks: int = 1
) -> StageTimes:
    """``f``'s measured times as the replay takes them (``chunks``: the stages its rank
    holds, each of 2m actions)."""
    m = max(microbatches, 1)
    mine = [t for t in (p2p.peers if p2p else ()) if t.rank == f.rank]
    recv = [t for t in mine if t.op == "recv"]
    recv_ms = sum(t.transfer_ms for t in recv)
    every_ms = sum(t.transfer_ms for t in mine)
    count = sum(t.count for t in recv)
    own = lead = tail = 0.0
    if mine:
        recv_per_step = f.transfer_ms * recv_ms / every_ms if every_ms else 0.0
        outside = f.step_ms - f.forward_ms - f.backward_ms - f.optimizer_ms - f.wait_ms
        host = max(outside - recv_per_step, 0.0)
        lead = min(f.lead_ms, host)
        tail = min(f.tail_ms, host - lead)
        own = (host - lead - tail) / max(2 * m * max(chunks, 1) - 1, 1)
    return StageTimes(
        forward_ms=f.forward_ms_per_microbatch,
        backward_ms=f.backward_ms_per_microbatch,
        own_ms=own,
        lead_ms=lead,
        tail_ms=tail,
        recv_ms=recv_ms / count if count else 0.0,
        optimizer_ms=f.optimizer_ms,
        forward_call_ms=_outside_blocks(f.forward_ms_per_microbatch, f, m, forward=True),
        backward_call_ms=_outside_blocks(f.backward_ms_per_microbatch, f, m, forward=False),
    )


def _outside_blocks(per_microbatch: float, f: StageFigures, m: int, forward: bool) -> float:
    """A forward's (backward's) time per microbatch outside ``f``'s blocks; 0 without them."""
    if not f.blocks:
        return 0.0
    blocks = sum(b.forward_ms if forward else b.backward_ms for b in f.blocks) / m
    return max(per_microbatch - blocks, 0.0)


def _border_blocks(f: StageFigures, toward_next: bool, k: int) -> tuple[BlockCost, ...]:
    """The ``k`` blocks of ``f`` at its border with the next stage (its last) or the
    previous (its first)."""
    return f.blocks[-k:] if toward_next else f.blocks[:k]


def _moved(times: list[StageTimes], source: int, target: int, blocks: tuple[BlockCost, ...],
           m: int) -> list[StageTimes]:  # fmt: skip
    fwd = sum(b.forward_ms for b in blocks) / m
    bwd = sum(b.backward_ms for b in blocks) / m
    out = list(times)
    s, t = times[source], times[target]
    out[source] = replace(s, forward_ms=max(s.forward_ms - fwd, 0.0),
                          backward_ms=max(s.backward_ms - bwd, 0.0))  # fmt: skip
    out[target] = replace(t, forward_ms=t.forward_ms + fwd, backward_ms=t.backward_ms + bwd)
    return out


def propose_move(
    figures: tuple[StageFigures, ...],
    microbatches: int,
    step_ms: float,
    schedule: str,
    p2p: P2PAnalysis | None = None,
) -> BlockMove | None:
    """The move of border blocks from the bound stage to a neighbour whose replayed step is
    the shortest; None when none shortens it, without block costs, or where the stages are
    not 0 … p − 1 each on its own ranks."""
    busiest = busiest_per_stage(figures)
    p, m = len(busiest), max(microbatches, 1)
    if p < 2 or sorted(busiest) != list(range(p)):
        return None
    order = schedule_order(schedule, 1)
    times = [stage_times(busiest[s], m, p2p) for s in range(p)]
    costs = stage_costs(figures)
    bound = max(costs, key=lambda s: costs[s])
    source = busiest[bound]
    try:
        before = replay_step(order, times, m)
    except ValueError:
        return None
    best: BlockMove | None = None
    for target in (bound - 1, bound + 1):
        if target not in costs:
            continue
        for k in range(1, len(source.blocks)):
            moved = _border_blocks(source, target > bound, k)
            after_times = _moved(times, bound, target, moved, m)
            after = replay_step(order, after_times, m)
            if after >= before - 1e-9 or (best and after >= best.predicted_step_ms):
                continue
            slowest = max(t.forward_ms + t.backward_ms for t in after_times)
            best = BlockMove(
                source=bound, target=target, blocks=k, names=tuple(b.name for b in moved),
                slowest_ms_per_microbatch=slowest, predicted_step_ms=after,
                replayed_step_ms=before,
                replay_error_pct=100 * (before - step_ms) / step_ms if step_ms else 0.0,
            )  # fmt: skip
    return best
