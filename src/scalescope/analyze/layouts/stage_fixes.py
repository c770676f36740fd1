"""What a pipeline's stage or schedule costs, by replaying the schedule
(analyze/layouts/schedule_replay.py) with the measured times and again with the cause fixed:

- a stage at its peers' pace: its forward and backward per microbatch set to the median of
  the other stages', and its own time (outside phases and waits: between its actions, before
  the first and after the last) to theirs where its own is longer (the gain of removing its
  extra work: the host time around a slow stage's microbatches grew with it, 8 to 21 ms a
  step on a 2-rank interleaved run whose stage slept 44 ms, and left as measured the replay
  said 46 ms against 65 measured);
- twice the microbatches over the same batch: each forward's and backward's work in its
  blocks half as long; what a microbatch costs whatever its size as measured, twice as
  often: the own time between a rank's actions (the host's work per microbatch: its sends
  and recvs posted, the loss), twice as much over the gaps between twice the actions, each
  message's transfer, and the time of each forward and backward outside the stage's blocks
  (its wrapper and hooks); the own time before a rank's first action and after its last is
  the step's, once (analyze/layouts/step_ends.py). Halving the own time per action, as this
  replay once did, promised a 2-rank GPipe job (hidden 512, batch 256, 2 microbatches)
  4.6-4.9 ms a step where re-runs with 4 microbatches were 3.1-3.3 ms slower
  (docs/accuracy.md): its own time was 0.8-0.9 ms an action at 2 microbatches and 0.5-0.8 ms
  at 4 in the same job, a cost per action, not per sample.

Both steps come from the same replay, so its error against the measured step cancels in the
gain; a formula ((m + p − 1) slots of the slowest stage) leaves out the transfers, each
rank's own time and the optimizer, and was 5 ms against 46 ms measured on a 2-stage GPipe
run of one heavy stage.

A rank that holds v stages (interleaved schedules) is one entry of the figures: its times
are split evenly between its stages, and it is set to its peers' pace as a whole.

What the replay cannot see: the peers' pace once they no longer wait. Their times are those
measured beside the slow stage, and a rank that idles between its actions computes slower
than one kept busy (caches and core gone cold: on the 2-core test machine a 4-block MLP's
forward and backward took 0.15 + 0.35 ms back to back, 0.53 + 0.69 ms after 10 ms asleep).
Under 1F1B a slow stage's peers wait before nearly each of their actions, so that cold pace
is the one the fix sets: on pp-1f1b-stage-clear (docs/accuracy.md, seed 49) stage 0 computed
1.21 ms a microbatch beside the slow stage and 0.74 ms in the re-run without it; the fixed
step replayed 10.3 ms against 7.3 measured, the gain 37.8 against 41.2 ms (under GPipe, whose
forwards and backwards run back to back, 0.80 against 0.75 ms). The run holds no warm
sample of a 1F1B peer's backward to correct it by: the gain is low by that much.

Nor what twice the microbatches cost beyond their halved work inside the blocks: each
block's own cost per call (its ops' dispatch at half the rows), and, from 1 GPipe microbatch,
the stages computing at once, which they never did. On pp-gpipe-few-microbatches (1 to 2
microbatches, 21 held-out pairs, docs/whatif.md) a half-size forward or backward took 0.54
of the full-size one where this replay takes 0.52, stage 1's 0.3-0.5 ms longer beside stage
0's than alone: +1.3 ms a step to the gain, less 0.5 for each message's transfer kept whole
where it halved. One microbatch size holds no sample of either.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

from scalescope.analyze.layouts.block_move import busiest_per_stage, stage_times
from scalescope.analyze.layouts.p2p import P2PAnalysis
from scalescope.analyze.layouts.schedule_replay import StageTimes, replay_step
from scalescope.analyze.layouts.stage_figures import StageFigures


@dataclass(frozen=True)
class ReplayedFix:
    """The schedule replayed with the measured times and with one cause fixed."""

    replayed_step_ms: float
    fixed_step_ms: float
    replay_error_pct: float
    """The replay with the measured times against the measured step (%)."""

    @property
    def gain_ms(self) -> float:
        return self.replayed_step_ms - self.fixed_step_ms


@dataclass(frozen=True)
class PipelineReplay:
    """The measured times of each rank's stage(s) as the replay takes them."""

    order: str
    rank_times: tuple[StageTimes, ...]
    """Per pipeline rank (its first stage's index), all of its stages together."""
    microbatches: int
    chunks: int
    step_ms: float

    def step(self, rank_times: tuple[StageTimes, ...], microbatches: int) -> float:
        """The replayed step of ``rank_times``, each rank's split between its chunks."""
        p, v = len(rank_times), self.chunks
        stages = [_chunk(rank_times[s % p], v) for s in range(p * v)]
        return replay_step(self.order, stages, microbatches, v)

    def fixed(self, rank_times: tuple[StageTimes, ...], microbatches: int) -> ReplayedFix | None:
        """The replay now and with ``rank_times`` over ``microbatches``; None where the
        order deadlocks or refuses the microbatches."""
        try:
            now = self.step(self.rank_times, self.microbatches)
            after = self.step(rank_times, microbatches)
        except ValueError:
            return None
        error = 100 * (now - self.step_ms) / self.step_ms if self.step_ms else 0.0
        return ReplayedFix(now, after, error)


def _chunk(t: StageTimes, chunks: int) -> StageTimes:
    """One of a rank's ``chunks`` stages: its share of the rank's compute and optimizer (its
    actions are ``chunks`` times as many; its own time is per gap between them already)."""
    if chunks == 1:
        return t
    return replace(t, forward_ms=t.forward_ms / chunks, backward_ms=t.backward_ms / chunks,
                   optimizer_ms=t.optimizer_ms / chunks,
                   forward_call_ms=t.forward_call_ms / chunks,
                   backward_call_ms=t.backward_call_ms / chunks)  # fmt: skip


def pipeline_replay(
    figures: tuple[StageFigures, ...],
    microbatches: int,
    step_ms: float,
    order: str,
    chunks: int = 1,
    p2p: P2PAnalysis | None = None,
) -> PipelineReplay | None:
    """The replay's inputs from each stage's busiest rank, run in ``order`` (``gpipe``,
    ``1f1b``, ``interleaved``: ``schedule_order``); None unless the ranks hold stages
    0 … p − 1 (an interleaved rank by its first stage), p ≥ 2."""
    busiest = busiest_per_stage(figures)
    p, m = len(busiest), max(microbatches, 1)
    if p < 2 or sorted(busiest) != list(range(p)):
        return None
    times = tuple(stage_times(busiest[s], m, p2p, chunks) for s in range(p))
    return PipelineReplay(order, times, m, max(chunks, 1), step_ms)


def at_peers_pace(replay: PipelineReplay, stage: int) -> ReplayedFix | None:
    """The step with ``stage``'s forward and backward per microbatch at the median of the
    other stages', its own time (between actions, before and after them) at most theirs."""
    others = [t for s, t in enumerate(replay.rank_times) if s != stage]
    if stage >= len(replay.rank_times) or not others:
        return None
    mine = replay.rank_times[stage]

    def median(field: str) -> float:
        return statistics.median(getattr(t, field) for t in others)

    paced = replace(
        mine,
        forward_ms=median("forward_ms"),
        backward_ms=median("backward_ms"),
        **{f: min(getattr(mine, f), median(f)) for f in ("own_ms", "lead_ms", "tail_ms")},
    )
    times = tuple(paced if s == stage else t for s, t in enumerate(replay.rank_times))
    return replay.fixed(times, replay.microbatches)


def twice_the_microbatches(replay: PipelineReplay) -> ReplayedFix | None:
    """The step over 2m microbatches of the same batch: the work in each forward's and
    backward's blocks halved; the own time between actions twice as much, over the gaps
    between twice the actions; each message's transfer and each call's time outside the
    blocks as measured (a cost per microbatch); the own time before the first action and
    after the last as measured (the step's)."""
    actions = 2 * replay.microbatches * replay.chunks
    scale = 2 * (actions - 1) / (2 * actions - 1)
    halved = tuple(
        replace(
            t,
            forward_ms=_halved(t.forward_ms, t.forward_call_ms),
            backward_ms=_halved(t.backward_ms, t.backward_call_ms),
            own_ms=t.own_ms * scale,
        )  # fmt: skip
        for t in replay.rank_times
    )
    return replay.fixed(halved, 2 * replay.microbatches)


def _halved(per_call: float, fixed: float) -> float:
    """A call's time at half the microbatch: its fixed part whole, the rest halved."""
    fixed = min(fixed, per_call)
    return fixed + (per_call - fixed) / 2
