"""The run's process groups and their roles: the members each rank recorded for the groups
it issued collectives on (its meta file), the ``DeviceMesh`` dimension that made a group
(dp, tp, pp, ... or the user's names), else a role from the members: ``world`` for every
rank, ``stride N`` for members N ranks apart (a mesh dimension the script did not name: in
a dp x tp mesh the tp groups are stride 1 and the dp groups stride tp). Runs recorded
before the probe wrote members get, for each group label of their rows, the ranks that
recorded collectives on it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from scalescope.analyze.columns.grouping import group_by
from scalescope.events import Kind, Run, SymbolTable


@dataclass(frozen=True)
class ProcessGroup:
    label: str
    """The label the collectives' rows carry (torch's group name)."""
    ranks: tuple[int, ...]
    dim: str
    """Its mesh dimension's name, ``world``, ``stride N``, or ``other`` (members at
    uneven distances)."""
    named: bool
    """True when a DeviceMesh named the dimension; False when it was inferred."""
    backend: str = ""
    """``gloo``, ``nccl``, ... as its ranks recorded it; "" where none did."""


def process_groups(run: Run) -> tuple[ProcessGroup, ...]:
    """Every group with collectives in the run or in a rank's meta, largest first."""
    members: dict[str, set[int]] = {}
    dims: dict[str, str] = {}
    backends: dict[str, str] = {}
    for meta in run.ranks.values():
        for label, group in (getattr(meta, "groups", None) or {}).items():
            members.setdefault(label, set()).update(group.ranks)
            if group.dim:
                dims[label] = group.dim
            if group.backend:
                backends[label] = group.backend
    world = set(range(run.meta.world_size)) if run.meta.world_size else set(run.ranks)
    recorded = _recorded_members(run)
    everyone = set().union(*recorded.values()) if recorded else set()
    for label, ranks in recorded.items():
        if not members.get(label):  # a rank whose file is missing was in it all the same
            members[label] = world if ranks == everyone else ranks
    out = [
        ProcessGroup(label, tuple(sorted(ranks)), dims.get(label) or group_role(ranks, world),
                     label in dims, backends.get(label, ""))
        for label, ranks in members.items() if ranks
    ]  # fmt: skip
    return tuple(sorted(out, key=lambda g: (-len(g.ranks), g.dim, g.ranks)))


def _recorded_members(run: Run) -> dict[str, set[int]]:
    """Per group label of the collective rows (and of ``--record summary``'s SUMMARY rows: a
    group used outside the windows only): the ranks that recorded rows on it."""
    ev = run.events
    colls = ev.select((ev.kind == int(Kind.COLLECTIVE)) | (ev.kind == int(Kind.SUMMARY)))
    out: dict[str, set[int]] = {}
    for group, rank in group_by(colls.group, colls.rank).keys.tolist():
        out.setdefault(str(colls.symbols[int(group)]), set()).add(int(rank))
    return out


def group_role(ranks: set[int], world: set[int]) -> str:
    """``world``, ``stride N``, or ``other``. A pair is N apart around the ring of ranks
    (the last stage's pair with the first is the same dimension as the others')."""
    if ranks >= world:
        return "world"
    ordered = sorted(ranks)
    steps = set(np.diff(ordered).tolist())
    if len(ordered) == 2 and world:
        steps = {min(steps.pop(), len(world) - (ordered[1] - ordered[0]))}
    return f"stride {steps.pop()}" if len(steps) == 1 else "other"


def dims_of(groups: tuple[ProcessGroup, ...]) -> dict[str, str]:
    """label -> dimension, for the tables of collectives."""
    return {g.label: g.dim for g in groups}


def dim_lookup(symbols: SymbolTable, dims: Mapping[str, str]) -> tuple[np.ndarray, list[str]]:
    """Per symbol id (and one past the last), the index in the names returned of the
    dimension of the group the symbol labels (``dims``: label -> dimension); -1 for any
    other symbol."""
    names = list(dict.fromkeys(dims.values()))
    index = {name: i for i, name in enumerate(names)}
    lookup = np.full(len(symbols.strings) + 1, -1, dtype=np.int64)
    for label, dim in dims.items():
        sid = symbols.id_of(label)
        if sid >= 0:
            lookup[sid] = index[dim]
    return lookup, names


@dataclass(frozen=True)
class DimTotals:
    """The collectives of one mesh dimension (or role) over the measured steps."""

    dim: str
    named: bool
    groups: int
    ranks_per_group: int
    """The largest group's size."""
    calls: int
    ms_per_rank: float
    """Issue-to-completion time summed per rank that issued on the dimension, averaged."""
    bytes_per_rank: float


def dim_totals(
    run: Run, groups: tuple[ProcessGroup, ...], warmup_steps: int
) -> tuple[DimTotals, ...]:
    """Per dimension with collectives, largest time first: the measured (post-warm-up,
    completed; every completed one where no step passed the warm-up) collectives on its
    groups. One pass of bincounts over the rows (a 1,024-rank run has millions)."""
    colls = run.events.of_kind(Kind.COLLECTIVE)
    lookup, names = dim_lookup(colls.symbols, dims_of(groups))
    keep = colls.dur_ns >= 0
    measured = keep & (colls.step >= warmup_steps)
    keep = measured if measured.any() else keep  # a script without steps: every row counts
    dim = lookup[colls.group[keep]]
    known = dim >= 0
    dim, rank = dim[known], colls.rank[keep][known]
    n = len(names)
    calls = np.bincount(dim, minlength=n)
    dur = np.bincount(dim, weights=colls.dur_ns[keep][known], minlength=n)
    nbytes = np.bincount(dim, weights=colls.nbytes[keep][known], minlength=n)
    ranks = np.bincount(group_by(dim, rank).keys[:, 0], minlength=n) if len(dim) else calls
    out = []
    for i, name in enumerate(names):
        if calls[i] == 0:
            continue
        mine = [g for g in groups if g.dim == name]
        per = max(int(ranks[i]), 1)
        out.append(DimTotals(
            name, all(g.named for g in mine), len(mine), max(len(g.ranks) for g in mine),
            int(calls[i]), float(dur[i]) / 1e6 / per, float(nbytes[i]) / per,
        ))  # fmt: skip
    return tuple(sorted(out, key=lambda d: -d.ms_per_rank))
