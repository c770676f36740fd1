"""Stragglers on recorded runs: on the 3-stage pipeline (tests/data/runs/p2p_pipeline, stage 2
heavy) the straggler is the bound stage or none, never a light stage; on a data-parallel run
(straggler_forward_2, rank 1 sleeps in forward) the ranks are compared as replicas, as
recorded."""

from __future__ import annotations

import re

import pytest
from analysed import analysed  # noqa: E402
from recorded_runs import load_scenario, recorded_report

from scalescope.events import load_run


@pytest.fixture(scope="module")
def pipeline():
    return analysed(load_run(load_scenario("p2p_pipeline").run_dir))


def test_the_pipelines_straggler_is_its_bound_stage_never_rank_0(pipeline) -> None:
    heavy = load_scenario("p2p_pipeline").truth["heavy_stage"]
    assert pipeline.pipeline.bound_stage == heavy == 2
    s = pipeline.cross_rank.straggler
    assert s is not None, "stage 2 keeps the others waiting ~48 ms of a ~64 ms step"
    assert (s.rank, s.stage) == (2, 2)
    assert s.lateness_ms_per_step <= pipeline.pipeline.step_ms


def test_the_light_stages_that_wait_for_the_heavy_one_are_not_late(pipeline) -> None:
    by_rank = {w.rank: w for w in pipeline.cross_rank.ranks}
    assert [by_rank[r].stage for r in (0, 1, 2)] == [0, 1, 2]
    for light in (0, 1):
        assert by_rank[light].lateness_ms_per_step == 0.0
    assert all(w.lateness_ms_per_step <= pipeline.pipeline.step_ms for w in by_rank.values())


def test_a_data_parallel_straggler_is_judged_as_recorded() -> None:
    scenario = load_scenario("straggler_forward_2")
    cross = analysed(load_run(scenario.run_dir)).cross_rank
    line = re.search(
        r"straggler\s+rank (\d+) causes (\d+)% of the waiting \(([\d.]+) ms per step\)",
        recorded_report(scenario).text,
    )
    assert line is not None
    s = cross.straggler
    assert (s.rank, s.stage) == (int(line[1]), None)
    assert (round(s.lateness_share_pct), round(s.lateness_ms_per_step, 2)) == (
        int(line[2]),
        float(line[3]),
    )
    assert all(w.stage is None for w in cross.ranks)
