"""Each rank's place (analyze/coordinates.py): its index along each mesh dimension, read
from the groups its meta file names (named by a DeviceMesh or told by stride), and its
pipeline stage from its meta or from a chain of sends and recvs."""

from __future__ import annotations

from analysed import analysed  # noqa: E402
from analyze_runs import make_run
from test_pipeline import chain_rows

from scalescope.analyze.layouts.coordinates import (
    RankPlace,
    mesh_coordinates,
    pipeline_stages,
    rank_places,
)
from scalescope.analyze.ranks.groups import process_groups
from scalescope.events.run import GroupMeta, PipelineMeta, RankMeta


def groups_run(tmp_path, world: int, groups: dict[str, tuple[tuple[int, ...], str]]):
    """A finished run whose ranks' meta files name ``groups`` (label -> members, dim) they
    are in; no events."""
    files = {
        r: RankMeta(rank=r, world_size=world, status="completed",
                    groups={label: GroupMeta(ranks=list(members), dim=dim)
                            for label, (members, dim) in groups.items() if r in members})
        for r in range(world)
    }  # fmt: skip
    return make_run(tmp_path, {}, world_size=world, rank_files=files)


MESH_2X2 = {
    "0": ((0, 1, 2, 3), ""),
    "1": ((0, 1), "tp"),
    "2": ((2, 3), "tp"),
    "3": ((0, 2), "dp"),
    "4": ((1, 3), "dp"),
}
"""init_device_mesh("cpu", (2, 2), mesh_dim_names=("dp", "tp")) and the world's group."""


def test_a_2x2_mesh_gives_each_rank_its_dp_and_tp_index(tmp_path) -> None:
    coords = mesh_coordinates(process_groups(groups_run(tmp_path, 4, MESH_2X2)))
    assert coords == {
        0: (("dp", 0), ("tp", 0)),
        1: (("dp", 0), ("tp", 1)),
        2: (("dp", 1), ("tp", 0)),
        3: (("dp", 1), ("tp", 1)),
    }


def test_the_outer_dimension_comes_first_whatever_its_name(tmp_path) -> None:
    """tp across the pairs 2 apart: tp is the outer dimension, dp the inner."""
    groups = {"1": ((0, 2), "tp"), "2": ((1, 3), "tp"), "3": ((0, 1), "dp"), "4": ((2, 3), "dp")}
    coords = mesh_coordinates(process_groups(groups_run(tmp_path, 4, groups)))
    assert coords[1] == (("tp", 0), ("dp", 1))
    assert coords[2] == (("tp", 1), ("dp", 0))


def test_groups_without_names_are_dimensions_by_stride(tmp_path) -> None:
    """8 ranks, 2 x 4 by hand (new_group): the groups of 4 consecutive ranks are stride 1, the
    pairs 4 apart stride 4."""
    groups = {"0": (tuple(range(8)), "")}
    groups |= {f"a{i}": (tuple(range(4 * i, 4 * i + 4)), "") for i in range(2)}
    groups |= {f"b{i}": ((i, i + 4), "") for i in range(4)}
    coords = mesh_coordinates(process_groups(groups_run(tmp_path, 8, groups)))
    assert coords[0] == (("stride 4", 0), ("stride 1", 0))
    assert coords[6] == (("stride 4", 1), ("stride 1", 2))
    assert set(coords) == set(range(8))


def test_data_parallel_alone_and_overlapping_pairs_have_no_coordinates(tmp_path) -> None:
    world_only = {"0": ((0, 1, 2, 3), "")}
    assert rank_places(process_groups(groups_run(tmp_path, 4, world_only)), {}) == {}
    one_mesh_dim = {"0": ((0, 1, 2, 3), "dp")}
    assert rank_places(process_groups(groups_run(tmp_path, 4, one_mesh_dim)), {}) == {}
    neighbours = world_only | {f"p{i}": ((i, i + 1), "") for i in range(3)}
    assert rank_places(process_groups(groups_run(tmp_path, 4, neighbours)), {}) == {}


def test_stages_from_the_meta_hold_an_interleaved_ranks_stages(tmp_path) -> None:
    def pipe(rank: int) -> RankMeta:
        held = [rank, rank + 2]
        meta = PipelineMeta(stage=rank, stages=4, stages_held=held, schedule="Interleaved1F1B")
        return RankMeta(rank=rank, world_size=2, pipeline=meta)

    stages = pipeline_stages(None, {0: pipe(0), 1: pipe(1), 2: None})
    assert stages == {0: (0, 2), 1: (1, 3)}
    places = rank_places((), stages)
    assert places == {0: RankPlace(stages=(0, 2)), 1: RankPlace(stages=(1, 3))}


def test_stages_inferred_from_a_chain_of_sends_and_recvs(tmp_path) -> None:
    """Ranks 2 - 0 - 1 - 3 in the chain, rank 2 sending first: stages 0, 1, 2, 3."""
    stage_of = {2: 0, 0: 1, 1: 2, 3: 3}
    rank_of = {s: r for r, s in stage_of.items()}
    rows = {
        rank: [[(*r[:11], rank_of[r[11]] if r[11] >= 0 else -1) for r in chain_rows(stage, 4)]]
        for rank, stage in stage_of.items()
    }
    run = make_run(tmp_path, rows, world_size=4)
    analysis = analysed(run)
    stages = pipeline_stages(analysis.pipeline, run.ranks)
    assert stages == {r: (s,) for r, s in stage_of.items()}
    places = rank_places(analysis.groups, stages)
    assert places == {r: RankPlace(stages=(s,)) for r, s in stage_of.items()}
