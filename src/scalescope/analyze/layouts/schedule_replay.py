"""A pipeline's step replayed from its schedule: each rank runs its forwards and backwards
per microbatch in the schedule's order, each as long as measured, each waiting for the
microbatch's activations from the stage before (its forward) or its gradients from the stage
after (its backward), then their transfer.

The transfer starts when both sides are there, the producer's action done and the receiver
free, as it is measured (analyze/layouts/p2p.py: completion less the later side's arrival),
and the receiver is blocked in it: a stage whose input was sent long before still spends it.
The rank's own time was counted without it (analyze/layouts/block_move.py), so a transfer
added only to a late input's arrival was lost whenever the input came early: on a 2-rank
1F1B job whose last stage slept 9.2 ms a forward (docs/accuracy.md, pp-1f1b-stage-clear,
seed 49) 3 of that stage's 4 recvs of 0.26 ms went missing, the step replayed 2.4 % short
(0.8 % with them).

Orders, per rank r of p, m microbatches:
- GPipe: every forward, then every backward, microbatches in order;
- 1F1B: p − r − 1 forwards (at most m), then one forward and one backward in turn, then the
  backwards left;
- interleaved 1F1B (v stages per rank, stage c·p + r its chunk c), as torch's
  ``ScheduleInterleaved1F1B`` orders it: rounds of g = m // max(1, m // p) microbatches, each
  round through chunk 0, 1, …; backwards likewise with the chunks reversed;
  (v − 1)·g + 2·(p − r − 1) forwards first, then one of each in turn.

A rank's own time outside its phases and its sends' and recvs' waits is the step's before its
first action (``lead_ms``: the batch split, the schedule's set-up) and after its last
(``tail_ms``: the last sends posted, the gradients scaled), once a step, and the rest spread
over the gaps between its actions (the sends and recvs posted, the loss), before each
action's wait for its input; the optimizer follows its last backward and its tail. The
step: the latest rank's end, all starting at 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

ZERO_BUBBLE_NAMES = ("ZeroBubble", "ZBV", "DualPipe")
"""Schedules that fill the bubble with the weight gradients' backward (ZB-H1/H2, ZB-V,
DualPipeV): none left in theory, with equal forward, input- and weight-backward times."""
ORDERS = ("gpipe", "1f1b", "interleaved")


def zero_bubble(schedule: str) -> bool:
    return any(name in schedule for name in ZERO_BUBBLE_NAMES)


def schedule_order(schedule: str, chunks: int) -> str:
    """The order a schedule's class name runs: ``interleaved`` where a rank holds several
    stages, ``gpipe`` for GPipe, else ``1f1b`` (1F1B, DeepSpeed's TrainSchedule; a
    one-chunk zero-bubble schedule is 1F1B with its backward split)."""
    if chunks > 1:
        return "interleaved"
    return "gpipe" if "gpipe" in schedule.lower() else "1f1b"


@dataclass(frozen=True)
class StageTimes:
    """One stage's measured times (ms): per microbatch, per action, per message."""

    forward_ms: float
    backward_ms: float
    own_ms: float = 0.0
    """Per gap between two of the rank's actions (forwards and backwards): its time outside
    phases and waits."""
    recv_ms: float = 0.0
    """Per message into the stage (activations or gradients): its transfer."""
    optimizer_ms: float = 0.0
    forward_call_ms: float = 0.0
    backward_call_ms: float = 0.0
    """Of ``forward_ms`` and ``backward_ms``: the stage's time outside its blocks per call
    (its wrapper, its hooks, work a pre-hook adds), which a smaller microbatch does not
    shrink; 0 where no block was timed."""
    lead_ms: float = 0.0
    tail_ms: float = 0.0
    """Per step: the rank's own time before its first action and after its last (a rank
    holding several stages: its first stage's figures)."""


Action = tuple[bool, int, int]
"""(a forward?, stage, microbatch)."""


def rank_order(order: str, rank: int, ranks: int, m: int, chunks: int = 1) -> list[Action]:
    """Rank ``rank``'s forwards and backwards in the schedule's order."""
    if order == "gpipe":
        return [(True, rank, i) for i in range(m)] + [(False, rank, i) for i in range(m)]
    if order == "1f1b":
        fwd = [(True, rank, i) for i in range(m)]
        bwd = [(False, rank, i) for i in range(m)]
        return _one_each(fwd, bwd, min(ranks - rank - 1, m))
    if order != "interleaved":
        raise ValueError(f"no schedule order {order!r}: one of {', '.join(ORDERS)}")
    rounds = max(1, m // ranks)
    if m % rounds:
        raise ValueError(
            f"an interleaved schedule of {m} microbatches on {ranks} ranks: {m} is not a "
            f"multiple of its {rounds} rounds (torch refuses it)"
        )
    per_round = m // rounds
    fwd = _rounds(True, rank, ranks, m, chunks, per_round)
    bwd = _rounds(False, rank, ranks, m, chunks, per_round)
    return _one_each(fwd, bwd, min((chunks - 1) * per_round + 2 * (ranks - rank - 1), len(fwd)))


def _rounds(fwd: bool, rank: int, ranks: int, m: int, chunks: int, per_round: int) -> list[Action]:
    """The k-th forward (backward) of an interleaved rank runs chunk (k // per_round) mod v
    (reversed for backwards), each chunk's microbatches in order."""
    out, next_mb = [], [0] * chunks
    for k in range(chunks * m):
        c = (k // per_round) % chunks
        c = c if fwd else chunks - 1 - c
        out.append((fwd, c * ranks + rank, next_mb[c]))
        next_mb[c] += 1
    return out


def _one_each(fwd: list[Action], bwd: list[Action], warmup: int) -> list[Action]:
    out = fwd[:warmup]
    for f, b in zip(fwd[warmup:], bwd, strict=False):
        out += [f, b]
    return out + bwd[len(fwd) - warmup :]


def replay_step(
    order: str, stages: Sequence[StageTimes], microbatches: int, chunks: int = 1
) -> float:
    """The step (ms) of ``stages`` (p·v of them, stage s on rank s mod p) run in ``order``
    over ``microbatches``; ValueError where the order deadlocks."""
    m, n = max(microbatches, 1), len(stages)
    ranks = n // max(chunks, 1)
    if ranks < 1 or ranks * max(chunks, 1) != n:
        raise ValueError(f"{n} stages do not split into {chunks} per rank")
    todo = [rank_order(order, r, ranks, m, chunks) for r in range(ranks)]
    done: dict[Action, float] = {}
    free, at = [stages[r].lead_ms for r in range(ranks)], [0] * ranks
    left = sum(map(len, todo))
    while left:
        moved = False
        for r in range(ranks):
            while at[r] < len(todo[r]):
                action = todo[r][at[r]]
                ready = _input_ready(action, stages, done)
                if ready is None:
                    break
                fwd, s, _ = action
                t = stages[s]
                start = max(free[r] + (t.own_ms if at[r] else 0.0), ready)
                start += t.recv_ms if _received(action, n) else 0.0
                free[r] = start + (t.forward_ms if fwd else t.backward_ms)
                done[action] = free[r]
                at[r] += 1
                left -= 1
                moved = True
        if not moved:
            raise ValueError(f"the {order} order deadlocks on {ranks} ranks, {m} microbatches")
    opt = [sum(stages[s].optimizer_ms for s in range(r, n, ranks)) for r in range(ranks)]
    return max(f + o + stages[r].tail_ms for r, (f, o) in enumerate(zip(free, opt, strict=True)))


def _input_ready(action: Action, stages: Sequence[StageTimes], done: dict) -> float | None:
    """When the action ``action`` needs has run (its input's transfer may start); None
    until then."""
    fwd, s, i = action
    if fwd:
        return 0.0 if s == 0 else done.get((True, s - 1, i))
    if s == len(stages) - 1:
        return done.get((True, s, i))
    return done.get((False, s + 1, i))


def _received(action: Action, stages: int) -> bool:
    """Whether ``action``'s input comes from another stage: a forward's but the first
    stage's, a backward's but the last stage's."""
    fwd, s, _ = action
    return s > 0 if fwd else s < stages - 1
