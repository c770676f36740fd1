"""A replayable model of the measured steps, and what fixing a cause would buy.

The model (``StepGrid``) holds, per step, rank and collective, what the rank did on its own
and what it waited for:

- ``work_ns``: the rank's own time before it issued collective k, counted from the point its
  compute was released after collective k-1 (the step's start for the first);
- ``blocking``: whether the rank's compute waited for collective k to complete (its next
  collective was issued after the completion), or went on (DDP's gradient buckets);
- ``transfer_ns``: collective k's completion on the rank minus the last arrival of its group;
- the step's tail: own time up to the join (the ``comm_wait`` phase, where a DDP rank waits
  for its outstanding buckets), then own time after it, and the gap to the next step.

``replay`` runs the steps one after another on every rank at once: a collective starts when
its group's last member arrives (a rank *arrives* at its issue, or when its previous
collective on the same group completes, as in matching.py) and completes a transfer later.
Replaying the measured durations gives back the measured steps (a sanity check only); the
counterfactuals replace some durations and replay: a rank at the pace of the ranks doing the
same work (the median of the others, step by step), faster compute, faster communication.

The grid needs every rank to issue the same collectives in every step (data-parallel,
sharded and tensor-parallel steps do): steps that differ, collectives that never completed,
and ranks without events are left out and named in ``WhatIf.left_out``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from scalescope.analyze.clocks import align_clocks, aligned_start_ns
from scalescope.events import EventTable, Kind, Run

PERCENTILES = (10.0, 90.0)
"""The spread of a prediction: these percentiles of its steps."""
TOP_RANKS = 3
"""Ranks tried one at a time by ``what_if``: those with the most own time per step."""


@dataclass(frozen=True)
class StepGrid:
    """The measured steps as arrays of shape (steps, ranks, collectives) or (steps, ranks)."""

    steps: np.ndarray
    ranks: np.ndarray
    group: np.ndarray
    """(ranks, collectives): the group symbol of each rank's k-th collective."""
    work_ns: np.ndarray
    blocking: np.ndarray
    transfer_ns: np.ndarray
    prejoin_ns: np.ndarray
    """Own time from the release after the last collective to the join (0 without one)."""
    post_ns: np.ndarray
    """Own time after the join (or after the last release) to the step's end."""
    joins: np.ndarray
    """(steps, ranks): True where the step waits for its outstanding collectives."""
    gap_ns: np.ndarray
    """From the step's end to the next step's start (0 after the last)."""
    step_ns: np.ndarray
    """The measured STEP durations."""
    samples: np.ndarray
    ops: tuple[str, ...] = ()
    """The op of each collective of a step (the first rank's), for a timeline."""
    phase_ns: dict[str, np.ndarray] = field(default_factory=dict)
    """(steps, ranks, collectives + 2): each phase's time inside each part of a rank's own
    time: before each collective, before the join, after it (``phase:NAME`` removes it)."""

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.work_ns.shape

    def own_ns(self) -> np.ndarray:
        """(steps, ranks): each rank's own time per step, waits left out."""
        return self.work_ns.sum(axis=2) + self.prejoin_ns + self.post_ns


@dataclass(frozen=True)
class Replayed:
    step_ns: np.ndarray
    """(steps, ranks): each rank's step duration in the replay."""
    wait_ns: np.ndarray
    """(steps, ranks): time each rank waited for others or for transfers to end."""
    times: ReplayTimes | None = None
    """When asked for: when each rank issued and saw complete each collective."""


@dataclass(frozen=True)
class ReplayTimes:
    """The replay's clock (ns from the first step's start) of each step and collective."""

    start_ns: np.ndarray
    """(steps, ranks)"""
    end_ns: np.ndarray
    issue_ns: np.ndarray
    """(steps, ranks, collectives)"""
    done_ns: np.ndarray


@dataclass(frozen=True)
class Prediction:
    label: str
    step_ms: float
    """The median over steps of the median over ranks."""
    low_ms: float
    high_ms: float
    """The 10th and 90th percentiles of the steps: the step-to-step spread."""
    wait_ms_per_rank: tuple[float, ...]


@dataclass(frozen=True)
class Fix:
    cause: str
    """``rank:N``, ``compute:x1.5``, ``comm:x2``, ``comm:hidden``, or several joined by ``+``."""
    prediction: Prediction
    gain_ms: float
    """The replayed step as measured minus the step with the cause fixed."""
    gain_pct: float
    samples_per_s: float | None
    """Training samples per second after the fix (None when steps count no samples)."""
    note: str = ""


@dataclass(frozen=True)
class WhatIf:
    measured_step_ms: float
    replayed: Prediction
    """The measured durations replayed: within a few % of ``measured_step_ms`` when the
    model fits the run; the fixes' gains are counted from it."""
    fixes: tuple[Fix, ...]
    steps: int
    ranks: int
    collectives_per_step: int
    left_out: tuple[str, ...] = ()


# --- the grid ------------------------------------------------------------------------------


def _step_rows(events: EventTable, steps: np.ndarray | None) -> EventTable:
    """The completed STEP rows of ``steps``, one per (rank, step): the first where a rank
    recorded a step twice."""
    rows = events.of_kind(Kind.STEP)
    rows = rows.select(rows.dur_ns >= 0)
    if steps is not None:
        rows = rows.select(np.isin(rows.step, steps))
    key = rows.rank.astype(np.int64) << 32 | (rows.step.astype(np.int64) & 0xFFFFFFFF)
    _, first = np.unique(key, return_index=True)
    return rows.select(np.sort(first)) if len(first) < len(rows) else rows


def _regular_steps(
    colls: EventTable, ranks: np.ndarray, steps: np.ndarray
) -> tuple[np.ndarray, list[str]]:
    """Steps in which every rank issued the same number of completed collectives as in the
    first such step, on the same groups."""
    left: list[str] = []
    counts = np.zeros((len(steps), len(ranks)), dtype=np.int64)
    np.add.at(counts, (np.searchsorted(steps, colls.step), np.searchsorted(ranks, colls.rank)), 1)
    incomplete = np.zeros(len(steps), dtype=bool)
    bad = colls.dur_ns < 0
    incomplete[np.unique(np.searchsorted(steps, colls.step[bad]))] = True
    k = np.bincount(counts[~incomplete].max(axis=1)).argmax() if (~incomplete).any() else 0
    ok = (counts == k).all(axis=1) & ~incomplete & (k > 0)
    if (~ok).any():
        left.append(
            f"{int((~ok).sum())} step(s) whose collectives differ between ranks or never completed"
        )
    return steps[ok], left


def build_grid(
    run: Run, steps: np.ndarray | None = None, last: int | None = None
) -> tuple[StepGrid | None, list[str]]:
    """The model of ``steps`` (default: every recorded step of every rank; with ``last``,
    the last that many), and what it left out; None when nothing could be modelled."""
    events = run.events
    clocks = align_clocks(run)
    step_rows = _step_rows(events, steps)
    left_first: list[str] = []
    recorded = np.unique(step_rows.step)
    if last is not None and len(recorded) > last:
        step_rows = step_rows.select(step_rows.step >= recorded[-last])
        left_first.append(f"the first {len(recorded) - last} steps (the last {last} replayed)")
    ranks = np.unique(step_rows.rank)
    if len(ranks) < 2:
        return None, ["fewer than two ranks recorded steps"]
    per_step = np.bincount(np.unique(step_rows.step, return_inverse=True)[1])
    all_steps = np.unique(step_rows.step)
    steps_all_ranks = all_steps[per_step == len(ranks)]
    left = left_first + ([] if len(steps_all_ranks) == len(all_steps) else [
        f"{len(all_steps) - len(steps_all_ranks)} step(s) some rank did not record"
    ])  # fmt: skip
    colls = events.of_kind(Kind.COLLECTIVE)
    colls = colls.select(
        (colls.seq >= 0) & np.isin(colls.step, steps_all_ranks) & np.isin(colls.rank, ranks)
    )
    kept, more = _regular_steps(colls, ranks, steps_all_ranks)
    left += more
    if len(kept) == 0:
        return None, left or ["no step with collectives"]
    return _grid(events, clocks, step_rows, colls, ranks, kept), left


def _grid(events, clocks, step_rows, colls, ranks, steps) -> StepGrid:
    n_s, n_r = len(steps), len(ranks)
    colls = colls.select(np.isin(colls.step, steps))
    issue_all = aligned_start_ns(colls, clocks)
    order = _by_step_rank_issue(colls.step, colls.rank, issue_all, n_r)
    colls, issue = colls.select(order), issue_all[order]
    k = len(colls) // (n_s * n_r)
    shape = (n_s, n_r, k)
    issue = issue.reshape(shape).astype(np.float64)
    done = issue + colls.dur_ns.reshape(shape)
    group = colls.group.reshape(shape)
    arrival = _arrivals(issue, done, group)
    last = _last_arrivals(arrival, group)
    transfer = np.maximum(done - last, 0.0)

    srows = step_rows.select(np.isin(step_rows.step, steps))
    sorder = np.lexsort((srows.rank, srows.step))
    srows = srows.select(sorder)
    t0 = aligned_start_ns(srows, clocks).reshape(n_s, n_r).astype(np.float64)
    t1 = t0 + srows.dur_ns.reshape(n_s, n_r)
    join_start = _join_starts(events, clocks, steps, ranks, t0)
    joins = ~np.isnan(join_start)

    blocking = np.zeros(shape, dtype=bool)
    blocking[:, :, :-1] = issue[:, :, 1:] >= done[:, :, :-1]
    blocking[:, :, -1] = ~joins & (t1 >= done[:, :, -1])
    release = np.where(blocking, done, issue)
    before = np.concatenate([t0[:, :, None], release[:, :, :-1]], axis=2)
    work = np.maximum(issue - before, 0.0)
    latest = done.max(axis=2)
    js = np.where(joins, join_start, release[:, :, -1])
    prejoin = np.where(joins, np.maximum(js - release[:, :, -1], 0.0), 0.0)
    post = np.where(
        joins, np.maximum(t1 - np.maximum(js, latest), 0.0), np.maximum(t1 - release[:, :, -1], 0.0)
    )
    gap = np.zeros((n_s, n_r))
    consecutive = np.diff(steps) == 1
    gap[:-1] = np.where(consecutive[:, None], np.maximum(t0[1:] - t1[:-1], 0.0), 0.0)
    after_join = np.where(joins, np.maximum(js, latest), release[:, :, -1])
    starts = np.concatenate([before, release[:, :, -1:], after_join[:, :, None]], axis=2)
    ends = np.concatenate([issue, js[:, :, None], t1[:, :, None]], axis=2)
    parts = _phase_parts(events, clocks, steps, ranks, starts, ends)
    return StepGrid(
        steps=steps, ranks=ranks, group=group[0], work_ns=work, blocking=blocking,
        transfer_ns=transfer, prejoin_ns=prejoin, post_ns=post, joins=joins, gap_ns=gap,
        step_ns=srows.dur_ns.reshape(n_s, n_r).astype(np.float64),
        samples=srows.count.reshape(n_s, n_r).astype(np.float64),
        ops=tuple(colls.symbols[int(i)] for i in colls.name.reshape(shape)[0, 0]),
        phase_ns=parts,
    )  # fmt: skip


def _phase_parts(events, clocks, steps, ranks, starts, ends) -> dict[str, np.ndarray]:
    """Per phase name: its rows' overlap with each part of each rank's step (``starts``,
    ``ends``: (steps, ranks, parts) on the common clock)."""
    phases = events.of_kind(Kind.PHASE)
    phases = phases.select(np.isin(phases.step, steps) & np.isin(phases.rank, ranks))
    if len(phases) == 0:
        return {}
    begin = aligned_start_ns(phases, clocks).astype(np.float64)
    finish = begin + phases.dur_ns
    at = (np.searchsorted(steps, phases.step), np.searchsorted(ranks, phases.rank))
    out = {}
    for name in np.unique(phases.strings("name")):
        rows = phases.where("name", str(name))
        where = (at[0][rows], at[1][rows])
        parts = np.zeros(starts.shape)
        for j in range(starts.shape[2]):
            lo = np.maximum(begin[rows], starts[:, :, j][where])
            hi = np.minimum(finish[rows], ends[:, :, j][where])
            np.add.at(parts[:, :, j], where, np.maximum(hi - lo, 0.0))
        out[str(name)] = parts
    return out


def _by_step_rank_issue(
    step: np.ndarray, rank: np.ndarray, issue: np.ndarray, n_ranks: int
) -> np.ndarray:
    """The order of rows by (step, rank, issue). The table holds each rank's rows in the
    order it recorded them, so a stable sort by (step, rank) merges a few long runs; a full
    sort only where some rank recorded a collective before an earlier-issued one."""
    key = step.astype(np.int64) * (int(rank.max()) + 1 if len(rank) else 1) + rank
    order = np.argsort(key, kind="stable")
    sorted_key, sorted_issue = key[order], issue[order]
    same = sorted_key[1:] == sorted_key[:-1]
    if np.all(sorted_issue[1:][same] >= sorted_issue[:-1][same]):
        return order
    return np.lexsort((issue, key))


def _arrivals(issue: np.ndarray, done: np.ndarray, group: np.ndarray) -> np.ndarray:
    """max(issue, completion of the rank's previous collective on the same group)."""
    arrival = issue.copy()
    for k in range(1, issue.shape[2]):
        for j in range(k):
            same = group[:, :, j] == group[:, :, k]
            arrival[:, :, k] = np.where(
                same, np.maximum(arrival[:, :, k], done[:, :, j]), arrival[:, :, k]
            )
    return arrival


def _last_arrivals(arrival: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per (step, rank, k): the latest arrival over the ranks on the same group at k."""
    last = np.empty_like(arrival)
    for k in range(arrival.shape[2]):
        g = group[0, :, k]
        for gid in np.unique(g):
            members = g == gid
            last[:, members, k] = arrival[:, members, k].max(axis=1, keepdims=True)
    return last


def _join_starts(events, clocks, steps, ranks, t0) -> np.ndarray:
    """Per (step, rank): the start of the comm_wait phase on the common clock; NaN without."""
    phases = events.of_kind(Kind.PHASE)
    rows = phases.select(
        phases.where("name", "comm_wait")
        & np.isin(phases.step, steps)
        & np.isin(phases.rank, ranks)
    )
    out = np.full(t0.shape, np.nan)
    if len(rows):
        starts = aligned_start_ns(rows, clocks).astype(np.float64)
        at = (np.searchsorted(steps, rows.step), np.searchsorted(ranks, rows.rank))
        out[at] = starts
    return out


# --- the replay ----------------------------------------------------------------------------


def replay(grid: StepGrid, keep_times: bool = False) -> Replayed:
    """Every step after the other on every rank at once; steps that do not follow each other
    (a left-out step between) start together. ``keep_times``: also when each collective was
    issued and completed (for a timeline)."""
    n_s, n_r, n_k = grid.shape
    start = np.zeros(n_r)
    durations, waits = np.empty((n_s, n_r)), np.empty((n_s, n_r))
    times = (
        ReplayTimes(np.empty((n_s, n_r)), np.empty((n_s, n_r)), np.empty(grid.shape),
                    np.empty(grid.shape))
        if keep_times else None
    )  # fmt: skip
    members = [[grid.group[:, k] == g for g in np.unique(grid.group[:, k])] for k in range(n_k)]
    for s in range(n_s):
        cursor, waited = start.copy(), np.zeros(n_r)
        done = np.empty((n_r, n_k))
        for k in range(n_k):
            issue = cursor + grid.work_ns[s, :, k]
            arrival = issue.copy()
            for j in range(k):
                same = grid.group[:, j] == grid.group[:, k]
                arrival = np.where(same, np.maximum(arrival, done[:, j]), arrival)
            last = np.empty(n_r)
            for m in members[k]:
                last[m] = arrival[m].max()
            done[:, k] = last + grid.transfer_ns[s, :, k]
            if times is not None:
                times.issue_ns[s, :, k] = issue
            cursor = np.where(grid.blocking[s, :, k], done[:, k], issue)
            waited += np.where(grid.blocking[s, :, k], done[:, k] - issue, 0.0)
        ready = cursor + grid.prejoin_ns[s]
        latest = done.max(axis=1)
        joined = np.where(grid.joins[s], np.maximum(ready, latest), cursor)
        waited += np.where(grid.joins[s], joined - ready, 0.0)
        end = joined + grid.post_ns[s]
        durations[s], waits[s] = end - start, waited
        if times is not None:
            times.start_ns[s], times.end_ns[s], times.done_ns[s] = start, end, done
        follows = s + 1 < n_s and grid.steps[s + 1] == grid.steps[s] + 1
        start = end + grid.gap_ns[s] if follows else np.full(n_r, (end + grid.gap_ns[s]).max())
    return Replayed(durations, waits, times)


def predict(grid: StepGrid, label: str, rows: np.ndarray | None = None) -> Prediction:
    """The replay summed up over ``rows`` of the grid (default: all): the step is the
    median over ranks, then over steps."""
    played = replay(grid)
    rows = slice(None) if rows is None else rows
    per_step = np.median(played.step_ns[rows], axis=1) / 1e6
    low, high = np.percentile(per_step, PERCENTILES)
    return Prediction(
        label=label,
        step_ms=float(np.median(per_step)),
        low_ms=float(low),
        high_ms=float(high),
        wait_ms_per_rank=tuple(float(w) for w in played.wait_ns[rows].mean(axis=0) / 1e6),
    )


# --- counterfactuals -----------------------------------------------------------------------

OWN_FIELDS = ("work_ns", "prejoin_ns", "post_ns", "gap_ns")
ONSET_MIN_STEPS = 3
"""Steps on each side of a cause that began mid-run, at least."""


def rank_index(grid: StepGrid, ranks: list[int]) -> np.ndarray:
    missing = sorted(set(ranks) - set(grid.ranks.tolist()))
    if missing:
        known = describe_ranks(grid.ranks)
        raise ValueError(f"rank {', '.join(map(str, missing))} is not in the model (ranks {known})")
    return np.searchsorted(grid.ranks, ranks)


def at_peers_pace(grid: StepGrid, idx: np.ndarray) -> StepGrid:
    """The ranks ``idx``' own durations replaced, step by step, by the median of the others'."""
    others = np.ones(len(grid.ranks), dtype=bool)
    others[idx] = False
    if not others.any():
        raise ValueError("every rank would be fixed: no other rank gives the pace")

    def paced(a: np.ndarray) -> np.ndarray:
        out = a.copy()
        out[:, idx] = np.median(a[:, others], axis=1, keepdims=True)
        return out

    return replace(grid, **{f: paced(getattr(grid, f)) for f in OWN_FIELDS})


def onset(grid: StepGrid, idx: np.ndarray) -> int | None:
    """The row from which the ranks ``idx`` do clearly more own work than the others, when
    they did not before it (a cause that began mid-run); None otherwise."""
    own = grid.own_ns()
    others = np.ones(len(grid.ranks), dtype=bool)
    others[idx] = False
    if not others.any() or len(own) < 2 * ONSET_MIN_STEPS:
        return None
    excess = own[:, idx].mean(axis=1) - np.median(own[:, others], axis=1)
    splits = range(ONSET_MIN_STEPS, len(own) - ONSET_MIN_STEPS + 1)
    x = min(splits, key=lambda i: _spread(excess[:i]) + _spread(excess[i:]))
    before, after = np.median(excess[:x]), np.median(excess[x:])
    floor = 0.05 * float(np.median(grid.step_ns))
    return x if after > floor and before < 0.25 * after else None


def _spread(a: np.ndarray) -> float:
    """Absolute deviations from the median, summed: the split of a series into the two
    parts that spread least is where it changed level (robust to one-off slow steps)."""
    return float(np.abs(a - np.median(a)).sum())


def before_onset(x: int) -> slice:
    """The rows a cause that began at row ``x`` is judged by: the steps before it, less
    their first quarter (a run's first steps carry its start-up: first iterations, the
    allocator growing)."""
    return slice(x // 4, x)


def fix_ranks(grid: StepGrid, idx: np.ndarray) -> tuple[StepGrid, str, slice | None]:
    """The ranks ``idx`` fixed. Where their extra work began mid-run, the steps before it
    are the run without it: the rows to replay instead (what the others lost since, caches
    cold after waiting, cores shared differently, goes with the cause). Otherwise those
    ranks work at the pace of the others, step by step."""
    x = onset(grid, idx)
    if x is None:
        return at_peers_pace(grid, idx), "at the pace of the other ranks", None
    rows = before_onset(x)
    first, last = int(grid.steps[rows.start]), int(grid.steps[x - 1])
    return grid, f"began at step {int(grid.steps[x])}: as in steps {first}-{last}", rows


def scaled(grid: StepGrid, compute: float = 1.0, comm: float = 1.0) -> StepGrid:
    """Own time divided by ``compute``, transfers by ``comm`` (``inf``: no transfer time)."""
    if compute <= 0 or comm <= 0:
        raise ValueError("speed-ups must be positive")
    return replace(
        grid, work_ns=grid.work_ns / compute, prejoin_ns=grid.prejoin_ns / compute,
        post_ns=grid.post_ns / compute, transfer_ns=grid.transfer_ns / comm,
    )  # fmt: skip


def with_delay(grid: StepGrid, rank: int, delay_ns: float, at: int = 0) -> StepGrid:
    """``rank`` slower by ``delay_ns`` per step, in its own time before collective ``at``
    (``at`` = the number of collectives: after the join)."""
    i = int(rank_index(grid, [rank])[0])
    if at >= grid.shape[2]:
        post = grid.post_ns.copy()
        post[:, i] += delay_ns
        return replace(grid, post_ns=post)
    work = grid.work_ns.copy()
    work[:, i, at] += delay_ns
    return replace(grid, work_ns=work)


def describe_ranks(ranks: np.ndarray) -> str:
    return f"{int(ranks[0])}-{int(ranks[-1])}" if len(ranks) > 1 else str(int(ranks[0]))


# --- what fixing a cause buys --------------------------------------------------------------

CAUSES_HELP = (
    "rank:N, node:HOST, phase:NAME (data, forward, ..., eval, checkpoint), eval, checkpoint, "
    "compute:X (X times faster), comm:X or comm:hidden"
)
ALIASES = {"eval": "phase:eval", "checkpoint": "phase:checkpoint"}
"""Rank-only work by its own name: the phase of that name, on every rank that does it."""
CANDIDATE_PHASES = ("data", "eval", "checkpoint")
"""Phases tried as causes without ``--fix``: input waits and work beside training."""
PHASE_CANDIDATE_SHARE = 0.05
"""...when they take at least this share of the ranks' own time."""


def apply_fix(
    grid: StepGrid, cause: str, hosts: dict[int, str]
) -> tuple[StepGrid, str, slice | None]:
    """The grid with ``cause`` fixed (several joined by ``+``, fixed together: the ranks
    named are paced by the ranks not named), how, and the rows to judge it by when the
    fixed ranks' cause began mid-run (``fix_ranks``)."""
    ranks: list[int] = []
    speeds: list[tuple[str, float]] = []
    phases: list[str] = []
    for part in cause.split("+"):
        kind, _, value = ALIASES.get(part, part).partition(":")
        if kind in ("rank", "node"):
            ranks += _ranks_of(part, kind, value, hosts)
        elif kind == "phase":
            phases.append(_phase_of(grid, part, value))
        elif kind in ("compute", "comm"):
            speeds.append(
                (kind, np.inf if (kind, value) == ("comm", "hidden") else _speed(part, value))
            )
        else:
            raise ValueError(f"unknown cause {part!r}: use {CAUSES_HELP}")
    notes, rows = [], None
    if ranks:
        grid, note, rows = fix_ranks(grid, rank_index(grid, sorted(set(ranks))))
        notes.append(note)
    for name in phases:
        grid = without_phase(grid, name)
        notes.append(f"no {name} time")
    for kind, speed in speeds:
        grid = scaled(grid, **{kind: speed})
        notes.append("no transfer time" if speed == np.inf else f"{kind} {speed:g}x faster")
    return grid, "; ".join(notes), rows


def _phase_of(grid: StepGrid, part: str, name: str) -> str:
    if name not in grid.phase_ns:
        known = ", ".join(sorted(grid.phase_ns)) or "none"
        raise ValueError(f"bad cause {part!r}: no {name!r} phase was recorded (phases: {known})")
    return name


def without_phase(grid: StepGrid, name: str) -> StepGrid:
    """Every rank's own time less the phase ``name`` (input waits gone, no evaluation)."""
    parts = grid.phase_ns[name]
    k = grid.shape[2]
    return replace(
        grid,
        work_ns=np.maximum(grid.work_ns - parts[:, :, :k], 0.0),
        prejoin_ns=np.maximum(grid.prejoin_ns - parts[:, :, k], 0.0),
        post_ns=np.maximum(grid.post_ns - parts[:, :, k + 1], 0.0),
    )


def _ranks_of(part: str, kind: str, value: str, hosts: dict[int, str]) -> list[int]:
    if kind == "rank":
        if not value.isdigit():
            raise ValueError(f"bad cause {part!r}: rank:N takes a rank number")
        return [int(value)]
    ranks = [r for r, h in sorted(hosts.items()) if h == value]
    if not ranks:
        known = ", ".join(sorted(set(hosts.values()))) or "none recorded"
        raise ValueError(f"no rank ran on node {value!r} (nodes: {known})")
    return ranks


def _speed(part: str, value: str) -> float:
    try:
        speed = float(value.removeprefix("x"))
    except ValueError:
        raise ValueError(f"bad cause {part!r}: the speed-up must be a number") from None
    if not speed > 0 or not np.isfinite(speed):
        raise ValueError(f"bad cause {part!r}: the speed-up must be positive")
    return speed


def candidate_causes(grid: StepGrid, hosts: dict[int, str], limit: int = TOP_RANKS) -> list[str]:
    """The node whose ranks have the most own time per step (with several nodes), the ranks
    with the most, input waits and rank-only work (when they take 5 % of the own time),
    exposed transfers, and the first two of these together."""
    own = grid.own_ns().mean(axis=0)
    causes = []
    by_host: dict[str, list[int]] = {}
    for i, rank in enumerate(grid.ranks.tolist()):
        by_host.setdefault(hosts.get(rank, ""), []).append(i)
    if len(by_host) > 1 and "" not in by_host:
        host = max(sorted(by_host), key=lambda h: float(own[by_host[h]].mean()))
        causes.append(f"node:{host}")
    order = np.argsort(-own, kind="stable")[: min(limit, len(grid.ranks) - 1)]
    causes += [f"rank:{int(grid.ranks[i])}" for i in order]
    own_total = float(grid.own_ns().sum())
    for name in CANDIDATE_PHASES:
        if name in grid.phase_ns and grid.phase_ns[name].sum() >= PHASE_CANDIDATE_SHARE * own_total:
            causes.append(ALIASES.get(name, f"phase:{name}"))
    if grid.transfer_ns.any():
        causes.append("comm:hidden")
    if len(causes) >= 2:
        causes.append(f"{causes[0]}+{causes[-1]}")
    return causes


def what_if(
    run: Run, warmup_steps: int = 1, causes: list[str] | None = None, last: int | None = None
) -> WhatIf | None:
    """The measured steps (``step >= warmup_steps``; every step when none is) replayed as
    measured and with each cause fixed (default: ``candidate_causes``, largest gain first).
    The replay runs over every recorded step, so a cause that began in the warm-up is seen
    beginning. None when
    the run gives no model (``build_grid``). ``last``: replay only the last that many steps
    (the report's bound on a long run's cost)."""
    grid, left = build_grid(run, last=last)
    if grid is None:
        return None
    rows = grid.steps >= warmup_steps
    if not rows.any():
        rows[:] = True
        left.append("no step after the warm-up: every step counted")
    hosts = {r: m.hostname for r, m in run.ranks.items()}
    base = predict(grid, "as measured", rows)
    samples = float(np.median(grid.samples[rows].sum(axis=1)))
    fixes = []
    for cause in causes if causes is not None else candidate_causes(grid, hosts):
        fixed, note, before = apply_fix(grid, cause, hosts)
        after = predict(fixed, cause, rows if before is None else before)
        gain = base.step_ms - after.step_ms
        rate = samples / after.step_ms * 1e3 if samples > 0 and after.step_ms > 0 else None
        pct = 100.0 * gain / base.step_ms if base.step_ms > 0 else 0.0
        fixes.append(Fix(cause, after, gain, pct, rate, note))
    if causes is None:
        fixes.sort(key=lambda f: -f.gain_ms)
    return WhatIf(
        measured_step_ms=float(np.median(np.median(grid.step_ns[rows], axis=1))) / 1e6,
        replayed=base, fixes=tuple(fixes), steps=int(rows.sum()), ranks=grid.shape[1],
        collectives_per_step=grid.shape[2], left_out=tuple(left),
    )  # fmt: skip


# --- a timeline of the replay --------------------------------------------------------------

TIMELINE_STEPS = 5
TIMELINE_RANKS = 16


@dataclass(frozen=True)
class WhatIfTimeline:
    """A few steps replayed as measured and with ``cause`` fixed, for a Chrome trace."""

    cause: str
    note: str
    ranks: tuple[int, ...]
    steps: tuple[int, ...]
    """The step numbers shown, as measured (the fixed replay's rows may be earlier steps:
    ``note`` says so when the cause began mid-run)."""
    ops: tuple[str, ...]
    measured: ReplayTimes
    fixed: ReplayTimes


def _window(times: ReplayTimes, rows: np.ndarray, ranks: np.ndarray) -> ReplayTimes:
    """``times`` of ``rows`` x ``ranks``, from 0 at the first row's earliest start."""
    t0 = times.start_ns[rows[0]].min()
    pick = np.ix_(rows, ranks)
    return ReplayTimes(
        times.start_ns[pick] - t0, times.end_ns[pick] - t0,
        times.issue_ns[rows][:, ranks] - t0, times.done_ns[rows][:, ranks] - t0,
    )  # fmt: skip


def replay_timeline(
    run: Run, warmup_steps: int, cause: str, steps: int = TIMELINE_STEPS
) -> WhatIfTimeline | None:
    """The last ``steps`` measured steps of ``run`` replayed as measured, and the same number
    replayed with ``cause`` fixed (from the steps it is judged by), on up to 16 ranks."""
    grid, _ = build_grid(run)
    if grid is None:
        return None
    hosts = {r: m.hostname for r, m in run.ranks.items()}
    fixed, note, before = apply_fix(grid, cause, hosts)
    measured_rows = np.flatnonzero(grid.steps >= warmup_steps)
    if len(measured_rows) == 0:
        measured_rows = np.arange(grid.shape[0])
    fixed_rows = measured_rows if before is None else np.arange(grid.shape[0])[before]
    ranks = np.arange(min(len(grid.ranks), TIMELINE_RANKS))
    a = _window(replay(grid, keep_times=True).times, measured_rows[-steps:], ranks)
    b = _window(replay(fixed, keep_times=True).times, fixed_rows[-steps:], ranks)
    return WhatIfTimeline(
        cause=cause, note=note, ranks=tuple(int(r) for r in grid.ranks[ranks]),
        steps=tuple(int(s) for s in grid.steps[measured_rows[-steps:]]), ops=grid.ops,
        measured=a, fixed=b,
    )  # fmt: skip
