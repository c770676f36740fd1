"""The measured steps as a model to replay (``StepGrid``): per step, rank and collective,
what the rank did on its own and what it waited for.

- ``work_ns``: the rank's own time before it issued collective k, counted from the point its
  compute was released after collective k-1 (the step's start for the first);
- ``blocking``: whether the rank's compute waited for collective k to complete (its next
  collective was issued after the completion), or went on (DDP's gradient buckets; the first
  of DDP's two buffer broadcasts, as c10d's ``broadcast_coalesced`` issues both before it
  waits: the host does not wait for the first before it issues the second, and the time
  between the two issues is the rank's own, a loaded machine's stalls there included);
- ``transfer_ns``: collective k's completion on the rank minus the last arrival of its
  instance (a rank *arrives* at its issue, or when its previous collective on the same group
  completes, as in matching.py). An *instance* is a rank's n-th collective on a group with
  every other member's n-th on it (``instances``): a collective sits at the same place of
  every member's step, a send and its receive may not (a pipeline's stages). A send's or
  recv's group is its channel (group, source, destination: ``matching.p2p_channels``), so
  the n-th send from A to B meets the n-th recv on B from A;
- the step's tail: own time up to the join (the ``comm_wait`` phase, where a DDP rank waits
  for its outstanding buckets), then own time after it, and the gap to the next step;
- each phase's time inside each of those parts (``phase_ns``).

The grid needs every rank to issue the same collectives in every step (data-parallel,
sharded and tensor-parallel steps do), the same groups, ops and sizes in the same order
(step_match.py): steps that differ, collectives that never completed, and ranks without events
are left out and named.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from scalescope.analyze.columns.sorting import sort_order
from scalescope.analyze.layouts.p2p import waited_ends
from scalescope.analyze.model.batches import batch_waits, held_release
from scalescope.analyze.model.phase_parts import phase_parts
from scalescope.analyze.model.run_sample import RunSample
from scalescope.analyze.model.step_match import by_step_rank_issue, regular_steps
from scalescope.analyze.ranks.clocks import ClockAlignment, align_clocks, aligned_start_ns
from scalescope.analyze.ranks.groups import dim_lookup, dims_of, process_groups
from scalescope.analyze.ranks.matching import p2p_channels
from scalescope.analyze.ranks.summary_waits import summarised_steps
from scalescope.events import EventTable, Kind, Run
from scalescope.events.tags import GRADIENTS, tag_kind


@dataclass(frozen=True)
class StepGrid:
    """The measured steps as arrays of shape (steps, ranks, collectives) or (steps, ranks)."""

    steps: np.ndarray
    ranks: np.ndarray
    group: np.ndarray
    """(ranks, collectives): the group symbol of each rank's k-th collective (a send's or
    recv's that names its peer: its channel's id, past the symbols)."""
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
    op_names: np.ndarray | None = None
    """(ranks, collectives): each rank's op at each place of its step (``send``, ...)."""
    nbytes: np.ndarray | None = None
    """(ranks, collectives): its message size."""
    dims: np.ndarray | None = None
    """(ranks, collectives): the mesh dimension (or role) of its group, as analyze/groups.py
    names it (``tp``, ``dp``, ``world``, ``stride 2``, ...); "" where none is known."""
    tags: np.ndarray | None = None
    """(ranks, collectives): its tag (events/tags.py: who issued it)."""
    group_symbol: np.ndarray | None = None
    """(ranks, collectives): its group's symbol (``group`` holds a send's or recv's channel
    instead)."""
    waits_with: np.ndarray | None = None
    """(ranks, collectives): for a send or recv the rank went on from, the place of the last
    op of its batch, where the rank waits for the whole batch (batches.py); -1 elsewhere."""
    phase_ns: dict[str, np.ndarray] = field(default_factory=dict)
    """(steps, ranks, collectives + 2): each phase's time inside each part of a rank's own
    time: before each collective, before the join, after it (``phase:NAME`` removes it)."""
    summarised: int = 0
    """Steps left out because they hold summaries only (``--record summary``): ``steps``
    are then the windows recorded in full."""
    sample: RunSample | None = None
    """What the summaries say of the measured steps left out (model/window_sample.py)."""

    @property
    def shape(self) -> tuple[int, int, int]:
        return self.work_ns.shape

    def own_ns(self) -> np.ndarray:
        """(steps, ranks): each rank's own time per step, waits left out."""
        return self.work_ns.sum(axis=2) + self.prejoin_ns + self.post_ns


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


SUMMARISED = "{} step(s) recorded as summaries (--record summary): the full-row windows replayed"

PHASES_KEPT = ("data", "to_device", "eval", "checkpoint")
"""The phases ``phase_ns`` holds unless asked for others: input waits and work beside
training, the phases the what-if tries as causes by itself."""


def build_grid(
    run: Run, steps: np.ndarray | None = None, last: int | None = None,
    phases: tuple[str, ...] = PHASES_KEPT, clocks: tuple[ClockAlignment, ...] | None = None,
) -> tuple[StepGrid | None, list[str]]:  # fmt: skip
    """The model of ``steps`` (default: every recorded step of every rank; with ``last``,
    the last that many) with the parts of ``phases``, and what it left out; None when
    nothing could be modelled."""
    events = run.events
    clocks = clocks if clocks is not None else align_clocks(run)
    step_rows = _step_rows(events, steps)
    summarised = summarised_steps(events)
    step_rows = step_rows.select(~np.isin(step_rows.step, summarised))
    left_first = [SUMMARISED.format(len(summarised))] if len(summarised) else []
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
    kept, more = regular_steps(colls, ranks, steps_all_ranks)
    left += more
    if len(kept) == 0:
        return None, left or ["no step with collectives"]
    grid = _grid(events, clocks, step_rows, colls, ranks, kept, phases)
    dims = _dims(run, colls, grid.group_symbol)
    return replace(grid, dims=dims, summarised=len(summarised)), left


def _dims(run: Run, colls: EventTable, group: np.ndarray) -> np.ndarray:
    """(ranks, collectives) of group symbols -> the dimension of each group ("" for none)."""
    lookup, names = dim_lookup(colls.symbols, dims_of(process_groups(run)))
    return np.array([*names, ""])[lookup[group]]


def _grid(events, clocks, step_rows, colls, ranks, steps, phases) -> StepGrid:
    n_s, n_r = len(steps), len(ranks)
    colls = colls.select(np.isin(colls.step, steps))
    issue_all = aligned_start_ns(colls, clocks)
    order = by_step_rank_issue(colls.step, colls.rank, issue_all)
    colls, issue = colls.select(order), issue_all[order]
    k = len(colls) // (n_s * n_r)
    shape = (n_s, n_r, k)
    issue = issue.reshape(shape).astype(np.float64)
    done = _waited_for(events, colls, issue.ravel(), issue.ravel() + colls.dur_ns).reshape(shape)
    group = p2p_channels(colls)[0].reshape(shape)
    arrival = _arrivals(issue, done, group)
    last = last_arrivals(arrival, instances(group[0]))
    transfer = np.maximum(done - last, 0.0)

    srows = step_rows.select(np.isin(step_rows.step, steps))
    sorder = np.lexsort((srows.rank, srows.step))
    srows = srows.select(sorder)
    t0 = aligned_start_ns(srows, clocks).reshape(n_s, n_r).astype(np.float64)
    t1 = t0 + srows.dur_ns.reshape(n_s, n_r)
    join_start = _join_starts(events, clocks, steps, ranks, t0)
    joins = ~np.isnan(join_start)

    tags = _names(colls.symbols, colls.tag.reshape(shape)[0])
    blocking = blocking_of(issue, done, t1, joins, group[0], issued_async(tags))
    op_names = _names(colls.symbols, colls.name.reshape(shape)[0])
    waits = batch_waits(issue, blocking, op_names)
    release = held_release(np.where(blocking, done, issue), done, waits)
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
    parts = phase_parts(events, clocks, steps, ranks, starts, ends, phases)
    return StepGrid(
        steps=steps, ranks=ranks, group=group[0], work_ns=work, blocking=blocking,
        transfer_ns=transfer, prejoin_ns=prejoin, post_ns=post, joins=joins, gap_ns=gap,
        step_ns=srows.dur_ns.reshape(n_s, n_r).astype(np.float64),
        samples=srows.count.reshape(n_s, n_r).astype(np.float64),
        ops=tuple(colls.symbols[int(i)] for i in colls.name.reshape(shape)[0, 0]),
        op_names=op_names,
        nbytes=colls.nbytes.reshape(shape)[0],
        tags=tags,
        phase_ns=parts,
        group_symbol=colls.group.reshape(shape)[0],
        waits_with=waits,
    )  # fmt: skip


def _waited_for(events, colls, issue: np.ndarray, done: np.ndarray) -> np.ndarray:
    """``done`` (per row of ``colls``, on the common clock) no later than the end of the
    rank's wait for it, for the sends and recvs a rank waited for (p2p.waited_ends): their
    recorded completion may come a little after the wait returned and the rank went on,
    which would make them asynchronous (``blocking_of``) where the rank did wait."""
    rank, start, end = waited_ends(events)
    if not len(rank):
        return done
    base = int(min(start.min(), colls.start_ns.min()))
    span = int(max(start.max(), colls.start_ns.max())) - base + 1
    if span * (int(max(rank.max(), colls.rank.max())) + 1) >= 2**62:
        return done
    waited = rank * span + (start - base)
    order = np.argsort(waited)
    waited, end = waited[order], end[order]
    key = colls.rank.astype(np.int64) * span + (colls.start_ns.astype(np.int64) - base)
    at = np.minimum(np.searchsorted(waited, key), len(waited) - 1)
    hit = waited[at] == key
    by_wait = issue + (end[at] - colls.start_ns)
    return np.where(hit & (by_wait >= issue), np.minimum(done, by_wait), done)


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


def _names(symbols, ids: np.ndarray) -> np.ndarray:
    unique, inverse = np.unique(ids, return_inverse=True)
    return np.array([symbols[int(i)] for i in unique])[inverse].reshape(ids.shape)


def issued_async(tags: np.ndarray) -> np.ndarray:
    """(ranks, collectives): the collectives asynchronous by who issued them: a DDP gradient
    bucket (``gradients``) followed by another. Its reducer issues them with ``async_op`` from
    backward's hooks and waits for them only once backward is done (``comm_wait``), after
    the last: none can be waited for before the next is issued. The last bucket is left to
    the timing (a join the grid does not place, before a collective of the script's own, is
    a wait for it)."""
    unique, inverse = np.unique(tags, return_inverse=True)
    kinds = np.array([tag_kind(str(t)) == GRADIENTS for t in unique], dtype=bool)
    bucket = kinds[inverse].reshape(tags.shape)
    out = np.zeros(tags.shape, dtype=bool)
    out[:, :-1] = bucket[:, :-1] & bucket[:, 1:]
    return out


def blocking_of(issue, done, t1, joins, group, known_async=None) -> np.ndarray:
    """(steps, ranks, collectives): whether the rank's compute waited for the collective.
    An asynchronous one is seen where the rank went on before it completed; a rank that was
    slow enough found it complete each time, yet it was asynchronous all along (and the
    replay of that rank made faster must not wait for it): a collective is asynchronous on a
    rank that ever went on before it completed, and on every rank where all ranks issue it.
    ``known_async`` ((ranks, collectives) of bool, ``issued_async``): asynchronous whatever
    the timing. A bucket that completes before the next one's issue on every rank in every
    step (a late rank holds each instance back less than the backward between two buckets)
    looks blocking by timing alone: read so, the replay with that rank at the others' pace
    has the others issue their next bucket as soon as this one completes, backward's work
    in between lost (a 1.16x rank of 1,024: its fix replayed 12.9 ms, the run without it
    8.4 ms)."""
    went_on = np.zeros(issue.shape, dtype=bool)
    went_on[:, :, :-1] = issue[:, :, 1:] < done[:, :, :-1]
    went_on[:, :, -1] = joins | (t1 < done[:, :, -1])
    asynchronous = went_on.any(axis=0)
    everyone = (group == group[:1]).all(axis=0)
    asynchronous[:, everyone] |= asynchronous[:, everyone].any(axis=0)
    if known_async is not None:
        asynchronous |= known_async
    return np.broadcast_to(~asynchronous, issue.shape).copy()


def instances(group: np.ndarray) -> np.ndarray:
    """(ranks, collectives) of group symbols -> instance ids 0..n-1: each rank's n-th
    collective on a group is one instance with every other member's n-th on it."""
    n_k = group.shape[1]
    nth = np.zeros(group.shape, dtype=np.int64)
    for k in range(1, n_k):
        nth[:, k] = (group[:, :k] == group[:, k : k + 1]).sum(axis=1)
    key = group.astype(np.int64) * (n_k + 1) + nth
    return np.unique(key, return_inverse=True)[1].reshape(group.shape)


def aligned(inst: np.ndarray) -> bool:
    """Whether every instance sits at the same place of its members' steps (collectives do;
    point-to-point exchanges between stages need not)."""
    n = int(inst.max()) + 1 if inst.size else 0
    column = np.broadcast_to(np.arange(inst.shape[1]), inst.shape).ravel()
    first, last = np.full(n, inst.shape[1]), np.full(n, -1)
    np.minimum.at(first, inst.ravel(), column)
    np.maximum.at(last, inst.ravel(), column)
    return bool((first == last).all())


def last_arrivals(
    arrival: np.ndarray, inst: np.ndarray, runs: InstanceRuns | None = None
) -> np.ndarray:
    """(..., ranks, collectives): per element, the latest arrival over its instance's members
    (NaN where one of them has not arrived). ``runs``: ``instance_runs(inst)``, when the
    caller asks for the same instances many times."""
    order, starts = runs if runs is not None else instance_runs(inst)
    lead = arrival.shape[:-2]
    values = arrival.reshape(*lead, -1)[..., order]
    return np.maximum.reduceat(values, starts, axis=-1)[..., inst]


InstanceRuns = tuple[np.ndarray, np.ndarray]
"""The elements in instance order, and where each instance's run of them starts."""


def instance_runs(inst: np.ndarray) -> InstanceRuns:
    flat = inst.ravel()
    order = np.argsort(flat, kind="stable")
    ids = flat[order]
    return order, np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]])


def previous_on_group(group: np.ndarray) -> np.ndarray:
    """(ranks, collectives): the place of each rank's previous collective on the same group,
    -1 for its first. A rank arrives at a collective once the one before it on the group has
    completed: the latest completion of all those before, as each completes after the one
    ahead of it."""
    n_r, n_k = group.shape
    rank = np.repeat(np.arange(n_r), n_k)
    place = np.tile(np.arange(n_k), n_r)
    order = sort_order(rank, group.ravel().astype(np.int64), place)
    r, g = rank[order], group.ravel()[order]
    same = (r[1:] == r[:-1]) & (g[1:] == g[:-1])
    prev = np.full(n_r * n_k, -1, dtype=np.int64)
    prev[order[1:][same]] = place[order[:-1][same]]
    return prev.reshape(n_r, n_k)


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
