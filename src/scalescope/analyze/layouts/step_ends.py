"""A pipeline rank's own time at the ends of its steps: before its first forward or backward
(``lead``: the batch split, the schedule's set-up, its first recv posted) and after its last
(``tail``: the last sends posted, the gradients scaled), less the time it was blocked in sends
and recvs there and its optimizer. Work done once a step whatever its microbatches, told
apart from the host work between its actions, which more microbatches repeat: on a 2-rank
GPipe job of one microbatch (docs/accuracy.md, pp-gpipe-few-microbatches) the replay spread
all of it over the actions, put the tail's sends before the first forward and replayed the
step 3-15 % long.

Blocked: the host's waits on its sends and recvs (WAIT rows, probe/p2p.py); a rank that
recorded none (a loop of blocking ``dist.send``/``recv``) is blocked for its sends' and
recvs' whole calls.

Only the steps whose sends and recvs were kept count, where a rank kept them in some steps
and not others (``--record summary`` keeps their rows for a window of steps, the phases for
every step): in a step without them, a downstream stage's wait for its first activations
looked like its own time before its first forward. On a 2-rank 1F1B job whose stage 0 slept
10 ms a forward (docs/accuracy.md, pp-1f1b-stage-clear, seed 4902), stage 1's lead was
0.8 ms in the window's steps and ~11 ms after them, 9.2 ms in the mean: it took all of the
stage's own time (none left between its actions, 0.45 ms a gap in the window's steps), the
replay was 2.8 % short and the stage's cost 36.5 ms a step against 42.3 measured (37.2 with
the kept steps only). A rank that kept none in any step is read in every step alike."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.layouts.measured_steps import MeasuredSteps
from scalescope.events import EventTable, Kind

ACTIONS = ("forward", "backward")


@dataclass(frozen=True)
class StepEnds:
    """Per rank of ``MeasuredSteps.ranks``: means over its measured steps that ran an action
    (ms)."""

    lead_ms: np.ndarray
    tail_ms: np.ndarray


def _named(events: EventTable, kind: Kind, names: tuple[str, ...]) -> EventTable:
    rows = events.of_kind(kind)
    ids = [events.symbols.id_of(n) for n in names]
    return rows.select(np.isin(rows.name, ids))


def _indexed(measured: MeasuredSteps, rows: EventTable) -> tuple[EventTable, np.ndarray]:
    """``rows`` of a measured step, and each one's step's index in ``measured.keys``."""
    hit, pos = measured.rows_in(rows)
    key = pos[hit] * measured.span + rows.step[hit].astype(np.int64)
    return rows.select(hit), np.searchsorted(measured.keys, key)


def _blocked(events: EventTable) -> EventTable:
    """WAIT rows of sends and recvs, and the send and recv calls of ranks without any."""
    waits = _named(events, Kind.WAIT, ("send", "recv"))
    calls = _named(events, Kind.COLLECTIVE, ("send", "recv"))
    calls = calls.select(~np.isin(calls.rank, np.unique(waits.rank)) & (calls.peer >= 0))
    return EventTable.concat([waits, calls]) if len(calls) else waits


def step_ends(events: EventTable, measured: MeasuredSteps) -> StepEnds:
    """Each rank's lead and tail, means over its measured steps with an action (and its sends
    and recvs kept, where some step kept them)."""
    n, zero = len(measured.keys), np.zeros(len(measured.ranks))
    steps, at = _indexed(measured, events.of_kind(Kind.STEP))
    acts, a_at = _indexed(measured, _named(events, Kind.PHASE, ACTIONS))
    if len(acts) == 0 or len(steps) == 0:
        return StepEnds(zero, zero.copy())
    start = np.zeros(n)
    end = np.zeros(n)
    start[at] = steps.start_ns
    end[at] = steps.start_ns.astype(np.float64) + steps.dur_ns
    first = np.full(n, np.inf)
    last = np.full(n, -np.inf)
    np.minimum.at(first, a_at, acts.start_ns.astype(np.float64))
    np.maximum.at(last, a_at, acts.start_ns.astype(np.float64) + acts.dur_ns)
    before, after = np.zeros(n), np.zeros(n)
    for rows, i in (_indexed(measured, _blocked(events)),
                    _indexed(measured, _named(events, Kind.PHASE, ("optimizer",)))):  # fmt: skip
        s = rows.start_ns.astype(np.float64)
        is_wait = rows.kind != int(Kind.PHASE)
        np.add.at(before, i[is_wait & (s < first[i])], rows.dur_ns[is_wait & (s < first[i])])
        np.add.at(after, i[s >= last[i]], rows.dur_ns[s >= last[i]])
    rank_of = np.repeat(np.arange(len(measured.ranks)), _per_rank(measured))
    ran = np.isfinite(first) & _sends_kept(events, measured, rank_of)
    lead = np.where(ran, np.maximum(first - start - before, 0.0), 0.0)
    tail = np.where(ran, np.maximum(end - last - after, 0.0), 0.0)
    counted = np.bincount(rank_of[ran], minlength=len(measured.ranks))

    def mean(values: np.ndarray) -> np.ndarray:
        total = np.bincount(rank_of[ran], weights=values[ran], minlength=len(measured.ranks))
        return total / np.maximum(counted, 1) / 1e6

    return StepEnds(mean(lead), mean(tail))


def _sends_kept(events: EventTable, measured: MeasuredSteps, rank_of: np.ndarray) -> np.ndarray:
    """Per measured step: whether its sends' and recvs' rows were kept, or its rank kept
    none in any step (a recording that drops them after a window of steps would otherwise
    count the waits of the steps beyond it as the rank's own time)."""
    rows = EventTable.concat([_named(events, Kind.WAIT, ("send", "recv")),
                              _named(events, Kind.COLLECTIVE, ("send", "recv"))])  # fmt: skip
    _, at = _indexed(measured, rows)
    kept = np.zeros(len(measured.keys), dtype=bool)
    kept[at] = True
    ranks_keeping = np.bincount(rank_of[kept], minlength=len(measured.ranks)) > 0
    return kept | ~ranks_keeping[rank_of]


def _per_rank(measured: MeasuredSteps) -> np.ndarray:
    """How many of ``measured.keys`` each rank holds (the keys are rank index x span + step)."""
    return np.bincount(measured.keys // measured.span, minlength=len(measured.ranks))
