"""Which rank is stuck where: a hang's verdict from each rank's last known state.

Pure functions over ``LiveState``s (events/live_state.py), whether read live by the
launcher's watch or rebuilt after the fact from a run's events (``states_from_run``): the
collective a rank entered last (op, group, sequence number, bytes) and whether it left it,
its phase, and whether its process still lives. Every rank issues the same collectives in
the same order on a group, so a rank whose sequence number is behind the waiting ranks' has
not entered their collective, and one at the same number with another op called a
different collective (a mismatch).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import msgspec
import numpy as np

from scalescope.analyze.watch.ring_calls import RingCall
from scalescope.events import Kind, Run
from scalescope.events.files import HANG_FILE
from scalescope.events.live_state import OUTSIDE, LiveState

HANG_FACTOR = 10
"""A run hangs when nothing progressed for this many typical steps ..."""
MIN_HANG_S = 30.0
"""... and at least this long (the launcher's default; ``--hang-after`` sets it)."""
MIN_RECORDED_HANG_S = 5.0
"""After the fact (no hang.json), an unfinished collective this old at the rank's end counts."""
BROKEN_BY_END_S = 2.0
"""A collective that ended this close to its rank's end was ended by the stop (a peer that
exited closed the connection: gloo's ``Connection closed by peer``), not completed."""


@dataclass(frozen=True)
class RankHang:
    """One rank at the moment the hang was seen."""

    rank: int
    pid: int
    alive: bool
    ended: str = ""
    """The rank's status when its process is gone (completed, failed, killed), else ""."""
    steps_done: int = 0
    phase: str = OUTSIDE
    phase_for_s: float | None = None
    op: str = ""
    group: str = ""
    seq: int = -1
    nbytes: int = 0
    in_collective: bool = False
    collective_for_s: float | None = None
    """Since it entered its last collective (still in it) or since it left it."""
    stack: str = ""
    host: str = ""
    """The node it runs on ("" when unknown)."""
    last_calls: tuple[RingCall, ...] = ()
    """Its flight recorder's last collectives, the latest first (none when its ring could
    not be read here: another node's rank under srun or mpirun, a run without rings)."""
    ring_note: str = ""
    """Why its ring was not read, when it could not be ("" otherwise)."""


@dataclass(frozen=True)
class Verdict:
    """One finding about the hang; ``report/views/hang.py`` words it.

    kind: ``missing`` (``ranks`` have not entered the collective ``waiting`` wait in),
    ``mismatch`` (``ranks`` called ``other_op`` at the sequence number of ``op``), ``behind``
    (``ranks`` wait in an earlier collective of the group), ``ended`` (``ranks``' processes
    are gone while ``waiting`` wait), ``all_waiting`` (every rank waits in the same
    collective: it never completes), ``host_work`` (no rank is in a collective),
    ``unfinished`` (from the flight recorders: ``ranks`` have not completed the call
    ``waiting`` completed; analyze/watch/ring_hang.py).
    """

    kind: str
    ranks: tuple[int, ...]
    waiting: tuple[int, ...] = ()
    op: str = ""
    group: str = ""
    seq: int = -1
    nbytes: int = 0
    waited_s: float = 0.0
    other_op: str = ""
    other_seq: int = -1


@dataclass(frozen=True)
class HangReport:
    detected_at: float
    """Wall-clock time (s since the epoch) of the detection, or of the last rank's end."""
    idle_s: float
    """How long no rank had finished a step or a collective."""
    hang_after_s: float
    source: str
    """``live`` (the launcher saw it) or ``events`` (rebuilt by report from the events)."""
    ranks: tuple[RankHang, ...]
    verdicts: tuple[Verdict, ...] = field(default_factory=tuple)
    action: str = "report"
    """``report``, ``kill`` (the ranks were stopped) or ``withheld`` (``--hang-action kill``,
    but some rank's state was ``unknown``)."""
    unknown: tuple[int, ...] = ()
    """Ranks whose live state in the job's store did not open with the job's seal
    (launch/channel/store.py): what they were doing is not known."""


def hang_threshold_s(median_step_s: float | None, floor_s: float = MIN_HANG_S) -> float:
    """10 typical steps, at least ``floor_s``."""
    return max(floor_s, HANG_FACTOR * (median_step_s or 0.0))


def rank_hang(state: LiveState, now_s: float, alive: bool, ended: str = "") -> RankHang:
    since = state.entered_s if state.in_collective else state.left_s
    return RankHang(
        rank=state.rank, pid=state.pid, alive=alive, ended=ended, steps_done=state.steps_done,
        phase=state.phase,
        phase_for_s=None if state.phase_since_s is None else now_s - state.phase_since_s,
        op=state.op, group=state.group, seq=state.seq if state.op else -1, nbytes=state.nbytes,
        in_collective=state.in_collective,
        collective_for_s=None if since is None else max(0.0, now_s - since),
    )  # fmt: skip


def verdicts(ranks: list[RankHang]) -> list[Verdict]:
    """What keeps the ranks from progressing, most telling first."""
    gone = tuple(r.rank for r in ranks if not r.alive)
    waiters = [r for r in ranks if r.alive and r.in_collective]
    if not waiters:
        busy = tuple(r.rank for r in ranks if r.alive)
        out = [Verdict("ended", gone)] if gone else []
        return out + ([Verdict("host_work", busy)] if busy else [])
    out: list[Verdict] = []
    for group in sorted({r.group for r in waiters}):
        out.extend(_group_verdicts(group, ranks, waiters))
    return out


def _group_verdicts(group: str, ranks: list[RankHang], waiters: list[RankHang]) -> list[Verdict]:
    in_group = [r for r in waiters if r.group == group]
    seq = max(r.seq for r in in_group)
    front = [r for r in in_group if r.seq == seq]
    ops = [r.op for r in sorted(front, key=lambda r: r.rank)]
    op = max(ops, key=lambda o: (ops.count(o), -ops.index(o)))  # ties: the lowest rank's
    waiting = tuple(r.rank for r in front if r.op == op)
    waited = max(r.collective_for_s or 0.0 for r in front)
    base = dict(waiting=waiting, op=op, group=group, seq=seq, nbytes=front[0].nbytes)
    out: list[Verdict] = []
    others = [r for r in ranks if r.rank not in waiting]
    for kind, picked in _classify(others, group, seq, op).items():
        if picked:
            other = picked[0]
            out.append(
                Verdict(
                    kind,
                    tuple(r.rank for r in picked),
                    waited_s=waited,
                    other_op=other.op,
                    other_seq=other.seq,
                    **base,
                )  # fmt: skip
            )
    if not others:
        out.append(Verdict("all_waiting", waiting, waited_s=waited, **base))
    return out


def _classify(others: list[RankHang], group: str, seq: int, op: str) -> dict[str, list]:
    kinds: dict[str, list[RankHang]] = {"mismatch": [], "ended": [], "behind": [], "missing": []}
    for r in others:
        if r.group == group and r.seq == seq and r.op != op:
            kinds["mismatch"].append(r)
        elif not r.alive:
            kinds["ended"].append(r)
        elif r.in_collective and r.group == group and r.seq < seq:
            kinds["behind"].append(r)
        else:
            kinds["missing"].append(r)
    return kinds


def last_by_rank(rank: np.ndarray, value: np.ndarray) -> dict[int, tuple[int, int]]:
    """Per rank: the index of its row with the largest ``value`` (the first such row, as
    ``argmax``) and its number of rows. A loaded run's rows of a kind are in rank order, so
    each rank is one run of rows (reductions over the runs, no sort); else one sort."""
    if len(rank) == 0:
        return {}
    if (rank[1:] >= rank[:-1]).all():
        starts = np.flatnonzero(np.r_[True, rank[1:] != rank[:-1]])
        counts = np.diff(np.r_[starts, len(rank)])
        top = np.repeat(np.maximum.reduceat(value, starts), counts)
        index = np.where(value == top, np.arange(len(rank)), len(rank))
        first_top = np.minimum.reduceat(index, starts)
        return {
            int(rank[s]): (int(i), int(n))
            for s, i, n in zip(starts.tolist(), first_top.tolist(), counts.tolist(), strict=True)
        }
    index = np.arange(len(rank))
    order = np.lexsort((-index, value, rank))
    ranks = rank[order]
    last = np.flatnonzero(np.r_[ranks[1:] != ranks[:-1], True])
    counts = np.diff(np.r_[-1, last])
    return {int(ranks[i]): (int(order[i]), int(n)) for i, n in zip(last, counts, strict=True)}


def states_from_run(run: Run) -> dict[int, LiveState]:
    """Each rank's last recorded state: its last collective (unfinished ones were written
    with dur -1 at its end) and its last step, on the wall clock."""
    ev = run.events
    steps = np.flatnonzero(ev.kind == Kind.STEP)
    colls = np.flatnonzero(ev.kind == Kind.COLLECTIVE)
    last_step = last_by_rank(ev.rank[steps], ev.start_ns[steps] + ev.dur_ns[steps])
    last_coll = last_by_rank(ev.rank[colls], ev.start_ns[colls])
    out: dict[int, LiveState] = {}
    for rank, meta in run.ranks.items():
        offset = meta.wall_minus_perf_ns
        step_end, done = None, 0
        if rank in last_step:
            at, done = last_step[rank]
            last = steps[at]
            step_end = (int(ev.start_ns[last] + ev.dur_ns[last]) + offset) / 1e9
        coll = dict(op="", group="", seq=-1, nbytes=0, entered_s=None, left_s=None)
        if rank in last_coll:
            i = colls[last_coll[rank][0]]
            start = (int(ev.start_ns[i]) + offset) / 1e9
            dur = int(ev.dur_ns[i])
            coll = dict(
                op=ev.symbols[int(ev.name[i])], group=ev.symbols[int(ev.group[i])],
                seq=int(ev.seq[i]), nbytes=int(ev.nbytes[i]), entered_s=start,
                left_s=None if dur < 0 else start + dur / 1e9,
            )  # fmt: skip
        out[rank] = LiveState(
            rank=rank, pid=meta.pid, steps_done=done, last_step_end_s=step_end,
            phase="", phase_since_s=None, last_done_s=None, **coll,
        )  # fmt: skip
    return out


def recorded_hang(run: Run, median_step_s: float | None) -> HangReport | None:
    """A hang seen after the fact: a rank ended while in a collective it had waited in for
    10 typical steps and at least ``MIN_RECORDED_HANG_S``; None when no rank did."""
    states = states_from_run(run)
    threshold = hang_threshold_s(median_step_s, MIN_RECORDED_HANG_S)
    ranks, longest, end = [], 0.0, 0.0
    for rank, state in sorted(states.items()):
        meta = run.ranks[rank]
        state = broken_by_end(state, meta.end_time, threshold)
        now = meta.end_time or state.entered_s or 0.0
        end = max(end, now)
        hang = rank_hang(state, now, alive=meta.status in ("running", "interrupted"))
        hang = replace(hang, host=meta.hostname or "")
        if hang.in_collective:
            longest = max(longest, hang.collective_for_s or 0.0)
        ranks.append(hang)
    if longest < threshold:
        return None
    return HangReport(
        detected_at=end, idle_s=longest, hang_after_s=threshold, source="events",
        ranks=tuple(ranks), verdicts=tuple(verdicts(ranks)),
    )  # fmt: skip


def broken_by_end(state: LiveState, end_s: float | None, threshold_s: float) -> LiveState:
    """``state`` still in its last collective when that one lasted ``threshold_s`` or more and
    ended with the rank (within BROKEN_BY_END_S): the stop broke the wait, the peer never
    came. A Ctrl-C reaches the rank in host work first; it exits and closes the connection,
    and the waiting rank's collective then ends with an error, as if completed."""
    if end_s is None or state.entered_s is None or state.left_s is None:
        return state
    lasted = state.left_s - state.entered_s
    if lasted >= threshold_s and end_s - state.left_s <= BROKEN_BY_END_S:
        return replace(state, left_s=None)
    return state


def read_hang_file(run_dir: Path) -> HangReport | None:
    """The hang the launcher saw (``hang.json``); None when there is none or it is unreadable."""
    try:
        return msgspec.json.decode((Path(run_dir) / HANG_FILE).read_bytes(), type=HangReport)
    except (OSError, msgspec.DecodeError, msgspec.ValidationError):
        return None


def median_step_s(run: Run) -> float | None:
    ev = run.events
    durs = ev.of_kind(Kind.STEP).dur_ns
    return float(np.median(durs)) / 1e9 if durs.size else None


def run_hang(run: Run) -> HangReport | None:
    """The launcher's record of a hang, else one rebuilt from the events, else None."""
    return read_hang_file(run.path) or recorded_hang(run, median_step_s(run))
