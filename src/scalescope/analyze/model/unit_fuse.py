"""``comm:fused``: FSDP's units merged into one, the fix for units too small (a unit per
layer). It buys more than hidden transfers (``comm:hidden``) and less: each pass's many small
calls become one call of all their bytes, which pays the op's latency once instead of once a
unit, and the host work each unit's call costs whatever its size (FSDP's pre- and post-hooks,
its copies into and out of the flat buffers, the issue of the call) goes with the calls that
merge away; the one call's transfer is still paid, and nothing then overlaps it.

The model of the merged step (step_grid.py), per pass: a unit's n-th all-gather (``unshard:*``:
forward's, then backward's when units reshard after forward) merges into one call at the place
of the first of them, the reduce-scatters (``reduce_grads:*``) into one at the place of the
last, as one unit issues them (its all-gather before the pass, its reduce-scatter after all of
backward). A call that merges away hands its own time, less its fixed host cost, to the next
call kept (or to the step's tail). The merged call's transfer, step by step, is its members'
transfers scaled by the op's α-β line (transfer = α + β·bytes, fitted over the run's calls of
that op): α + β·Σbytes over Σ(α + β·bytes). The fixed host cost of a call is the intercept of
the same kind of line through the own time before each call that merges away against its
bytes (a unit's compute grows with its parameters, its hooks and copies' issue do not); with
fewer than ``MIN_SIZES`` sizes of unit the two cannot be told apart and no host cost is
taken away (only the transfers merge).

On the fault matrix's fsdp-small-units (a unit a layer, 33 calls a step, against one unit,
3 calls): the own time before the calls is 8.6-15.4 ms a step more with a unit a layer
(0.3-0.5 ms a call), time ``comm:hidden`` keeps and the one-unit run does not spend."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from scalescope.analyze.comm.alpha_beta import weighted_line
from scalescope.analyze.model.step_grid import StepGrid
from scalescope.events.tags import REDUCE_GRADS, UNSHARD, tag_kind, tag_unit, unit_tag

FUSED = "comm:fused"
MIN_SIZES = 3
"""Distinct unit sizes, at least, for a call's fixed host cost to be fitted apart from the
compute that grows with the unit."""


@dataclass(frozen=True)
class FusePlan:
    """Which place of the step each collective merges into."""

    into: np.ndarray
    """(collectives,): the place each one's call merges into (itself where kept)."""

    @property
    def kept(self) -> np.ndarray:
        return self.into == np.arange(len(self.into))

    @property
    def merged(self) -> np.ndarray:
        """The places that merge away."""
        return ~self.kept


def fuse_plan(grid: StepGrid) -> FusePlan:
    """Each FSDP unit's n-th all-gather into the first of the n-th ones, its n-th
    reduce-scatter into the last; every other collective kept. ValueError where no pass has
    two units' calls or the ranks' steps are not one FSDP layout."""
    tags = grid.tags
    if tags is None or not (tags == tags[:1]).all():
        raise ValueError(f"bad cause {FUSED!r}: the ranks' collectives carry different tags")
    into = np.arange(grid.shape[2])
    for members in _passes(tags[0]).values():
        if len(members) < 2:
            continue
        _check_one_call(grid, members)
        target = members[0] if tag_kind(str(tags[0, members[0]])) == UNSHARD else members[-1]
        into[members] = target
    if (into == np.arange(len(into))).all():
        raise ValueError(f"bad cause {FUSED!r}: no pass has calls of two FSDP units to merge")
    return FusePlan(into)


def fusable(grid: StepGrid) -> bool:
    """Whether ``comm:fused`` has calls to merge (candidate causes try it then)."""
    try:
        fuse_plan(grid)
    except ValueError:
        return False
    return True


def merges(tag: str) -> bool:
    """Whether a call of ``tag`` is one ``comm:fused`` merges: an FSDP unit's all-gather or
    reduce-scatter (a summary's joined tag, ``unshard:*``, too)."""
    return tag_kind(tag) in (UNSHARD, REDUCE_GRADS) and tag_unit(tag) is not None


def _passes(tags: np.ndarray) -> dict[tuple[str, int], list[int]]:
    """(kind, n) -> the places of each unit's n-th call of that kind, in order."""
    seen: dict[str, int] = {}
    out: dict[tuple[str, int], list[int]] = {}
    for k, tag in enumerate(str(t) for t in tags):
        if not merges(tag):
            continue
        kind = tag_kind(tag)
        n = seen.get(tag, 0)
        seen[tag] = n + 1
        out.setdefault((kind, n), []).append(k)
    return out


def _check_one_call(grid: StepGrid, members: list[int]) -> None:
    """The calls merged must be one op on one group: what a single call could be."""
    same_group = (grid.group[:, members] == grid.group[:, members[:1]]).all()
    ops = grid.op_names
    same_op = ops is None or (ops[:, members] == ops[:, members[:1]]).all()
    if not (same_group and same_op):
        raise ValueError(f"bad cause {FUSED!r}: a pass's calls are on several groups or ops")
    waits = grid.waits_with
    if waits is not None and (waits[:, members] >= 0).any():
        raise ValueError(f"bad cause {FUSED!r}: a pass's calls are batched sends and receives")


def line_fit(x: np.ndarray, t: np.ndarray) -> tuple[float, float]:
    """(α, β) of t = α + β·x (``alpha_beta.weighted_line``, times not positive left out).
    One size cannot tell the two apart: all of it is then the slope, so that calls merged
    keep the sum of their times (no saving the run did not show)."""
    x, t = np.asarray(x, float), np.asarray(t, float)
    ok = t > 0
    x, t = x[ok], t[ok]
    if len(t) == 0:
        return 0.0, 0.0
    if len(np.unique(x)) < 2:
        size = float(x[0])
        return (0.0, float(np.median(t)) / size) if size > 0 else (float(np.median(t)), 0.0)
    return weighted_line(x, t)


def host_cost_ns(grid: StepGrid, plan: FusePlan, rows: np.ndarray | slice) -> float:
    """A call's fixed host cost: the intercept of the own time before each call that merges
    away (its median over ``rows`` and the ranks) against its bytes; 0 with fewer than
    ``MIN_SIZES`` sizes among them. A call whose own time in a step is less gives up all of
    it (``own_time_moved``): the intercept is no cap of the least one, which one call
    issued right after another (a backward prefetch) would set far below the rest."""
    merged = np.flatnonzero(plan.merged)
    sizes = grid.nbytes[0, merged].astype(float) if grid.nbytes is not None else np.zeros(0)
    if len(np.unique(sizes)) < MIN_SIZES:
        return 0.0
    own = np.median(grid.work_ns[rows][:, :, merged], axis=(0, 1))
    return line_fit(sizes, own)[0]


def merged_transfers(grid: StepGrid, plan: FusePlan) -> np.ndarray:
    """(steps, ranks, collectives): the transfers with each merged call's at its place,
    its members' sum scaled by α + β·Σbytes over Σ(α + β·bytes) of the op's line."""
    transfer = grid.transfer_ns.copy()
    nbytes = grid.nbytes[0].astype(float)
    for target in np.unique(plan.into[plan.merged]):
        members = np.flatnonzero(plan.into == target)
        alpha, beta = _op_line(grid, int(target))
        modelled = alpha * len(members) + beta * nbytes[members].sum()
        scale = (alpha + beta * nbytes[members].sum()) / modelled if modelled > 0 else 1.0
        transfer[:, :, target] = grid.transfer_ns[:, :, members].sum(axis=2) * scale
    return transfer


def _op_line(grid: StepGrid, k: int) -> tuple[float, float]:
    """The α-β line of the op of place ``k`` over every place of that op (medians over the
    steps and ranks)."""
    ops = grid.op_names[0] if grid.op_names is not None else np.array(grid.ops)
    same = np.flatnonzero(ops == ops[k])
    median = np.median(grid.transfer_ns[:, :, same], axis=(0, 1))
    return line_fit(grid.nbytes[0, same].astype(float), median)


def fused(grid: StepGrid, rows: np.ndarray | slice | None = None) -> tuple[StepGrid, str]:
    """The grid with FSDP's units merged into one (``fuse_plan``), and how: the calls that
    merge away gone with their fixed host cost (``host_cost_ns`` over ``rows``, default
    all), each merged call's transfer from the op's α-β line (``merged_transfers``)."""
    plan = fuse_plan(grid)
    rows = slice(None) if rows is None else rows
    cost = host_cost_ns(grid, plan, rows)
    transfer = merged_transfers(grid, plan)
    work, prejoin, post = own_time_moved(grid, plan, cost)
    phases = {n: parts_moved(p, plan, grid.joins) for n, p in grid.phase_ns.items()}
    blocking = _merged_any(grid.blocking, plan)
    nbytes = _merged_bytes(grid.nbytes, plan)
    names = [str(t) for t in grid.tags[0]]
    for target in np.unique(plan.into[plan.merged]):
        names[target] = unit_tag(tag_kind(names[target]), None)
    whole = replace(
        grid, work_ns=work, blocking=blocking, transfer_ns=transfer, prejoin_ns=prejoin,
        post_ns=post, nbytes=nbytes, tags=np.array([names] * grid.shape[1]),
    )  # fmt: skip
    out = columns_kept(whole, plan.kept, phases)
    calls = int(plan.merged.sum())
    note = f"FSDP units merged into one: {calls} fewer calls a step"
    return out, note + (f", {cost / 1e6:.2f} ms of host work each" if cost > 0 else "")


def next_kept(plan: FusePlan) -> np.ndarray:
    """(collectives,): the first kept place after each place; n_k where none (the tail)."""
    kept = np.flatnonzero(plan.kept)
    return np.array([kept[kept > k][0] if (kept > k).any() else len(plan.into)
                     for k in range(len(plan.into))])  # fmt: skip


def own_time_moved(
    grid: StepGrid, plan: FusePlan, cost: float | np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """work, prejoin and post with each merged-away call's own time, less ``cost`` (one for
    every call, or (steps, ranks, collectives)), moved to the next kept call (or to the tail:
    before the join where the step has one)."""
    work, prejoin, post = grid.work_ns.copy(), grid.prejoin_ns.copy(), grid.post_ns.copy()
    nxt = next_kept(plan)
    costs = np.broadcast_to(cost, grid.shape)
    for k in np.flatnonzero(plan.merged):
        moved = np.maximum(grid.work_ns[:, :, k] - costs[:, :, k], 0.0)
        work[:, :, k] = 0.0
        if nxt[k] < len(nxt):
            work[:, :, nxt[k]] += moved
        else:
            prejoin += np.where(grid.joins, moved, 0.0)
            post += np.where(grid.joins, 0.0, moved)
    return work, prejoin, post


def parts_moved(parts: np.ndarray, plan: FusePlan, joins: np.ndarray) -> np.ndarray:
    """A phase's parts (steps, ranks, collectives + 2) with the merged-away places' moved as
    the own time is (``own_time_moved``), the kept places and the tail left."""
    n_k = len(plan.into)
    out = parts.copy()
    nxt = next_kept(plan)
    for k in np.flatnonzero(plan.merged):
        to = nxt[k] if nxt[k] < n_k else None
        if to is not None:
            out[:, :, to] += parts[:, :, k]
        else:
            out[:, :, n_k] += np.where(joins, parts[:, :, k], 0.0)
            out[:, :, n_k + 1] += np.where(joins, 0.0, parts[:, :, k])
    return out[:, :, np.r_[np.flatnonzero(plan.kept), n_k, n_k + 1]]


def _merged_any(blocking: np.ndarray, plan: FusePlan) -> np.ndarray:
    """A merged call blocks where any of its members did."""
    out = blocking.copy()
    for target in np.unique(plan.into[plan.merged]):
        out[:, :, target] = blocking[:, :, plan.into == target].any(axis=2)
    return out


def _merged_bytes(nbytes: np.ndarray, plan: FusePlan) -> np.ndarray:
    out = nbytes.copy()
    for target in np.unique(plan.into[plan.merged]):
        out[:, target] = nbytes[:, plan.into == target].sum(axis=1)
    return out


def columns_kept(grid: StepGrid, keep: np.ndarray, phases: dict[str, np.ndarray]) -> StepGrid:
    """The grid with only the places ``keep`` of its step (the calls merged or dropped away
    gone), ``phases`` its phases' parts for the places kept (``parts_moved``)."""
    return replace(
        grid, group=grid.group[:, keep], work_ns=grid.work_ns[:, :, keep],
        blocking=grid.blocking[:, :, keep], transfer_ns=grid.transfer_ns[:, :, keep],
        ops=tuple(o for o, k in zip(grid.ops, keep, strict=False) if k),
        op_names=_cols(grid.op_names, keep), nbytes=_cols(grid.nbytes, keep),
        dims=_cols(grid.dims, keep), tags=_cols(grid.tags, keep),
        group_symbol=_cols(grid.group_symbol, keep),
        waits_with=_renumbered(grid.waits_with, keep), phase_ns=phases,
    )  # fmt: skip


def _cols(a: np.ndarray | None, keep: np.ndarray) -> np.ndarray | None:
    return None if a is None else a[:, keep]


def _renumbered(waits: np.ndarray | None, keep: np.ndarray) -> np.ndarray | None:
    """``waits_with``'s places renumbered to the kept ones (a batch never merges:
    ``_check_one_call``)."""
    if waits is None:
        return None
    new = np.cumsum(keep) - 1
    kept = waits[:, keep]
    return np.where(kept >= 0, new[np.maximum(kept, 0)], -1)
