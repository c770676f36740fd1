"""Ranks and groups at the pace of their peers, for the what-if (whatif.py): the model's
collectives by class (op, size, ranks, nodes spanned: what analyze/ranks/links.py compares), a
link's groups paced by the groups of their shape elsewhere, and the ideal step, with no
rank slower than the median of the others and no group slower than the typical one of its
class."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from scalescope.analyze.model.peers import (
    ALPHA,
    MIN_EFFECT,
    holm,
    median_peer,
    p_above_zero,
    slower_than_peers,
)
from scalescope.analyze.model.step_grid import StepGrid, instances

OWN_FIELDS = ("work_ns", "prejoin_ns", "post_ns", "gap_ns")
"""A rank's own time in the model: what a slow rank does more of."""


P2P = {"send": "send/recv", "recv": "send/recv", "isend": "send/recv", "irecv": "send/recv"}


@dataclass(frozen=True)
class _Shapes:
    """The model's collectives by instance (``instances``): their class (op, size, ranks,
    nodes spanned: what analyze/ranks/links.py compares), nodes and number of ranks."""

    inst: np.ndarray
    """(ranks, collectives): the instance of each rank's collective."""
    cls: np.ndarray
    spans: tuple[frozenset[str], ...]
    size: np.ndarray


def _shapes(grid: StepGrid, hosts: dict[int, str]) -> _Shapes:
    inst = instances(grid.group)
    host = [hosts.get(int(r), "") for r in grid.ranks]
    rank = np.broadcast_to(np.arange(len(grid.ranks))[:, None], inst.shape)
    spans: dict[int, set[str]] = {}
    for i, r in zip(inst.ravel().tolist(), rank.ravel().tolist(), strict=True):
        spans.setdefault(i, set()).add(host[r])
    size = np.bincount(inst.ravel())
    first = {i: (r, k) for (r, k), i in reversed(list(np.ndenumerate(inst)))}
    keys: dict[tuple, int] = {}
    cls = np.empty(len(size), dtype=np.int64)
    for i, (r, k) in first.items():
        op = str(grid.op_names[r, k]) if grid.op_names is not None else f"#{k}"
        nbytes = int(grid.nbytes[r, k]) if grid.nbytes is not None else 0
        key = (P2P.get(op, op), nbytes, int(size[i]), len(spans[i]))
        cls[i] = keys.setdefault(key, len(keys))
    return _Shapes(inst, cls, tuple(frozenset(spans[i]) for i in range(len(size))), size)


@dataclass(frozen=True)
class LinkShapes:
    """Per (rank, collective) of a model, against a link's ends (``link_classes``)."""

    cls: np.ndarray
    """Its class (op, size, ranks, nodes spanned)."""
    on_link: np.ndarray
    """Its group is smaller than the world and spans exactly the link's ends."""
    subgroup: np.ndarray
    """Its group is smaller than the world."""
    crosses: np.ndarray
    """Its group holds ranks on both ends and is not one of the link's own groups: a ring or
    a tree over it may have the link on its path."""
    size: np.ndarray
    """The number of ranks of its group."""


def link_classes(grid: StepGrid, hosts: dict[int, str], ends: frozenset[str]) -> LinkShapes:
    """The model's collectives against the link between ``ends`` (or inside one host)."""
    sh = _shapes(grid, hosts)
    exact = np.array([spans == ends for spans in sh.spans])
    both = np.array([ends <= spans for spans in sh.spans])
    subgroup = sh.size < len(grid.ranks)
    on = exact & subgroup
    return LinkShapes(sh.cls[sh.inst], on[sh.inst], subgroup[sh.inst],
                      (both & ~on)[sh.inst], sh.size[sh.inst])  # fmt: skip


def rank_totals(grid: StepGrid) -> np.ndarray:
    """(steps, ranks): each rank's own time per step, gaps in."""
    return grid.own_ns() + grid.gap_ns


def slow_ranks(
    grid: StepGrid, hosts: dict[int, str], rows: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """bool per rank: slower than its median peer beyond the steps' spread (peers.py), over
    ``rows`` (default: all), itself or as one of a node slower than the median node; and
    the nodes that are, as a list of host names (with several nodes, every host known)."""
    rows = slice(None) if rows is None else rows
    total = rank_totals(grid)[rows]
    steps = grid.steps[rows]
    step = float(np.median(grid.step_ns[rows]))
    if grid.sample is not None:  # --record summary: the summarised steps too (window_sample.py)
        total = np.concatenate([total, grid.sample.own_ns])
        steps = np.concatenate([steps, grid.sample.steps])
    slow = slower_than_peers(total, step, steps=steps).slower
    host = [hosts.get(int(r), "") for r in grid.ranks]
    names = sorted(set(host))
    if len(names) < 2 or "" in names:
        return slow, np.array([], dtype=str)
    member = np.array([[h == n for n in names] for h in host])
    per_node = total @ member / member.sum(axis=0)
    slow_nodes = slower_than_peers(per_node, step, steps=steps).slower
    return slow | (member & slow_nodes).any(axis=1), np.array(names)[slow_nodes]


def ideal(grid: StepGrid, hosts: dict[int, str], rows: np.ndarray | None = None) -> StepGrid:
    """The step with no slow rank, node or link: a rank slower than its peers beyond their
    step-to-step spread (``slow_ranks`` over ``rows``), in a step where its own time exceeds
    that of the median one of the other ranks, does that rank's work instead (its parts
    whole, not each part's minimum, which noise would bias low), and no group transfers
    slower on average than the typical group of its class (``typical_transfers``). Ranks
    within the spread keep their time: their jitter is no cause (``at_own_median``). A
    slow rank's late completions (``completed_with_peers``, which its own fix removes) stay:
    on the recorded straggler_outside_3 (3 ranks on 2 cores, the sleeper preempted on
    waking among spinning peers) removing them took the ideal from 6.5 to 5.4 ms a step,
    further below the 9.2 ms measured before the sleeps."""
    if len(grid.ranks) < 2:
        return grid
    total = rank_totals(grid)
    peer = median_peer(total)
    slower = (total > np.take_along_axis(total, peer, axis=1)) & slow_ranks(grid, hosts, rows)[0]

    def paced(a: np.ndarray) -> np.ndarray:
        theirs = np.take_along_axis(a, peer.reshape(peer.shape + (1,) * (a.ndim - 2)), axis=1)
        return np.where(slower.reshape(slower.shape + (1,) * (a.ndim - 2)), theirs, a)

    return replace(
        grid, transfer_ns=typical_transfers(grid, hosts, rows),
        **{f: paced(getattr(grid, f)) for f in OWN_FIELDS},
    )  # fmt: skip


def at_own_median(
    grid: StepGrid, rows: np.ndarray | None = None, keep: np.ndarray | None = None
) -> StepGrid:
    """Every rank's own time, in every step, as in its own median step over ``rows``
    (default: all; the parts of that step whole, of the middle two averaged): the step
    without jitter, each rank as slow or fast as it typically is. ``keep`` (bool per rank):
    ranks left as measured, the slow ones, whose excess is a cause and not jitter. What the
    replay as measured loses against it is the jitter's cost, no rank's."""
    rows = np.arange(grid.shape[0])[slice(None) if rows is None else rows]
    order = np.argsort(rank_totals(grid)[rows], axis=0, kind="stable")
    lo, hi = rows[order[(len(rows) - 1) // 2]], rows[order[len(rows) // 2]]
    cols = np.arange(len(grid.ranks))
    keep = np.zeros(len(cols), dtype=bool) if keep is None else keep

    def steady(a: np.ndarray) -> np.ndarray:
        middle = np.broadcast_to((a[lo, cols] + a[hi, cols]) / 2, a.shape)
        return np.where(keep.reshape((1, -1) + (1,) * (a.ndim - 2)), a, middle)

    return replace(grid, **{f: steady(getattr(grid, f)) for f in OWN_FIELDS})


def typical_transfers(
    grid: StepGrid, hosts: dict[int, str], rows: np.ndarray | None = None
) -> np.ndarray:
    """Each group's transfers scaled down, where their mean over the steps exceeds it, to
    the median of the means of the groups of its class, when that group is slower than the
    others of its class beyond their step-to-step spread over ``rows`` (``slow_groups``): a
    slow link's groups move at their peers' pace, and a collective's step-to-step spread,
    which no fix removes, stays in."""
    sh = _shapes(grid, hosts)
    n = len(sh.size)
    mean = np.zeros(n)
    np.add.at(mean, sh.inst.ravel(), grid.transfer_ns.mean(axis=0).ravel())
    mean /= sh.size
    typical = np.empty(n)
    for c in np.unique(sh.cls):
        typical[sh.cls == c] = np.median(mean[sh.cls == c])
    slow = slow_groups(grid, sh, rows)
    scale = np.where(slow & (mean > typical), typical / np.where(mean > 0, mean, 1.0), 1.0)
    return grid.transfer_ns * scale[sh.inst]


def slow_links(
    grid: StepGrid, hosts: dict[int, str], rows: np.ndarray | None = None
) -> list[tuple[str, ...]]:
    """The links (the one or two hosts their groups span) of the groups smaller than the world
    slower than their class beyond the steps' spread (``slow_groups``), the one whose groups
    lose most transfer time per step against their class's typical group first."""
    sh = _shapes(grid, hosts)
    slow = slow_groups(grid, sh, rows) & (sh.size < len(grid.ranks))
    if not slow.any():
        return []
    mean = np.bincount(sh.inst.ravel(), grid.transfer_ns.mean(axis=0).ravel(), len(sh.size))
    mean /= sh.size
    excess: dict[tuple[str, ...], float] = {}
    for i in np.flatnonzero(slow):
        if "" in sh.spans[i] or len(sh.spans[i]) > 2:
            continue
        typical = np.median(mean[sh.cls == sh.cls[i]])
        key = tuple(sorted(sh.spans[i]))
        excess[key] = excess.get(key, 0.0) + float(mean[i] - typical)
    return sorted(excess, key=lambda k: -excess[k])


def slow_groups(grid: StepGrid, sh: _Shapes, rows: np.ndarray | None = None) -> np.ndarray:
    """bool per instance: its group's transfers in its class, summed per step, slower than
    the median other group's of the class beyond their step-to-step spread (peers.py)."""
    rows = slice(None) if rows is None else rows
    flat = grid.transfer_ns[rows].reshape(-1, sh.inst.size)
    per_inst = np.stack([np.bincount(sh.inst.ravel(), w, len(sh.size)) for w in flat])
    per_inst /= sh.size
    group = grid.group.ravel()[np.unique(sh.inst.ravel(), return_index=True)[1]]
    step = float(np.median(grid.step_ns[rows]))
    slow = np.zeros(len(sh.size), dtype=bool)
    for c in np.unique(sh.cls):
        mine = np.flatnonzero(sh.cls == c)
        groups, of = np.unique(group[mine], return_inverse=True)
        if len(groups) < 2:
            continue
        totals = np.stack([per_inst[:, mine[of == g]].sum(axis=1) for g in range(len(groups))], 1)
        slow[mine] = slower_than_peers(totals, step).slower[of]
    return slow


def instance_peers(grid: StepGrid, idx: np.ndarray) -> np.ndarray:
    """(steps, len(idx), collectives): the median transfer, step by step, of the members of
    each of the ranks ``idx``' collectives' instance outside ``idx``; NaN for a send or recv
    (its two ends complete apart by nature) or an instance with no such member. Every member
    of a collective's instance completes on the same bytes: one that completes later than
    the others did was slow on its own side; a slow link's group completes late on every
    member alike."""
    inst = instances(grid.group)
    fixed = np.zeros(len(grid.ranks), dtype=bool)
    fixed[idx] = True
    members: dict[int, list[tuple[int, int]]] = {}
    for (r, k), i in np.ndenumerate(inst):
        if not fixed[r]:
            members.setdefault(int(i), []).append((r, k))
    out = np.full((grid.shape[0], len(idx), grid.shape[2]), np.nan)
    for j, r in enumerate(np.asarray(idx).tolist()):
        for k in range(grid.shape[2]):
            op = str(grid.op_names[r, k]) if grid.op_names is not None else ""
            peers = members.get(int(inst[r, k]), [])
            if peers and op not in P2P:
                rs, ks = zip(*peers, strict=True)
                out[:, j, k] = np.median(grid.transfer_ns[:, list(rs), list(ks)], axis=1)
    return out


def lagging_ranks(
    grid: StepGrid, idx: np.ndarray, rows: np.ndarray | None = None,
    peers: np.ndarray | None = None,
) -> np.ndarray:  # fmt: skip
    """bool per rank of ``idx``: its collectives complete later than the other members of
    their instances (``instance_peers``) beyond their spread over ``rows`` (default all): a
    one-sided t-test on each completion's lag behind its instance's peers, Holm-corrected
    over ``idx`` at ``ALPHA``, and a mean lag per step of at least ``MIN_EFFECT`` of the
    step (peers.py). A rank that shares its cores with other processes runs the threads
    that move its collectives' bytes there too (gloo's): it completes collectives after its
    peers. A rank that only does more work completes with them, and one-off late
    completions widen the spread and pass neither. ``peers``: ``instance_peers`` of ``idx``
    where the caller has it.

    Each completion is a sample, not each step's sum: a rank whose threads are starved
    lags in some collectives of some steps, by several ms, and leads in none by much. On
    ddp-shared-core's 14 pairs (8 measured steps in the 12 held-out ones) the hogged rank
    lagged 1.2-8.6 ms a step behind its peer, and its steps' sums spread so widely that 4
    pairs passed (p 0.006-0.05 in the others, at 0.005: the peer's column was a second
    test); its 32 completions passed in 8 (mean gain 26.0 -> 27.2 ms a step, 29.6
    measured). Of the 112 pairs of 8 other straggler cases, two changed, both still within
    the matrix's tolerance (ddp-gc-pause seed 4906 pair 1: 45.0 -> 46.9, 44.6 measured;
    ddp-periodic-stall seed 49 pair 1: 18.0 -> 17.5, 16.7)."""
    rows = slice(None) if rows is None else rows
    step = float(np.median(grid.step_ns[rows]))
    peers = (instance_peers(grid, idx) if peers is None else peers)[rows]
    p = np.ones(len(idx))
    effect = np.zeros(len(idx), dtype=bool)
    for j, r in enumerate(np.asarray(idx).tolist()):
        known = ~np.isnan(peers[:, j])
        lag = np.where(known, grid.transfer_ns[rows][:, r] - peers[:, j], 0.0)
        if known.any():
            p[j] = p_above_zero(lag[known])
            effect[j] = lag.sum(axis=1).mean() >= MIN_EFFECT * step
    return holm(p, ALPHA) & effect


def at_peers_pace(grid: StepGrid, idx: np.ndarray, rows: np.ndarray | None = None) -> StepGrid:
    """The ranks ``idx``' own durations replaced, step by step, by the median of the others';
    and, for those of them that complete their collectives late (``lagging_ranks`` over
    ``rows``), their transfers by the median of the other members of the same instance
    where that is shorter: the time a rank takes to complete a collective after its peers
    did is its own, and goes with its fix (on
    ddp-shared-core the hogged rank's 4 collectives took 6.7 ms a step longer than its
    peer's, which the replay kept after pacing its compute). What its slowness adds to its
    peers' transfers (they wait for its bytes too) stays: nothing in the run says how fast
    those would move without it.

    Paced step by step, a fixed rank loses its own jitter, which a re-run keeps (with 2
    ranks, E[max(a, b)] - E[a]: 0.2 ms a step, median, on the fault matrix's clean arms).
    Keeping it (its own time less its median excess per part, its stalls paced) was
    measured on the 171 straggler pairs of seeds 49 and 4902 and not adopted: the marginal
    faults' median error went from +0.43 to +0.03 ms a step, the clear ones' from -0.27 to
    -0.68, and fewer held (130 pairs of 171 against 135; 65 cases of 70 against 66). What it
    keeps is the sleep's own jitter too (0.46 ms on clear faults against their clean arms'
    0.17), and the clear faults' re-runs gain 1.2 ms a step beyond the sleep, which no
    jitter term explains: even each clean arm's own jitter taken off held 133."""
    others = np.ones(len(grid.ranks), dtype=bool)
    others[idx] = False
    if not others.any():
        raise ValueError("every rank would be fixed: no other rank gives the pace")

    def paced(a: np.ndarray) -> np.ndarray:
        out = a.copy()
        out[:, idx] = np.median(a[:, others], axis=1, keepdims=True)
        return out

    transfer = completed_with_peers(grid, idx, rows)
    return replace(grid, transfer_ns=transfer, **{f: paced(getattr(grid, f)) for f in OWN_FIELDS})


def completed_with_peers(
    grid: StepGrid, idx: np.ndarray, rows: np.ndarray | None = None
) -> np.ndarray:
    """The grid's transfers, those of each rank of ``idx`` that completes its collectives
    late (``lagging_ranks`` over ``rows``) at most the median of the other members of the
    same instance, step by step (``instance_peers``); the others' as measured."""
    transfer = grid.transfer_ns.copy()
    peers = instance_peers(grid, idx)
    late = lagging_ranks(grid, idx, rows, peers)
    if not late.any():
        return transfer
    for j, r in enumerate(np.asarray(idx).tolist()):
        if late[j]:
            transfer[:, r] = np.fmin(transfer[:, r], peers[:, j])
    return transfer
