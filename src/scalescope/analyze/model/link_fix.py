"""A slow link fixed in the step model (``link:HOST,HOST``): its own groups' transfers at the
pace of the groups of their shape over other links, and the collectives of larger groups that
cross it, where it bound them, at the bandwidth of those other links.

A ring or a tree over a group moves its bytes at the pace of its slowest link. In a pipeline
the pairs between two nodes show a slow link by comparison (analyze/ranks/links.py); the
data-parallel all-reduces over the same ranks cross it too, every rank at once, and a fix of
the link speeds them up as much as it does the pairs. Only where the link bound them: a
collective whose bus bandwidth (nccl-tests' busbw: its bytes times the op's bus factor, over
its transfer) is nearer the link's slow bandwidth than its peers' (below their geometric mean)
moves no faster than the link allows; its bytes then take the time they take over a healthy
link, its latency stays. A collective faster than that was bound by something else, and keeps
its time. Where the collectives over the same group come in several sizes, their latency
(``latency_ns``: the intercept of their times over their bytes) is no byte's time: the
bandwidth is their bytes over the time beyond it. On the fault matrix's marginal slow link
(3 netns hosts, 1 MiB pairs at 300-500 Mbit/s) the 256 KiB all-reduce over the three took
5.5-6 ms and the 1 KiB one 4-5: 45-60 MB/s over its whole time, below the link's and its
peers' geometric mean, yet 85-450 MB/s over its bytes, and as long in the re-runs without the
throttle; counted as bound, the fix took ~4 ms a step off them that no re-run gained.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from scalescope.analyze.comm.alpha_beta import weighted_line
from scalescope.analyze.comm.collectives import bus_factor
from scalescope.analyze.model.pacing import LinkShapes, ideal, link_classes, slow_links
from scalescope.analyze.model.step_grid import StepGrid
from scalescope.analyze.ranks.links import MIN_INSTANCES, SLOW_RATIO


def bound_by_link(busbw: float | np.ndarray, slow_bw: float, peers_bw: float) -> np.ndarray:
    """Whether a collective that crosses a slow link moves its bytes at the link's pace: its
    bus bandwidth (nccl-tests' busbw) nearer the link's ``slow_bw`` than its peers'
    ``peers_bw``, below their geometric mean (any one unit for the three; bool, or one per
    element of ``busbw``). A ring or a tree is as fast as its slowest link; one faster than
    that was bound by something else."""
    return (0.0 < slow_bw < peers_bw) & (np.asarray(busbw) < (slow_bw * peers_bw) ** 0.5)


def without_link(grid: StepGrid, part: str, value: str, hosts: dict[int, str]) -> StepGrid:
    """Transfers over the link between two nodes (or inside one) as fast as over the others:
    each transfer of a group smaller than the world that spans exactly ``value``'s nodes
    (``HOST,HOST`` or ``HOST``, checked by the caller) takes at most the median, step by
    step, of the groups of its shape (op, size, ranks, nodes spanned) elsewhere, as
    analyze/ranks/links.py compares them; the collectives that cross the link and were bound
    by it (``crossing``) move their bytes at those groups' bandwidth."""
    ends = frozenset(h for h in value.split(",") if h)
    if grid.op_names is None or grid.nbytes is None:
        raise ValueError(f"bad cause {part!r}: the model has no message sizes")
    sh = link_classes(grid, hosts, ends)
    if not sh.on_link.any():
        raise ValueError(
            f"no group smaller than the world ran over the link {value!r}: a link is told "
            "apart only where groups of the same shape cross other links"
        )
    transfer = grid.transfer_ns.copy()
    widest = (0, np.zeros(0), np.zeros(0))  # the link's largest class: bytes, its transfers
    for c in np.unique(sh.cls[sh.on_link]):
        shape = sh.on_link & (sh.cls == c)
        if not (~sh.on_link & sh.subgroup & (sh.cls == c)).any():
            raise ValueError(f"the link {value!r}: no other group of the same shape to pace it")
        for op in np.unique(grid.op_names[shape]):  # a send by sends, a recv by recvs
            mine = shape & (grid.op_names == op)
            peers = ~sh.on_link & sh.subgroup & (sh.cls == c) & (grid.op_names == op)
            if not peers.any():  # a class of one op only has the other on its peers' side
                peers = ~sh.on_link & sh.subgroup & (sh.cls == c)
            pace = np.median(grid.transfer_ns[:, peers], axis=1, keepdims=True)
            transfer[:, mine] = np.minimum(transfer[:, mine], pace)
            nbytes = int(grid.nbytes[mine][0])
            if nbytes > widest[0] or (nbytes == widest[0] and op == "recv"):
                widest = (nbytes, grid.transfer_ns[:, mine].mean(axis=1), pace[:, 0])
    crossed = crossing(grid, sh, *widest)
    return replace(grid, transfer_ns=np.where(sh.crosses, crossed, transfer))


def crossing(
    grid: StepGrid, sh: LinkShapes, nbytes: int, slow_ns: np.ndarray, paced_ns: np.ndarray
) -> np.ndarray:
    """The transfers (steps, ranks, collectives) of the collectives that cross a link, had
    the link moved their bytes at its peers' pace: its groups move ``nbytes`` in ``slow_ns``
    per step, their peers in ``paced_ns``. Where a collective's bus bandwidth over the steps
    says the link bound it (``bound_by_link``, the link's and its peers' bandwidths over the
    steps; its bandwidth over its time beyond its latency, ``latency_ns``), its bus bytes
    lose, step by step, the time per byte the link took beyond its peers (at most its time
    beyond its latency scaled by their ratio); every other transfer as it was. Step by
    step, so that the steps before a link slowed mid-run keep their collectives' times; and
    where the run has such steps (the link under ``SLOW_RATIO`` times its peers' transfer in
    ``MIN_INSTANCES`` steps or more), no faster than the collective's median over them: what
    bounds it once the link is fast (a CPU-bound ring) is measured there, not assumed."""
    assert grid.op_names is not None and grid.nbytes is not None
    t = grid.transfer_ns
    slow, paced = float(np.mean(slow_ns)) if len(slow_ns) else 0.0, float(np.mean(paced_ns))
    if nbytes <= 0 or not 0 < paced < slow:
        return t
    factor = np.zeros(grid.op_names.shape)
    for op in np.unique(grid.op_names[sh.crosses]):
        for n in np.unique(sh.size[sh.crosses & (grid.op_names == op)]):
            mine = sh.crosses & (grid.op_names == op) & (sh.size == n)
            factor[mine] = bus_factor(str(op), int(n)) or 0.0
    bus_bytes = factor * grid.nbytes
    mean = t.mean(axis=0)
    latency = latency_ns(grid, sh.crosses & (bus_bytes > 0), bus_bytes, mean)
    moving = mean - latency
    busbw = np.divide(bus_bytes, moving, out=np.full(mean.shape, np.inf), where=moving > 0)
    bound = sh.crosses & (bus_bytes > 0) & bound_by_link(busbw, nbytes / slow, nbytes / paced)
    per_byte = np.maximum(slow_ns - paced_ns, 0.0) / nbytes
    ratio = np.divide(paced_ns, slow_ns, out=np.ones(len(slow_ns)), where=slow_ns > paced_ns)
    floor = latency + (t - latency) * ratio[:, None, None]  # its bytes' time scaled at most
    fixed = np.minimum(np.maximum(t - bus_bytes * per_byte[:, None, None], floor), t)
    healthy = slow_ns < SLOW_RATIO * paced_ns
    if healthy.sum() >= MIN_INSTANCES:  # measured, not guessed: as while the link was fast
        fixed = np.where(healthy[:, None, None], t, np.maximum(fixed, np.median(t[healthy], 0)))
    return np.where(bound, fixed, t)


def latency_ns(
    grid: StepGrid, among: np.ndarray, bus_bytes: np.ndarray, mean_ns: np.ndarray
) -> np.ndarray:
    """(ranks, collectives): the latency of each of the collectives ``among`` (bool, same
    shape), 0 elsewhere: per op and group (``grid.group_symbol``, else ``grid.group``) with
    two sizes of bus bytes or more, the intercept of their mean times ``mean_ns`` over their
    ``bus_bytes`` (``weighted_line``), at most the smallest's time (its bytes take some) and
    at least 0 (a noisy fit's negative intercept); of one size only, 0 (its time is all
    bytes: nothing tells its latency apart)."""
    assert grid.op_names is not None
    groups = grid.group_symbol if grid.group_symbol is not None else grid.group
    out = np.zeros(mean_ns.shape)
    for op in np.unique(grid.op_names[among]):
        for g in np.unique(groups[among & (grid.op_names == op)]):
            mine = among & (grid.op_names == op) & (groups == g) & (mean_ns > 0)
            x, y = bus_bytes[mine].astype(np.float64), mean_ns[mine]
            if len(np.unique(x)) < 2:
                continue
            alpha, _ = weighted_line(x, y)
            out[mine] = min(max(alpha, 0.0), float(y[x == x.min()].mean()))
    return out


def ideal_with_links(
    grid: StepGrid, hosts: dict[int, str], rows: np.ndarray | None = None
) -> StepGrid:
    """``pacing.ideal`` (no slow rank, node or group), with the collectives that cross each
    slow link (``slow_links``) as that link's fix leaves them (``crossing``): the ideal step
    fixes every slow link whole, not its own groups only."""
    out = ideal(grid, hosts, rows)
    transfer = out.transfer_ns
    for ends in slow_links(grid, hosts, rows):
        try:
            fixed = without_link(grid, "ideal", ",".join(ends), hosts)
        except ValueError:  # no group of its shape elsewhere: its groups are not paced either
            continue
        crosses = link_classes(grid, hosts, frozenset(ends)).crosses
        transfer = np.where(crosses, np.minimum(transfer, fixed.transfer_ns), transfer)
    return replace(out, transfer_ns=transfer)
