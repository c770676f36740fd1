"""The start stage in the live state: import, init_process_group, model, running."""

from __future__ import annotations

import torch.distributed as dist

from scalescope.events.files import live_state_path
from scalescope.events.live_state import IMPORT, INIT_PROCESS_GROUP, MODEL, RUNNING, read_live_state
from scalescope.events.live_state_writer import LiveStateWriter, open_live_state
from scalescope.probe.live import StartStages
from scalescope.probe.recorder import Recorder

OFFSET = 1_000_000_000_000_000_000


def recorder_with_state(tmp_path) -> tuple[Recorder, LiveStateWriter]:
    rec = Recorder(tmp_path / "e.arrows", rank=0)
    rec.live = LiveStateWriter(live_state_path(tmp_path, 0), 1, wall_minus_perf_ns=OFFSET)
    rec.live.stage(IMPORT, 1)
    return rec, rec.live


def stage(tmp_path) -> str:
    return read_live_state(tmp_path, 0).stage


def test_init_process_group_is_a_stage_then_model(tmp_path) -> None:
    writer = open_live_state(tmp_path, 0)
    assert stage(tmp_path) == IMPORT
    seen: list[str] = []
    real = dist.init_process_group

    def observed(*args, **kwargs):  # what a reader sees while the real call runs
        seen.append(stage(tmp_path))
        return real(*args, **kwargs)

    dist.init_process_group = observed
    stages = StartStages(writer)
    stages.install()
    try:
        dist.init_process_group(
            "gloo", init_method=f"file://{tmp_path}/store", rank=0, world_size=1
        )
        assert seen == [INIT_PROCESS_GROUP]
        state = read_live_state(tmp_path, 0)
        assert state.stage == MODEL and state.stage_since_s is not None
    finally:
        stages.uninstall()
        dist.init_process_group = real
        if dist.is_initialized():
            dist.destroy_process_group()
        writer.close()


def test_the_first_phase_ends_the_start(tmp_path) -> None:
    rec, live = recorder_with_state(tmp_path)
    live.stage(MODEL, 1)
    rec.collective("broadcast", 64, 16, "float32", "0", "parameters", 100)  # DDP's setup
    assert stage(tmp_path) == MODEL
    rec.enter_phase("data", 200)
    state = read_live_state(tmp_path, 0)
    assert (state.stage, state.stage_since_s) == (RUNNING, (200 + OFFSET) / 1e9)
    rec.enter_phase("forward", 300)  # later phases leave the time the stage began
    assert read_live_state(tmp_path, 0).stage_since_s == (200 + OFFSET) / 1e9
    rec.close()


def test_a_script_without_steps_runs_at_its_first_collective(tmp_path) -> None:
    rec, live = recorder_with_state(tmp_path)
    live.stage(INIT_PROCESS_GROUP, 1)
    rec.collective("barrier", 0, 0, "", "0", "", 100)  # inside init_process_group
    assert stage(tmp_path) == INIT_PROCESS_GROUP
    live.stage(MODEL, 150)
    rec.collective("all_reduce", 64, 16, "float32", "0", "", 200)
    assert stage(tmp_path) == RUNNING
    rec.close()


def test_a_step_ends_the_start_even_without_a_phase(tmp_path) -> None:
    rec, live = recorder_with_state(tmp_path)
    rec.end_step(500)
    assert stage(tmp_path) == RUNNING
    rec.close()
