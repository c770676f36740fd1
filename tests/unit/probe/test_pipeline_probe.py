"""probe/pipeline.py: a rank holding several stages (interleaved schedules) names each
block by its stage, the first stage's blocks too, and reports every stage it holds."""

from __future__ import annotations

from torch import nn

from scalescope.probe.phases import PhaseHooks
from scalescope.probe.pipeline import PipelineProbe
from scalescope.probe.recorder import Recorder


def blocks(n: int) -> list[tuple[str, nn.Module]]:
    return list(nn.Sequential(*(nn.Linear(4, 4) for _ in range(n))).named_children())


def test_a_rank_holding_two_stages_names_each_block_by_its_stage(tmp_path):
    recorder = Recorder(tmp_path / "events.arrows", rank=0, flush_every_steps=100)
    probe = PipelineProbe(recorder, PhaseHooks(recorder))
    probe.add_stage(1, 4, blocks(2))
    assert [b.name for b in probe.blocks] == ["0", "1"], "one stage: the submodule's names"
    probe.add_stage(3, 4, blocks(1))
    meta = probe.meta(steps=1)
    assert [b.name for b in meta.blocks] == ["stage1.0", "stage1.1", "stage3.0"]
    assert (meta.stage, meta.stages, meta.stages_held) == (1, 4, [1, 3])
    recorder.close()
