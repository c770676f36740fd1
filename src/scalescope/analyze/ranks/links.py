"""Slow links: groups of ranks whose collectives move their bytes several times slower than
other groups of the same shape, with the hosts they span.

What the recorded rows can show. A collective's *transfer* is its completion minus the last
rank's arrival (``matching.py``): the time it took once every rank was there, which no late
rank and no slow compute lengthens. A slow link lengthens it, but for every rank of the
collective at once: in a ring or a tree all ranks leave together, so no rank is "late" and
the straggler analysis sees nothing. One collective's transfer alone cannot tell a slow link
from a slow network (the bytes per second of a healthy link are not recorded); a comparison
can. So the analysis compares **groups of the same shape**: the process groups smaller than
the world (per-node groups, pipeline or tensor-parallel pairs, DeepSpeed's 2-rank
point-to-point groups, subgroups made with ``new_group``), each identified by the set of
ranks that recorded it, in classes of the same op (``send`` and ``recv`` counted as one),
message size, number of ranks and number of hosts spanned (a pair inside a host is never
compared with a pair across two). A group whose median transfer is ``SLOW_RATIO`` times the
median of its class's other groups, by more than the clock error, is slow; its hosts name
the link (two hosts: the path between them; one host: its intra-node links).

What it cannot show: a run whose collectives all span the world group (plain DDP or FSDP
over all ranks) has nothing to compare with: a slow link then slows the whole collective
and looks like a slower network (the COMM_* findings), and no slow link is named. Point to
point on a group of more than two ranks is left out: the probe does not record the peer, so
a ``send`` cannot be paired with its ``recv``.

All of it is vectorised, over the subgroups' rows only (a run whose collectives are all on
the world group costs one pass over the group column): two sorts and segment reductions.
The instances are found as ``matching.py`` finds them (by group and sequence number, each
rank arriving at ``max(issue, completion of its previous collective on the group)``,
complete on every rank of the group), but with what a link needs only: ``match_collectives``
on the same rows costs 5x more (1,024 ranks x 1,000 steps of pipeline pairs: 5.2 s against
1.0 s), as much again as the cross-rank analysis' own matching of them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from scalescope.analyze.columns.sorting import sort_order
from scalescope.analyze.ranks.clocks import (
    ClockAlignment,
    align_clocks,
    aligned_start_ns,
    of_ranks,
    tie_tolerance_ns,
)
from scalescope.analyze.ranks.matching import p2p_channels
from scalescope.events import EventTable, Kind, Run, SymbolTable

SLOW_RATIO = 2.0
"""A group is slow when its median transfer is at least this many times its peers'."""
FLOOR_NS = 100_000
"""... and longer by at least this (or the clocks' tie tolerance when larger) per instance:
a transfer spans two hosts' clocks, aligned only to tens of microseconds."""
MIN_INSTANCES = 3
"""Measured instances a group needs in a class to be compared."""
GROUPS_LISTED = 16
"""Rank sets of a slow link listed at most."""
TIE_FLOOR_NS = 50_000
"""As cross_rank.TIE_FLOOR_NS (not imported: cross_rank imports the analyses it runs)."""


@dataclass(frozen=True)
class SlowLink:
    """A link (two hosts, or the inside of one) whose groups transfer slower than their peers."""

    hosts: tuple[str, ...]
    """The hosts its slow groups span: two, the ends of the link; one, a host's inside."""
    groups: tuple[tuple[int, ...], ...]
    """The rank sets of its slow groups (the first GROUPS_LISTED)."""
    slow_groups: int
    """Its slow groups (concurrent rank pairs over the same link, one per local rank...)."""
    op: str
    """The op and size of the class it loses most in."""
    nbytes: int
    instances: int
    """Measured instances of its slow groups in that class."""
    transfer_us: float
    """Median transfer per instance (completion − last arrival) of its slow groups there."""
    peers_transfer_us: float
    """Median over the class's other groups of their median transfer."""
    ratio: float
    gbps: float
    """Bytes / transfer of its slow groups, GB/s (algorithm bandwidth)."""
    peers_gbps: float
    peers: int
    """Groups of the class it was compared with."""
    cost_ms_per_step: float
    """Transfer time above its peers' per measured step, of its costliest group (groups over
    one link run side by side), summed over that group's classes."""


@dataclass(frozen=True)
class LinkAnalysis:
    compared_groups: int
    """Groups (rank sets smaller than the world) that had a peer of the same shape."""
    classes: int
    """Shapes (op, size, ranks, hosts) with two or more groups."""
    slow: tuple[SlowLink, ...]
    """Costliest first."""
    ratio_threshold: float = SLOW_RATIO


def _subgroups(run: Run) -> tuple[EventTable, np.ndarray] | None:
    """The collective rows worth matching for links: on groups of two ranks or more but fewer
    than all ranks that recorded collectives, with a sequence number; point to point only on
    2-rank groups. With the number of ranks of each group (by group id). None when none."""
    colls = run.events.of_kind(Kind.COLLECTIVE)
    if len(colls) == 0:
        return None
    has_seq = colls.seq >= 0
    group, rank = colls.group[has_seq], colls.rank[has_seq]
    if len(group) == 0:
        return None
    used = np.flatnonzero(np.bincount(group))  # group ids are symbols: compact them
    compact = np.zeros(int(group.max()) + 1, dtype=np.int64)
    compact[used] = np.arange(len(used))
    present = np.zeros((len(used), int(rank.max()) + 1), dtype=bool)
    present[compact[group], rank] = True
    ranks_in = np.zeros(len(compact), dtype=np.int64)
    ranks_in[used] = present.sum(axis=1)
    world = int(present.any(axis=0).sum())
    candidate = (ranks_in >= 2) & (ranks_in < world)
    if not candidate.any():
        return None
    mask = np.zeros(len(colls), dtype=bool)
    mask[has_seq] = candidate[group]
    p2p = [s for s in (run.events.symbols.id_of(n) for n in ("send", "recv")) if s >= 0]
    if p2p and mask.any():
        rows = np.flatnonzero(mask)
        pair_only = np.isin(colls.name[rows], p2p) & (ranks_in[colls.group[rows]] > 2)
        mask[rows[pair_only]] = False
    return (colls.select(mask), ranks_in) if mask.any() else None


def _rank_keys(size: int) -> np.ndarray:
    """A random 64-bit key per rank: a set of ranks is the sum of its keys (mod 2**64)."""
    return np.random.default_rng(0x5CA1E).integers(0, 2**64 - 1, size, np.uint64, endpoint=True)


def _host_ids(run: Run, size: int) -> tuple[np.ndarray, list[str]]:
    """Per rank, the index of its host in the returned names (a rank without one: its own)."""
    names: dict[str, int] = {}
    ids = np.empty(size, dtype=np.int64)
    for r in range(size):
        meta = run.ranks.get(r)
        host = meta.hostname if meta is not None and meta.hostname else f"rank {r}"
        ids[r] = names.setdefault(host, len(names))
    return ids, list(names)


def _segments(first: np.ndarray, total: int) -> np.ndarray:
    return np.diff(np.append(first, total))


def _starts(*keys: np.ndarray) -> np.ndarray:
    """Where a new run of equal ``keys`` begins (the arrays sorted by them)."""
    change = np.zeros(len(keys[0]), dtype=bool)
    change[:1] = True
    for k in keys:
        change[1:] |= k[1:] != k[:-1]
    return np.flatnonzero(change)


@dataclass(frozen=True)
class _Instances:
    """Complete instances of the subgroups' collectives; rows sorted by instance, then rank."""

    rank: np.ndarray
    """Per row."""
    first: np.ndarray
    """Per instance: its first row."""
    size: np.ndarray
    transfer: np.ndarray
    """Latest completion − last arrival (ns, at least 0)."""
    step: np.ndarray
    """The earliest step of its rows."""
    op: np.ndarray
    nbytes: np.ndarray


def _instances(rows: EventTable, issue: np.ndarray, ranks_in: np.ndarray) -> _Instances:
    """Instances by (group, seq) (a send's and recv's by their channel,
    ``matching.p2p_channels``), as ``matching.match_collectives`` finds them."""
    order = sort_order(rows.group, rows.rank, rows.seq)
    g, r, q = rows.group[order], rows.rank[order], rows.seq[order]
    repeat = np.zeros(len(g), dtype=bool)
    repeat[1:] = (g[1:] == g[:-1]) & (r[1:] == r[:-1]) & (q[1:] == q[:-1])
    order = order[~repeat]
    g, r, q = g[~repeat], r[~repeat], q[~repeat]
    kg, kq = p2p_channels(rows.select(order))
    start, dur = issue[order], rows.dur_ns[order]
    arrival = start.copy()
    after = np.zeros(len(g), dtype=bool)  # the previous row is the same rank's, completed
    after[1:] = (g[1:] == g[:-1]) & (r[1:] == r[:-1]) & (dur[:-1] >= 0)
    prev_end = np.zeros(len(g), dtype=np.int64)
    prev_end[1:] = start[:-1] + dur[:-1]
    arrival[after] = np.maximum(start[after], prev_end[after])
    done = dur >= 0
    order, g, r, kg, kq = order[done], g[done], r[done], kg[done], kq[done]
    arrival, end = arrival[done], start[done] + dur[done]
    by_inst = sort_order(kg, kq)  # stable: each instance's rows stay in rank order
    order, g, r = order[by_inst], g[by_inst], r[by_inst]
    arrival, end = arrival[by_inst], end[by_inst]
    first = _starts(kg[by_inst], kq[by_inst])
    if len(first) == 0:  # nothing completed (a hang in the subgroups)
        none = np.zeros(0, dtype=np.int64)
        return _Instances(none, none, none, none, none, none, none)
    size = _segments(first, len(g))
    complete = size == ranks_in[g[first]]
    last = np.maximum.reduceat(arrival, first)
    transfer = np.maximum(np.maximum.reduceat(end, first) - last, 0)
    step = np.minimum.reduceat(rows.step[order], first)
    head = order[first]
    keep, size = np.repeat(complete, size), size[complete]
    return _Instances(
        rank=r[keep], first=np.cumsum(np.append(0, size[:-1])), size=size,
        transfer=transfer[complete],
        step=step[complete], op=rows.name[head][complete], nbytes=rows.nbytes[head][complete],
    )  # fmt: skip


def _median_of_others(values: np.ndarray, start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """For ``values`` sorted within segments (``start``, ``count`` per element), the median
    of the other elements of each one's segment (NaN when it is alone)."""
    pos = np.arange(len(values)) - start
    k = count - 1
    out = np.full(len(values), np.nan)
    ok = k >= 1
    lo, hi = (k - 1) // 2, k // 2
    # the j-th of the others is the j-th of the segment, or the next one past ``pos``
    lo_idx = start + lo + (lo >= pos)
    hi_idx = start + hi + (hi >= pos)
    out[ok] = (values[lo_idx[ok]] + values[hi_idx[ok]]) / 2.0
    return out


@dataclass(frozen=True)
class _Cells:
    """One row per (group, class) with enough measured instances."""

    group: np.ndarray
    op: np.ndarray
    nbytes: np.ndarray
    count: np.ndarray
    median: np.ndarray
    mean: np.ndarray


def _cells(group: np.ndarray, op: np.ndarray, nbytes: np.ndarray, transfer: np.ndarray) -> _Cells:
    """Per (group, op, nbytes) of instances: count, median and mean transfer."""
    _, size_code = np.unique(nbytes, return_inverse=True)
    order = sort_order(group, op, size_code.reshape(-1), transfer)
    g, o, b, t = group[order], op[order], nbytes[order], transfer[order]
    starts = _starts(g, o, b)
    count = _segments(starts, len(g))
    sums = np.add.reduceat(t.astype(np.float64), starts)
    keep = count >= MIN_INSTANCES
    start, count = starts[keep], count[keep]
    median = (t[start + (count - 1) // 2] + t[start + count // 2]) / 2.0
    return _Cells(g[start], o[start], b[start], count, median, sums[keep] / count)


def analyze_links(
    run: Run, warmup_steps: int, clocks: tuple[ClockAlignment, ...] | None = None
) -> LinkAnalysis | None:
    """Slow links among the run's subgroups; None when no collective is on a group smaller
    than the world (nothing to compare a link with) or none of them completed. ``clocks``:
    the run's alignment when the caller has it (``align_clocks``)."""
    found = _subgroups(run)
    if found is None:
        return None
    rows, ranks_in = found
    clocks = of_ranks(clocks, rows.ranks()) if clocks else align_clocks(replace(run, events=rows))
    tie_ns = tie_tolerance_ns(clocks, TIE_FLOOR_NS)
    inst = _instances(rows, aligned_start_ns(rows, clocks), ranks_in)
    measured = np.flatnonzero(inst.step >= warmup_steps)
    if len(measured) == 0:
        return None
    size = int(rows.rank.max()) + 1
    sets = np.add.reduceat(_rank_keys(size)[inst.rank], inst.first)[measured]
    _, rep, group = np.unique(sets, return_index=True, return_inverse=True)
    group = group.reshape(-1)
    symbols = run.events.symbols
    op = inst.op[measured].astype(np.int64)
    send, recv = symbols.id_of("send"), symbols.id_of("recv")
    if recv >= 0:
        op = np.where(op == recv, send if send >= 0 else recv, op)
    hosts, host_names = _host_ids(run, size)
    members, n_ranks, n_hosts = _members(inst, measured[rep], hosts)
    cells = _cells(group, op, inst.nbytes[measured], inst.transfer[measured].astype(np.int64))
    steps = len(np.unique(inst.step[measured]))
    return _compare(cells, members, n_ranks, n_hosts, hosts, host_names, steps, tie_ns, symbols)


def _members(
    inst: _Instances, rep: np.ndarray, hosts: np.ndarray
) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """Per group (``rep``: one instance of each): its ranks (sorted), their count, and the
    number of hosts they are on."""
    sizes = inst.size[rep]
    offsets = np.cumsum(np.append(0, sizes[:-1]))
    rows = np.repeat(inst.first[rep] - offsets, sizes) + np.arange(int(sizes.sum()))
    ranks = inst.rank[rows].astype(np.int64)  # in rank order within an instance
    owner = np.repeat(np.arange(len(rep)), sizes)
    by_host = sort_order(owner, hosts[ranks])
    h_owner, h = owner[by_host], hosts[ranks][by_host]
    n_hosts = np.bincount(h_owner[_starts(h_owner, h)], minlength=len(rep))
    return np.split(ranks, np.cumsum(sizes)[:-1]), sizes, n_hosts


def _compare(
    c: _Cells,
    members: list[np.ndarray],
    n_ranks: np.ndarray,
    n_hosts: np.ndarray,
    hosts: np.ndarray,
    host_names: list[str],
    steps: int,
    tie_ns: int,
    symbols: SymbolTable,
) -> LinkAnalysis:
    """Each cell against the other groups of its class; slow cells gathered by hosts."""
    if len(c.group) == 0:
        return LinkAnalysis(0, 0, ())
    _, b_code = np.unique(c.nbytes, return_inverse=True)
    order = sort_order(c.op, b_code.reshape(-1), n_ranks[c.group], n_hosts[c.group],
                       c.median.astype(np.int64))  # fmt: skip
    start_of = _starts(*(k[order] for k in (c.op, c.nbytes, n_ranks[c.group], n_hosts[c.group])))
    count_of = _segments(start_of, len(order))
    cls = np.repeat(np.arange(len(start_of)), count_of)
    median = c.median[order]
    peers = _median_of_others(median, start_of[cls], count_of[cls])
    compared = count_of[cls] >= 2
    slow_sorted = compared & (peers > 0) & (median >= SLOW_RATIO * peers)
    slow_sorted &= median - peers >= max(FLOOR_NS, tie_ns)
    slow = np.zeros(len(order), dtype=bool)
    slow[order] = slow_sorted
    peer = np.empty(len(order))
    peer[order] = peers
    n_peers = np.empty(len(order), dtype=np.int64)
    n_peers[order] = count_of[cls] - 1
    cost = np.where(slow, (c.mean - peer) * c.count / max(steps, 1), 0.0)
    links = _gather(c, np.flatnonzero(slow), peer, n_peers, cost, members, hosts, host_names,
                    symbols)  # fmt: skip
    groups = len(np.unique(c.group[order][compared]))
    return LinkAnalysis(groups, int((count_of >= 2).sum()), links)


def _gather(
    c: _Cells,
    cells: np.ndarray,
    peer: np.ndarray,
    n_peers: np.ndarray,
    cost: np.ndarray,
    members: list[np.ndarray],
    hosts: np.ndarray,
    host_names: list[str],
    symbols: SymbolTable,
) -> tuple[SlowLink, ...]:
    """Slow cells by the hosts their group spans (a loop over the few slow cells only)."""
    by_link: dict[tuple[int, ...], list[int]] = {}
    for i in cells.tolist():
        key = tuple(sorted(set(hosts[members[c.group[i]]].tolist())))
        by_link.setdefault(key, []).append(i)
    out = []
    for key, idx in by_link.items():
        per_group: dict[int, float] = {}
        for i in idx:
            per_group[int(c.group[i])] = per_group.get(int(c.group[i]), 0.0) + float(cost[i])
        worst = max(idx, key=lambda i: float(cost[i]))
        same = [i for i in idx if c.op[i] == c.op[worst] and c.nbytes[i] == c.nbytes[worst]]
        transfer = float(np.median(c.median[same]))
        nbytes = int(c.nbytes[worst])
        groups = sorted(per_group, key=lambda g: tuple(members[g]))
        out.append(
            SlowLink(
                hosts=tuple(host_names[h] for h in key),
                groups=tuple(tuple(int(r) for r in members[g]) for g in groups[:GROUPS_LISTED]),
                slow_groups=len(groups),
                op=symbols[int(c.op[worst])],
                nbytes=nbytes,
                instances=int(c.count[same].sum()),
                transfer_us=transfer / 1e3,
                peers_transfer_us=float(peer[worst]) / 1e3,
                ratio=transfer / float(peer[worst]),
                gbps=nbytes / transfer,
                peers_gbps=nbytes / float(peer[worst]),
                peers=int(n_peers[worst]),
                cost_ms_per_step=max(per_group.values()) / 1e6,
            )
        )
    return tuple(sorted(out, key=lambda s: -s.cost_ms_per_step))
