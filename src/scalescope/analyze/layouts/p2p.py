"""Point-to-point transfers paired across ranks: each send with its recv, each side's time
split into waiting for the peer and moving the bytes.

The n-th send from A to B on a group meets the n-th recv on B from A on that group (torch
delivers a pair's messages in order): rows are numbered within (rank, group, op, peer) by
their sequence number. Times are on the common clock (``clocks.py``). For a pair, the later
of the two issues (the sender's issue, the receiver's post) is when the transfer can start:
each side's call time (issue to completion) splits into *wait* (from its issue until the
later issue) and *transfer* (the rest), so wait + transfer is the call's recorded time.

A rank is not blocked for the whole of an async call (``isend``/``irecv``): it computes
until it waits on the work. The probe records that wait (a WAIT row, probe/p2p.py); the
*blocked* time of a side is that wait, or the whole call where none was recorded (a sync
call from C++, a trace from another tool). The part of it before the later issue is the
rank waiting for its peer: it counts as waiting in communication, as a blocking
collective's wait does (``step_slots.with_sync_waits``), not as the rank's own time.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.sorting import index_in, packed, sort_order
from scalescope.analyze.ranks.clocks import ClockAlignment, aligned_start_ns
from scalescope.analyze.ranks.summary_waits import summarised_steps
from scalescope.analyze.steps.step_slots import StepSlots, SyncWaits, phase_at
from scalescope.events import EventTable, Kind


@dataclass(frozen=True)
class P2PSides:
    """Both sides of every paired send and recv: entry ``i`` is pair i's send, entry
    ``pairs + i`` its recv. Times in ns; ``issue_ns`` on the common clock."""

    pairs: int
    rank: np.ndarray
    peer: np.ndarray
    step: np.ndarray
    group: np.ndarray
    """Symbol id of the group."""
    nbytes: np.ndarray
    issue_ns: np.ndarray
    local_issue_ns: np.ndarray
    """The issue on the rank's own clock (to find the phase it lies in)."""
    dur_ns: np.ndarray
    """The call: issue to completion."""
    wait_ns: np.ndarray
    """From the issue until the later of the pair's two issues, at most the call."""
    transfer_ns: np.ndarray
    """The call less its wait."""
    blocked_start_ns: np.ndarray
    """Own clock: when the host began to wait (its wait on the work, else the issue)."""
    blocked_ns: np.ndarray
    blocked_wait_ns: np.ndarray
    """The part of the blocked time before the later issue: waiting for the peer."""
    unpaired: int
    """Completed sends and recvs with a peer that found no completed partner."""

    @property
    def is_send(self) -> np.ndarray:
        return np.arange(2 * self.pairs) < self.pairs

    @property
    def blocked_transfer_ns(self) -> np.ndarray:
        return self.blocked_ns - self.blocked_wait_ns


def _p2p_rows(events: EventTable, kind: Kind) -> tuple[EventTable, np.ndarray]:
    """Rows of ``kind`` that are sends or recvs with a peer, and 0 (send) / 1 (recv) each."""
    rows = events.of_kind(kind)
    send, recv = events.symbols.id_of("send"), events.symbols.id_of("recv")
    rows = rows.select(((rows.name == send) | (rows.name == recv)) & (rows.peer >= 0))
    return rows, (rows.name == recv).astype(np.int64)


@dataclass(frozen=True)
class _Numbered:
    """The rows in (group, source, destination, op, sequence) order: ``order`` (indices into
    the rows), their columns in that order, ``n`` each one's place among the rows of the same
    group, source, destination and op, and where each run of those (a segment) starts."""

    order: np.ndarray
    g: np.ndarray
    s: np.ndarray
    d: np.ndarray
    r: np.ndarray
    n: np.ndarray
    starts: np.ndarray

    @classmethod
    def of(cls, rows: EventTable, role: np.ndarray) -> _Numbered:
        src = np.where(role == 0, rows.rank, rows.peer).astype(np.int64)
        dst = np.where(role == 0, rows.peer, rows.rank).astype(np.int64)
        order = sort_order(rows.group.astype(np.int64), src, dst, role, rows.seq.astype(np.int64))
        g, s, d, r = rows.group[order].astype(np.int64), src[order], dst[order], role[order]
        channel = np.r_[True, (g[1:] != g[:-1]) | (s[1:] != s[:-1]) | (d[1:] != d[:-1])]
        starts = np.flatnonzero(channel | np.r_[True, r[1:] != r[:-1]])
        n = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
        return cls(order, g, s, d, r, n, starts)

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Row indices of each pair's send and recv: a channel's sends' segment is followed
        by its recvs' (role 0 before 1), the n-th of one paired with the n-th of the other;
        by channel, then n."""
        starts = self.starts
        size = np.diff(np.r_[starts, len(self.order)])
        head = starts[:-1]
        follows = (self.r[head] == 0) & (self.r[starts[1:]] == 1)
        same = (self.g[head] == self.g[starts[1:]]) & (self.s[head] == self.s[starts[1:]])
        same &= self.d[head] == self.d[starts[1:]]
        seg = np.flatnonzero(follows & same)
        k = np.minimum(size[seg], size[seg + 1])
        offset = np.arange(int(k.sum())) - np.repeat(np.cumsum(k) - k, k)
        sends = np.repeat(starts[seg], k) + offset
        recvs = np.repeat(starts[seg + 1], k) + offset
        return self.order[sends], self.order[recvs]


def _wait_rows(events: EventTable, rows: _Numbered, sides: np.ndarray):
    """Per side (row indices into the numbered rows): the start and duration of its WAIT
    row, or -1 where none was recorded. A wait row's ``seq`` is the op's n (probe/p2p.py):
    its op is the n-th row of its (group, source, destination, op) segment."""
    waits, wrole = _p2p_rows(events, Kind.WAIT)
    start = np.full(len(sides), -1, dtype=np.int64)
    dur = np.full(len(sides), -1, dtype=np.int64)
    if len(waits) == 0 or len(sides) == 0:
        return start, dur
    at = _segment_of(rows, waits, wrole)
    size = np.diff(np.r_[rows.starts, len(rows.order)])
    seq = waits.seq.astype(np.int64)
    valid = at >= 0
    valid[valid] &= (seq[valid] >= 0) & (seq[valid] < size[at[valid]])
    position = rows.starts[at[valid]] + seq[valid]  # in the numbered order
    place = np.empty(len(rows.order), dtype=np.int64)
    place[rows.order] = np.arange(len(rows.order))
    side_at = np.full(len(rows.order), -1, dtype=np.int64)
    side_at[place[sides]] = np.arange(len(sides))
    side = side_at[position]
    mine = side >= 0
    found = np.flatnonzero(valid)[mine]
    start[side[mine]] = waits.start_ns[found]
    dur[side[mine]] = waits.dur_ns[found]
    return start, dur


def waited_ends(events: EventTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sends and recvs a rank waited for (a WAIT row: its ``Work.wait``): their rank,
    start and the end of that wait (the rank's own ns). The work had completed by then,
    whenever its completion was recorded (a poller may notice it a little later)."""
    rows, role = _p2p_rows(events, Kind.COLLECTIVE)
    if len(rows) == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    start, dur = _wait_rows(events, _Numbered.of(rows, role), np.arange(len(rows)))
    has = (start >= 0) & (dur >= 0)
    return (
        rows.rank[has].astype(np.int64),
        rows.start_ns[has].astype(np.int64),
        start[has] + dur[has],
    )


def _segment_of(rows: _Numbered, waits: EventTable, wrole: np.ndarray) -> np.ndarray:
    """Per wait row, the segment of the numbered rows with its (group, source, destination,
    op); -1 where there is none. A search among the segments (thousands), not a join of the
    millions of rows."""
    head = rows.starts
    wsrc = np.where(wrole == 0, waits.rank, waits.peer).astype(np.int64)
    wdst = np.where(wrole == 0, waits.peer, waits.rank).astype(np.int64)
    cols = [
        np.concatenate([a[head], b.astype(np.int64)])
        for a, b in ((rows.g, waits.group), (rows.s, wsrc), (rows.d, wdst), (rows.r, wrole))
    ]
    key = packed(cols)
    if key is None:
        first, inverse = _distinct(cols)
        seg = np.full(len(first), -1, dtype=np.int64)
        seg[inverse[: len(head)]] = np.arange(len(head))
        return seg[inverse[len(head) :]]
    segments, theirs = key[: len(head)], key[len(head) :]  # segments ascending
    at = np.minimum(np.searchsorted(segments, theirs), len(head) - 1)
    return np.where(segments[at] == theirs, at, -1)


def _distinct(cols: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The first entry of each distinct tuple of ``cols``, and each entry's tuple number: by
    one packed int64 key where the columns fit (ten times faster than a column-wise unique
    on a 1,024-rank pipeline's sides)."""
    key = packed(cols)
    if key is None:
        _, first, inv = np.unique(np.stack(cols), axis=1, return_index=True, return_inverse=True)
    else:
        _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return first, inv.reshape(-1)


def pair_p2p(events: EventTable, clocks: tuple[ClockAlignment, ...]) -> P2PSides | None:
    """Every completed send paired with its completed recv; None without sends or recvs that
    name their peer (a trace from before the ``peer`` column, another tool's trace)."""
    rows, role = _p2p_rows(events, Kind.COLLECTIVE)
    if len(rows) == 0:
        return None
    done = rows.dur_ns >= 0
    numbered = _Numbered.of(rows, role)
    send_i, recv_i = numbered.pairs()
    ok = done[send_i] & done[recv_i]
    send_i, recv_i = send_i[ok], recv_i[ok]
    sides = np.concatenate([send_i, recv_i])
    issue = aligned_start_ns(rows, clocks)
    later = np.tile(np.maximum(issue[send_i], issue[recv_i]), 2)
    dur = rows.dur_ns[sides].astype(np.int64)
    wait = np.clip(later - issue[sides], 0, dur)
    local = rows.start_ns[sides].astype(np.int64)
    later_local = local + (later - issue[sides])
    w_start, w_dur = _wait_rows(events, numbered, sides)
    has_wait = w_start >= 0
    b_start = np.where(has_wait, w_start, local)
    b_dur = np.where(has_wait, w_dur, dur)
    return P2PSides(
        pairs=len(send_i),
        rank=rows.rank[sides].astype(np.int64),
        peer=rows.peer[sides].astype(np.int64),
        step=rows.step[sides].astype(np.int64),
        group=rows.group[sides],
        nbytes=rows.nbytes[sides].astype(np.int64),
        issue_ns=issue[sides],
        local_issue_ns=local,
        dur_ns=dur,
        wait_ns=wait,
        transfer_ns=dur - wait,
        blocked_start_ns=b_start,
        blocked_ns=b_dur,
        blocked_wait_ns=np.clip(later_local - b_start, 0, b_dur),
        unpaired=int(done.sum()) - 2 * len(send_i),
    )


def p2p_sync_waits(events: EventTable, slots: StepSlots, sides: P2PSides) -> SyncWaits:
    """The sides' waiting for their peer in measured steps, by the phase the host began to
    wait in: to be counted as waiting in communication (``with_sync_waits``)."""
    slot = slots.slot_of(sides.rank, sides.step)
    keep = slot >= 0
    rank, start = sides.rank[keep], sides.blocked_start_ns[keep]
    return SyncWaits(
        slot=slot[keep],
        rank=rank,
        start_ns=start,
        phase=phase_at(events, rank, start),
        wait_ns=sides.blocked_wait_ns[keep].astype(np.float64),
    )


def joined(a: SyncWaits | None, b: SyncWaits | None) -> SyncWaits | None:
    """Both lists of waits as one."""
    if a is None or b is None:
        return a if b is None else b
    return SyncWaits(
        *(np.concatenate([getattr(a, f), getattr(b, f)]) for f in SyncWaits.__dataclass_fields__)
    )


@dataclass(frozen=True)
class PeerTotals:
    """One rank's transfers with one peer, in one direction, over the measured steps."""

    rank: int
    peer: int
    op: str
    """``send`` (rank sends to peer) or ``recv``."""
    group: str
    count: int
    nbytes: int
    wait_ms: float
    """Blocked waiting for the peer (until the later of the two issues)."""
    transfer_ms: float
    """Blocked after it: moving the bytes."""
    call_wait_ms: float
    """The calls' wait (issue until the later issue): with ``call_transfer_ms``, the calls'
    recorded time; more than ``wait_ms`` where an async call's rank computed meanwhile."""
    call_transfer_ms: float


@dataclass(frozen=True)
class RankP2P:
    """One rank's point-to-point figures per measured step (means over its steps)."""

    rank: int
    wait_ms_per_step: float
    transfer_ms_per_step: float
    bytes_per_step: float


@dataclass(frozen=True)
class P2PAnalysis:
    pairs: int
    unpaired: int
    peers: tuple[PeerTotals, ...]
    ranks: tuple[RankP2P, ...]


def analyze_p2p(events: EventTable, sides: P2PSides, slots: StepSlots) -> P2PAnalysis | None:
    """Per (rank, peer, op) totals and per-rank figures per step over measured steps;
    None without pairs."""
    if sides.pairs == 0:
        return None
    keep = slots.slot_of(sides.rank, sides.step) >= 0
    return P2PAnalysis(
        pairs=sides.pairs,
        unpaired=sides.unpaired,
        peers=_peer_totals(events, sides, keep),
        ranks=_rank_figures(sides, keep, slots, summarised_steps(events)),
    )


def _peer_totals(events: EventTable, sides: P2PSides, keep: np.ndarray) -> tuple[PeerTotals, ...]:
    role = np.where(sides.is_send, 0, 1)
    cols = [sides.rank, sides.peer, role, sides.group.astype(np.int64)]
    cols = [c[keep] for c in cols]
    if len(cols[0]) == 0:
        return ()
    first, inv = _distinct(cols)
    uniq = np.stack(cols)[:, first]
    n = uniq.shape[1]

    def total(values: np.ndarray) -> np.ndarray:
        return np.bincount(inv, weights=values[keep].astype(np.float64), minlength=n)

    count = np.bincount(inv, minlength=n)
    nbytes, wait, moved = (
        total(sides.nbytes),
        total(sides.blocked_wait_ns),
        total(sides.blocked_transfer_ns),
    )
    call_wait, call_moved = total(sides.wait_ns), total(sides.transfer_ns)
    return tuple(
        PeerTotals(
            rank=int(uniq[0, i]),
            peer=int(uniq[1, i]),
            op=("send", "recv")[int(uniq[2, i])],
            group=events.symbols[int(uniq[3, i])],
            count=int(count[i]),
            nbytes=int(nbytes[i]),
            wait_ms=float(wait[i]) / 1e6,
            transfer_ms=float(moved[i]) / 1e6,
            call_wait_ms=float(call_wait[i]) / 1e6,
            call_transfer_ms=float(call_moved[i]) / 1e6,
        )
        for i in range(n)
    )


def _rank_figures(
    sides: P2PSides, keep: np.ndarray, slots: StepSlots, summarised: np.ndarray
) -> tuple[RankP2P, ...]:
    """Per rank with pairs in measured steps, all ranks at once (a bincount over the slots'
    ranks, not a mask per rank: a 1,024-rank pipeline has millions of sides). On a run
    recorded as summaries (``summarised``: its steps without full rows), per window step."""
    ranks = slots.ranks
    idx = index_in(ranks, sides.rank[keep])
    steps = np.maximum(slots.steps_per_rank(), 1).astype(np.float64)
    if len(summarised):
        full = index_in(ranks, slots.rank[~np.isin(slots.step, summarised)])
        steps = np.maximum(np.bincount(full, minlength=len(ranks)), 1).astype(np.float64)

    def per_step(values: np.ndarray) -> np.ndarray:
        weights = values[keep].astype(np.float64)
        return np.bincount(idx, weights=weights, minlength=len(ranks)) / steps

    wait, moved = per_step(sides.blocked_wait_ns) / 1e6, per_step(sides.blocked_transfer_ns) / 1e6
    nbytes = per_step(sides.nbytes)
    present = np.bincount(idx, minlength=len(ranks)) > 0
    return tuple(
        RankP2P(int(ranks[i]), float(wait[i]), float(moved[i]), float(nbytes[i]))
        for i in np.flatnonzero(present)
    )
