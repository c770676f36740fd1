"""Each rank's place in the job: the pipeline stage it holds and its index along each mesh
dimension (``stage 1 · dp 3 · tp 0``), for the views that list ranks (``top``).

A dimension is a role of analyze/ranks/groups.py's process groups: a ``DeviceMesh``'s name, or
``stride N`` for groups it inferred from their members. A rank's index along it is its
position among the members of its group of that dimension (a DeviceMesh's groups list their
ranks in the mesh's order, ascending for a mesh of ``arange``). Left out: the world (the index
is the rank), ``other`` (members at uneven distances), and a dimension whose groups overlap
(pairs of a hand-written pipeline's neighbours) or that has a single group: none of them
tells one rank from another along an axis. Outermost dimension first (the largest distance
between a group's members: dp before tp in a dp x tp mesh).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from itertools import pairwise

from scalescope.analyze.layouts.pipeline import PipelineAnalysis
from scalescope.analyze.ranks.groups import ProcessGroup
from scalescope.events.run import RankMeta


@dataclass(frozen=True)
class RankPlace:
    stages: tuple[int, ...] = ()
    """The pipeline stages it holds (several in an interleaved schedule); () without one."""
    coords: tuple[tuple[str, int], ...] = ()
    """(dimension, its index along it), the outermost dimension first."""


def _axis(groups: list[ProcessGroup]) -> int | None:
    """The distance between neighbours of the dimension's groups, None when the groups
    cannot be an axis: one group, a member alone, or a rank in two of them."""
    if len(groups) < 2 or any(len(g.ranks) < 2 for g in groups):
        return None
    members = [r for g in groups for r in g.ranks]
    if len(set(members)) < len(members):
        return None
    return min(b - a for g in groups for a, b in pairwise(g.ranks))


def mesh_coordinates(groups: tuple[ProcessGroup, ...]) -> dict[int, tuple[tuple[str, int], ...]]:
    """rank -> (dimension, index) along every dimension that is an axis (module docstring);
    ranks in none of them are left out."""
    by_dim: dict[str, list[ProcessGroup]] = {}
    for g in groups:
        if g.dim not in ("world", "other"):
            by_dim.setdefault(g.dim, []).append(g)
    axes = {dim: d for dim, gs in by_dim.items() if (d := _axis(gs)) is not None}
    out: dict[int, list[tuple[str, int]]] = {}
    for dim in sorted(axes, key=lambda name: (-axes[name], name)):
        for g in by_dim[dim]:
            for i, rank in enumerate(sorted(g.ranks)):
                out.setdefault(rank, []).append((dim, i))
    return {rank: tuple(coords) for rank, coords in out.items()}


def pipeline_stages(
    pipeline: PipelineAnalysis | None, metas: Mapping[int, RankMeta | None]
) -> dict[int, tuple[int, ...]]:
    """rank -> the stages it holds: what ``torch.distributed.pipelining`` told its meta, else
    the stage analyze/layouts/pipeline.py gave it (inferred from a chain of sends and recvs)."""
    out = {f.rank: (f.stage,) for f in pipeline.ranks} if pipeline is not None else {}
    for rank, meta in metas.items():
        pipe = meta.pipeline if meta is not None else None
        if pipe is not None:
            out[rank] = tuple(pipe.stages_held) or (pipe.stage,)
    return out


def rank_places(
    groups: tuple[ProcessGroup, ...], stages: Mapping[int, tuple[int, ...]]
) -> dict[int, RankPlace]:
    """Every rank with a stage or a coordinate; {} for a job with neither (data parallel
    alone: its ranks' place is their rank)."""
    coords = mesh_coordinates(groups)
    return {
        rank: RankPlace(tuple(stages.get(rank, ())), coords.get(rank, ()))
        for rank in sorted(set(coords) | set(stages))
    }
