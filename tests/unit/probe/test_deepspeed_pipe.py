"""The DeepSpeed pipeline engine's patch (probe/deepspeed_pipe.py) on a stand-in with
``PipelineEngine``'s method names and its way of running a schedule (the functions of a class
``_INSTRUCTION_MAP``), over a real torch model: what the patch records and restores. The real
engine (DeepSpeed 0.19.8, 2 stages on gloo) is checked by the heavy
tests/e2e/test_deepspeed_run.py::test_a_pipeline_modules_stages_microbatches_and_transfers."""

from __future__ import annotations

import types
from collections import Counter
from types import MethodType

import pytest
import torch
from torch import nn

from scalescope.events import EventTable, Kind, SymbolTable
from scalescope.events.reader import read_event_stream
from scalescope.probe.context import current_tag
from scalescope.probe.deepspeed_pipe import PIPE_ENGINE, TRAIN_SCHEDULE, DeepSpeedPipePatch
from scalescope.probe.phases import PhaseHooks
from scalescope.probe.pipeline import PipelineProbe
from scalescope.probe.recorder import Recorder

MICROBATCHES, MICRO_BATCH = 3, 4


class ForwardPass: ...


class BackwardPass: ...


class SendActivation: ...


class RecvGrad: ...


class OptimizerStep: ...


class Stage(nn.Module):
    """A ``PipelineModule``'s shape: its layers by index, a loss function, ``forward_funcs``."""

    def __init__(self) -> None:
        super().__init__()
        self.add_module("0", nn.Linear(8, 8))
        self.add_module("1", nn.Linear(8, 2))
        self.loss_fn = nn.MSELoss()
        self.forward_funcs = [getattr(self, "0"), getattr(self, "1")]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for f in self.forward_funcs:
            x = f(x)
        return x


class PipelineEngine:
    """One stage running one forward, send, receive and backward per microbatch, then the
    optimizer, each instruction by the function ``_INSTRUCTION_MAP`` holds."""

    def __init__(self, stage_id: int) -> None:
        self.stage_id, self.num_stages = stage_id, 2
        self.micro_batches, self.micro_batch_size = MICROBATCHES, MICRO_BATCH
        self.module = Stage()
        self.optimizer = torch.optim.SGD(self.module.parameters(), lr=0.1)
        self.tags: list[tuple[str, str]] = [("init", current_tag())]
        self.outputs: list[torch.Tensor] = []

    def train_batch(self) -> None:
        schedule = [ForwardPass, SendActivation] * MICROBATCHES
        schedule += [RecvGrad, BackwardPass] * MICROBATCHES + [OptimizerStep]
        for cmd in schedule:
            MethodType(self._INSTRUCTION_MAP[cmd], self)()

    def _exec_forward_pass(self) -> None:
        self.outputs.append(self.module(torch.randn(MICRO_BATCH, 8)))

    def _exec_backward_pass(self) -> None:
        self.outputs.pop(0).sum().backward()

    def _exec_send_activations(self) -> None:
        self.tags.append(("send", current_tag()))

    def _exec_recv_grads(self) -> None:
        self.tags.append(("recv", current_tag()))

    def _exec_optimizer_step(self) -> None:
        self.optimizer.step()

    _INSTRUCTION_MAP = {
        ForwardPass: _exec_forward_pass, BackwardPass: _exec_backward_pass,
        SendActivation: _exec_send_activations, RecvGrad: _exec_recv_grads,
        OptimizerStep: _exec_optimizer_step,
    }  # fmt: skip


def engine_module(cls: type = PipelineEngine) -> types.ModuleType:
    module = types.ModuleType(PIPE_ENGINE)
    module.PipelineEngine = cls
    return module


@pytest.fixture
def patched(tmp_path):
    recorder = Recorder(tmp_path / "events.arrows", rank=0, flush_every_steps=100)
    phases = PhaseHooks(recorder)
    pipeline = PipelineProbe(recorder, phases)
    patch = DeepSpeedPipePatch(phases, pipeline)
    saved = dict(PipelineEngine.__dict__)
    patch._patch(engine_module())
    yield recorder, pipeline, patch
    patch.uninstall()
    assert dict(PipelineEngine.__dict__) == saved, "every patched attribute restored"


def rows_of(recorder: Recorder, path) -> EventTable:
    recorder.close()
    return EventTable.from_arrow(read_event_stream(path).table, SymbolTable())


@pytest.mark.parametrize("stage", [0, 1])
def test_each_microbatch_is_a_row_and_train_batch_the_step(patched, tmp_path, stage):
    recorder, pipeline, _ = patched
    engine = PipelineEngine(stage)
    for _ in range(2):
        engine.train_batch()
    meta = pipeline.meta(recorder.step)
    assert (meta.stage, meta.stages, meta.schedule) == (stage, 2, TRAIN_SCHEDULE)
    assert meta.microbatches == MICROBATCHES
    assert [b.name for b in meta.blocks] == ["0", "1"], "the layers, not the loss function"
    assert all(f > 0 for b in meta.blocks for f in b.forward_ns + b.backward_ns)
    rows = rows_of(recorder, tmp_path / "events.arrows")
    steps = rows.select(rows.kind == int(Kind.STEP))
    assert steps.count.tolist() == [MICRO_BATCH * MICROBATCHES if stage == 0 else 0] * 2
    for step in (0, 1):
        phases = rows.select((rows.kind == int(Kind.PHASE)) & (rows.step == step))
        assert Counter(phases.strings("name")) == {
            "forward": MICROBATCHES, "backward": MICROBATCHES, "optimizer": 1,
        }  # fmt: skip
        for name in ("forward", "backward"):
            assert phases.seq[phases.where("name", name)].tolist() == list(range(MICROBATCHES))


def test_the_sends_and_receives_carry_their_tags_and_the_setup_its_own(patched):
    engine = PipelineEngine(0)
    engine.train_batch()
    assert engine.tags[0] == ("init", "parameters")
    assert Counter(engine.tags[1:]) == {
        ("send", "pipe_activations"): MICROBATCHES, ("recv", "pipe_grads"): MICROBATCHES,
    }  # fmt: skip
    assert current_tag() == "user"


def test_an_engine_without_the_methods_is_left_as_it_is(tmp_path):
    class Other:
        def train_batch(self) -> None: ...

    recorder = Recorder(tmp_path / "events.arrows", rank=0)
    phases = PhaseHooks(recorder)
    patch = DeepSpeedPipePatch(phases, PipelineProbe(recorder, phases))
    before = dict(Other.__dict__)
    patch._patch(engine_module(Other))
    assert dict(Other.__dict__) == before
    recorder.close()
