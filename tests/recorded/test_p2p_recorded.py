"""The hand-written 3-stage pipeline recorded once (tests/data/runs/p2p_pipeline): its light
stages wait for the heavy last one in communication, judged where timing cannot flake."""

from __future__ import annotations

from heavy_stage import assert_the_light_stages_wait_for_the_heavy_one
from recorded_runs import load_scenario

from scalescope.events import load_run


def test_the_stages_before_the_heavy_one_wait_for_it_in_communication() -> None:
    assert_the_light_stages_wait_for_the_heavy_one(load_run(load_scenario("p2p_pipeline").run_dir))
