"""Match each collective across ranks by (process group, sequence number); split its time
into waiting for the last rank to arrive and moving the bytes once all have arrived.

An *instance* is one ``(group, seq)`` completed (``dur_ns >= 0``) on every rank that
recorded that group; for a send or recv that names its peer, one pair: the n-th send from A
to B on a group with the n-th recv on B from A (``p2p_channels``). Times are on the common
clock (``clocks.py``). A rank *arrives* at an instance at ``max(issue, completion of its
previous collective on the same group)``: the backend runs a group's collectives one after
another, so DDP's asynchronous buckets queue behind each other and a bucket issued early is
not ready before the one ahead of it is done.

Everything is computed for all instances at once with sorts and segment reductions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.grouping import group_by
from scalescope.analyze.columns.sorting import distinct, packed, sort_order
from scalescope.analyze.ranks.clocks import ClockAlignment, aligned_start_ns
from scalescope.analyze.ranks.groups import dim_lookup
from scalescope.events import EventTable, Kind, SymbolTable

DENSE_CELLS = 1 << 24
"""Cells of a dense count (groups x ranks, or instances) at most: 16 M."""
SEQ_BITS = 40
"""(group id, seq) are packed into one int64 key: seq must stay below 2**40."""


@dataclass(frozen=True)
class WaitStats:
    """Waiting versus transfer for one (op, tag, message size) over its matched instances."""

    op: str
    tag: str
    nbytes: int
    instances: int
    """Instances seen on every rank of the group (unmatched ones are left out)."""
    skew_avg_us: float
    """Mean over instances of (last arrival − first arrival) on the common clock."""
    skew_max_us: float
    wait_avg_us: float
    """Mean over instances and ranks of (last arrival − this rank's arrival)."""
    transfer_avg_us: float
    """Mean over instances and ranks of (completion − last arrival): moving the bytes."""
    wait_share_pct: float
    """wait / (wait + transfer) × 100."""
    dim: str = ""
    """The mesh dimension or role of its groups (analyze/ranks/groups.py); "" where not given."""


@dataclass(frozen=True)
class DimWaits:
    """Waiting versus transfer on one mesh dimension (or role) over its matched instances:
    WaitStats' split, summed per rank as DimTotals sums the calls' time."""

    dim: str
    instances: int
    ranks: int
    """Ranks that took part in its instances."""
    wait_ms_per_rank: float
    """(last arrival − arrival) summed over its instances, per rank of ``ranks``."""
    transfer_ms_per_rank: float
    """(completion − last arrival) summed likewise."""
    wait_share_pct: float
    """wait / (wait + transfer) × 100 (0 when both are 0)."""


@dataclass(frozen=True)
class Matched:
    """Rows of matched instances, sorted by instance, then arrival (the last arrival last).

    Per-row arrays have one value per (instance, rank); per-instance arrays one per instance.
    """

    rank: np.ndarray
    step: np.ndarray
    local_start_ns: np.ndarray
    """Issue time on the rank's own clock (to compare with its phase rows)."""
    tag: np.ndarray
    inst: np.ndarray
    """Instance index of each row."""
    wait_ns: np.ndarray
    transfer_ns: np.ndarray
    first: np.ndarray
    """Index of each instance's first row."""
    skew_ns: np.ndarray
    lateness_ns: np.ndarray
    """Last arrival minus the second-to-last."""
    last_rank: np.ndarray
    """Rank that arrived last, by more than the tie tolerance; -1 when none clearly did."""
    op: np.ndarray
    inst_tag: np.ndarray
    nbytes: np.ndarray
    unmatched: int
    inst_group: np.ndarray | None = None
    """Group symbol id of each instance."""
    """Instances some rank of the group never recorded or never completed."""

    @property
    def num_instances(self) -> int:
        return len(self.first)


def _dedupe_sorted(rows: EventTable) -> EventTable:
    """Rows sorted by (rank, group, seq), keeping the first of any repeated key."""
    order = sort_order(rows.rank, rows.group, rows.seq)
    rows = rows.select(order)
    repeat = np.zeros(len(rows), dtype=bool)
    repeat[1:] = (
        (rows.rank[1:] == rows.rank[:-1])
        & (rows.group[1:] == rows.group[:-1])
        & (rows.seq[1:] == rows.seq[:-1])
    )
    return rows.select(~repeat)


def _arrivals(rows: EventTable, issue: np.ndarray) -> np.ndarray:
    """max(issue, completion of the previous completed row of the same rank and group)."""
    arrival = issue.copy()
    prev_done = np.zeros(len(rows), dtype=bool)
    prev_done[1:] = (
        (rows.rank[1:] == rows.rank[:-1])
        & (rows.group[1:] == rows.group[:-1])
        & (rows.dur_ns[:-1] >= 0)
    )
    prev_end = np.zeros(len(rows), dtype=np.int64)
    prev_end[1:] = issue[:-1] + rows.dur_ns[:-1]
    arrival[prev_done] = np.maximum(issue[prev_done], prev_end[prev_done])
    return arrival


def p2p_channels(rows: EventTable) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the group and sequence number its instance is keyed by: a collective's own;
    for a send or recv that names its peer, its channel (group, source, destination: an id
    past the group symbols) and its place among its rank's rows on the channel in sequence
    order. A group's sequence numbers count each rank's ops in an order of its own (a 1F1B
    stage sends and receives on its pp group as its schedule goes), so the n-th on one rank
    meets the n-th on another only by chance; torch delivers a pair's messages in order."""
    group, seq = rows.group.astype(np.int64), rows.seq.astype(np.int64)
    send, recv = rows.symbols.id_of("send"), rows.symbols.id_of("recv")
    names = [i for i in (send, recv) if i >= 0]
    idx = np.flatnonzero((rows.peer >= 0) & np.isin(rows.name, names)) if names else []
    if len(idx) == 0:
        return group, seq
    rank, peer = rows.rank[idx].astype(np.int64), rows.peer[idx].astype(np.int64)
    is_recv = rows.name[idx] == recv
    src, dst = np.where(is_recv, peer, rank), np.where(is_recv, rank, peer)
    g = group[idx]
    order = sort_order(g, src, dst, rank, seq[idx])
    g, src, dst, rank = g[order], src[order], dst[order], rank[order]
    channel_new = np.r_[True, (g[1:] != g[:-1]) | (src[1:] != src[:-1]) | (dst[1:] != dst[:-1])]
    side_new = channel_new | np.r_[True, rank[1:] != rank[:-1]]
    starts = np.flatnonzero(side_new)
    n = np.arange(len(order)) - np.repeat(starts, np.diff(np.r_[starts, len(order)]))
    group[idx[order]] = int(group.max()) + np.cumsum(channel_new)
    seq[idx[order]] = n
    return group, seq


def _ranks_in_group(rank: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Per group id: how many ranks recorded it (a scatter into a groups x ranks grid)."""
    n_groups, n_ranks = int(group.max()) + 1, int(rank.max()) + 1
    if n_groups * n_ranks > DENSE_CELLS:
        pairs = distinct((group << SEQ_BITS) | rank.astype(np.int64))
        return np.bincount(pairs >> SEQ_BITS, minlength=n_groups)
    seen = np.zeros(n_groups * n_ranks, dtype=bool)
    seen[group * n_ranks + rank] = True
    return seen.reshape(n_groups, n_ranks).sum(axis=1)


def _instance_ids(group: np.ndarray, seq: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """Each row's instance as a dense id (its group's offset plus its sequence number), and
    each id's group; None when the ids would be too sparse to count in an array."""
    top = np.full(int(group.max()) + 1, -1, dtype=np.int64)
    np.maximum.at(top, group, seq)
    sizes = top + 1
    if int(sizes.sum()) > DENSE_CELLS + 4 * len(group):
        return None
    offset = np.r_[0, np.cumsum(sizes)[:-1]]
    return offset[group] + seq, np.repeat(np.arange(len(sizes)), sizes)


def _matched_mask(
    rows: EventTable, group: np.ndarray, seq: np.ndarray, keys: np.ndarray
) -> tuple[np.ndarray, int, np.ndarray | None]:
    """Rows of instances completed on every rank of their group; the unmatched count; each
    row's dense instance id (None where the ids were too sparse to count in an array).
    ``group``, ``seq``: the rows' instance keys (``p2p_channels``).

    Groups recorded by a single rank are not cross-rank and are left out of both. Instances
    are counted in a dense array when their ids allow (no sort of millions of keys)."""
    ranks_in_group = _ranks_in_group(rows.rank, group)
    shared = ranks_in_group[group] >= 2
    done = shared & (rows.dur_ns >= 0)
    dense = _instance_ids(group, seq)
    if dense is None:
        uniq, inverse, counts = np.unique(keys[done], return_inverse=True, return_counts=True)
        complete_key = counts == ranks_in_group[(uniq >> SEQ_BITS)]
        matched = np.zeros(len(rows), dtype=bool)
        matched[np.flatnonzero(done)] = complete_key[inverse.reshape(-1)]
        return matched, len(distinct(keys[shared])) - int(complete_key.sum()), None
    ids, group_of = dense
    rows_done = np.bincount(ids[done], minlength=len(group_of))
    complete = (rows_done > 0) & (rows_done == ranks_in_group[group_of])
    instances = int(np.count_nonzero(np.bincount(ids[shared], minlength=len(group_of))))
    return done & complete[ids], instances - int(complete.sum()), ids


def match_collectives(
    events: EventTable, clocks: tuple[ClockAlignment, ...], tie_ns: int
) -> Matched | None:
    """Match collectives across ranks; None when no collective carries a sequence number."""
    colls = events.of_kind(Kind.COLLECTIVE)
    rows = colls.select(colls.seq >= 0)
    if len(rows) == 0:
        return None
    rows = _dedupe_sorted(rows)
    issue = aligned_start_ns(rows, clocks)
    arrival = _arrivals(rows, issue)
    group, seq = p2p_channels(rows)
    keys = (group << SEQ_BITS) | seq
    matched, unmatched, ids = _matched_mask(rows, group, seq, keys)
    rows, keys = rows.select(matched), keys[matched]
    issue, arrival = issue[matched], arrival[matched]
    order = _by_instance_arrival(keys, ids[matched] if ids is not None else None, arrival, rows)
    rows, keys, issue, arrival = rows.select(order), keys[order], issue[order], arrival[order]
    return _instances(rows, keys, issue, arrival, tie_ns, unmatched)


def _by_instance_arrival(
    keys: np.ndarray, ids: np.ndarray | None, arrival: np.ndarray, rows: EventTable
) -> np.ndarray:
    """The order by (instance, arrival, rank). The rows come in rank order
    (``_dedupe_sorted``), which a stable sort keeps among ties: one argsort of (dense
    instance id, arrival) packed where they fit, a third of a three-key lexsort's time."""
    key = packed([ids, arrival]) if ids is not None and len(ids) else None
    if key is not None:
        return np.argsort(key, kind="stable")
    return np.lexsort((rows.rank, arrival, keys))


def _instances(
    rows: EventTable,
    keys: np.ndarray,
    issue: np.ndarray,
    arrival: np.ndarray,
    tie_ns: int,
    unmatched: int,
) -> Matched:
    """Per-instance reductions over rows sorted by (instance, arrival)."""
    new = np.ones(len(rows), dtype=bool)
    new[1:] = keys[1:] != keys[:-1]
    first = np.flatnonzero(new)
    last_row = np.append(first[1:], len(rows)).astype(np.int64)[: len(first)] - 1
    inst = np.cumsum(new) - 1
    last = arrival[last_row]
    lateness = last - arrival[last_row - 1]  # every instance has >= 2 rows
    wait = last[inst] - arrival
    transfer = np.maximum(issue + rows.dur_ns - last[inst], 0)
    return Matched(
        rank=rows.rank,
        step=rows.step,
        local_start_ns=rows.start_ns,
        tag=rows.tag,
        inst=inst,
        wait_ns=wait,
        transfer_ns=transfer,
        first=first,
        skew_ns=last - arrival[first],
        lateness_ns=lateness,
        last_rank=np.where(lateness > tie_ns, rows.rank[last_row], -1),
        op=rows.name[first],
        inst_tag=rows.tag[first],
        nbytes=rows.nbytes[first],
        unmatched=unmatched,
        inst_group=rows.group[first],
    )


def _inst_dims(
    m: Matched, symbols: SymbolTable, dims: Mapping[str, str] | None
) -> tuple[np.ndarray, list[str]]:
    """Per instance, the index of its group's dimension in the returned names ("" for a
    group ``dims`` does not name)."""
    if not dims or m.inst_group is None:
        return np.zeros(m.num_instances, dtype=np.int64), [""]
    lookup, names = dim_lookup(symbols, dims)
    index = lookup[m.inst_group]
    return np.where(index < 0, len(names), index), [*names, ""]


def wait_stats(
    m: Matched, inst_mask: np.ndarray, symbols: SymbolTable, dims: Mapping[str, str] | None = None
) -> tuple[WaitStats, ...]:
    """WaitStats per (op, tag, nbytes, dimension of the group: ``dims`` maps group labels
    to it) over the instances of ``inst_mask``, sorted by those."""
    if not inst_mask.any():
        return ()
    dim_of, dim_names = _inst_dims(m, symbols, dims)
    cols = (m.op, m.inst_tag, m.nbytes, dim_of)
    groups = group_by(*(c[inst_mask] for c in cols))  # not np.unique(axis=1): a sort of tuples
    uniq, inv = groups.keys.T, groups.index
    n = len(groups)
    slot = np.full(m.num_instances, -1)
    slot[inst_mask] = inv
    row_slot = slot[m.inst]
    rows_in = row_slot >= 0
    count = np.bincount(inv, minlength=n)
    row_count = np.bincount(row_slot[rows_in], minlength=n)
    skew_sum = np.bincount(inv, weights=m.skew_ns[inst_mask], minlength=n)
    skew_max = np.zeros(n)
    np.maximum.at(skew_max, inv, m.skew_ns[inst_mask].astype(np.float64))
    wait = np.bincount(row_slot[rows_in], weights=m.wait_ns[rows_in], minlength=n) / row_count
    transfer = np.bincount(row_slot[rows_in], weights=m.transfer_ns[rows_in], minlength=n)
    transfer = transfer / row_count
    out = []
    for i in range(n):
        busy = wait[i] + transfer[i]
        out.append(
            WaitStats(
                op=symbols[int(uniq[0, i])],
                tag=symbols[int(uniq[1, i])],
                nbytes=int(uniq[2, i]),
                instances=int(count[i]),
                skew_avg_us=float(skew_sum[i] / count[i]) / 1e3,
                skew_max_us=float(skew_max[i]) / 1e3,
                wait_avg_us=float(wait[i]) / 1e3,
                transfer_avg_us=float(transfer[i]) / 1e3,
                wait_share_pct=float(100.0 * wait[i] / busy) if busy > 0 else 0.0,
                dim=dim_names[int(uniq[3, i])],
            )
        )
    return tuple(sorted(out, key=lambda w: (w.op, w.tag, w.nbytes, w.dim)))


def dim_waits(
    m: Matched, inst_mask: np.ndarray, symbols: SymbolTable, dims: Mapping[str, str] | None
) -> tuple[DimWaits, ...]:
    """DimWaits per dimension ``dims`` names (group label -> dimension) over the instances
    of ``inst_mask``, the most waiting first; () without ``dims``."""
    if not dims or not inst_mask.any():
        return ()
    dim_of, names = _inst_dims(m, symbols, dims)
    known = inst_mask & (dim_of < len(names) - 1)  # the last name is "" (not in ``dims``)
    rows = known[m.inst]
    row_dim = dim_of[m.inst][rows]
    n = len(names)
    count = np.bincount(dim_of[known], minlength=n)
    wait = np.bincount(row_dim, weights=m.wait_ns[rows], minlength=n)
    transfer = np.bincount(row_dim, weights=m.transfer_ns[rows], minlength=n)
    width = int(m.rank.max()) + 1 if len(m.rank) else 1
    seen = np.bincount(row_dim * width + m.rank[rows], minlength=n * width) > 0
    ranks = seen.reshape(n, width).sum(axis=1)
    out = [
        DimWaits(
            dim=names[i],
            instances=int(count[i]),
            ranks=int(ranks[i]),
            wait_ms_per_rank=float(wait[i]) / 1e6 / int(ranks[i]),
            transfer_ms_per_rank=float(transfer[i]) / 1e6 / int(ranks[i]),
            wait_share_pct=float(100.0 * wait[i] / (wait[i] + transfer[i]))
            if wait[i] + transfer[i] > 0
            else 0.0,
        )
        for i in range(n)
        if count[i]
    ]
    return tuple(sorted(out, key=lambda d: (-d.wait_ms_per_rank, d.dim)))
