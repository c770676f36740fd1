"""The run's process groups and their dimensions: on a synthetic pipeline (pairs between
each node and the next, benchmarks/synthetic_run.py), whose layout gives the pairs; on a
recorded data-parallel run, the world alone and a report without a dimensions table."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
from recorded_runs import RUNS

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))

from analysed import analysed  # noqa: E402

from scalescope.analyze.ranks.groups import dim_totals, group_role, process_groups  # noqa: E402
from scalescope.events import Kind, load_run  # noqa: E402
from synthetic_run import RANKS_PER_NODE, next_node, write_run  # noqa: E402

RANKS = 24


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    path = tmp_path_factory.mktemp("pipeline") / "run"
    write_run(path, RANKS, 8, None, seed=5, layout="pipeline")
    return load_run(path)


def test_the_pipeline_pairs_are_one_dimension_beside_the_world(pipeline):
    groups = process_groups(pipeline)
    assert groups[0].dim == "world" and groups[0].ranks == tuple(range(RANKS))
    pairs = {g.ranks for g in groups[1:]}
    nxt = next_node(RANKS)
    assert pairs == {tuple(sorted((r, int(nxt[r])))) for r in range(RANKS)}
    assert {g.dim for g in groups[1:]} == {f"stride {RANKS_PER_NODE}"}
    assert not any(g.named for g in groups)


def test_the_totals_per_dimension_count_the_measured_rows(pipeline):
    groups = process_groups(pipeline)
    totals = {d.dim: d for d in dim_totals(pipeline, groups, 1)}
    colls = pipeline.events.of_kind(Kind.COLLECTIVE)
    colls = colls.select((colls.step >= 1) & (colls.dur_ns >= 0))
    world = colls.where("group", groups[0].label)
    assert totals["world"].calls == int(world.sum())
    assert totals["world"].ms_per_rank == pytest.approx(colls.dur_ns[world].sum() / 1e6 / RANKS)
    pairs = totals[f"stride {RANKS_PER_NODE}"]
    assert pairs.calls == int((~world).sum()) and pairs.groups == RANKS
    assert pairs.bytes_per_rank == pytest.approx(colls.nbytes[~world].sum() / RANKS)


@pytest.mark.parametrize(
    ("ranks", "role"),
    [({0, 1, 2, 3}, "world"), ({0, 2}, "stride 2"), ({1, 3}, "stride 2"), ({0, 3}, "stride 1"),
     ({0, 1, 3}, "other"), ({0, 1}, "stride 1")],
)  # fmt: skip
def test_a_role_from_the_members_distance_around_the_ring(ranks, role):
    assert group_role(ranks, {0, 1, 2, 3}) == role


def test_a_data_parallel_run_has_the_world_alone_and_no_dimensions_table():
    run = load_run(RUNS / "balanced" / "run")
    analysis = analysed(run)
    assert [g.dim for g in analysis.groups] == ["world"]
    assert [d.dim for d in analysis.dims] == ["world"]
    assert analysis.dims[0].calls > 0 and np.isfinite(analysis.dims[0].ms_per_rank)
