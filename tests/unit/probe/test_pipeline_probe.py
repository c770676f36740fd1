"""probe/pipeline.py: a rank holding several stages (interleaved schedules) names each
block by its stage, the first stage's blocks too, and reports every stage it holds."""

from __future__ import annotations

import time

import torch
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


def block() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 4), nn.ReLU())


def test_a_zero_bubble_split_backward_runs_and_times_each_block(tmp_path):
    """A zero-bubble schedule's backward of a stage before the last, in two parts (torch's
    stage_backward_input, then stage_backward_weight, as the stage runs them), on blocks the
    probe times: the input's and the weights' gradients are those of a plain backward, and
    each block's backward is timed. With a module full-backward hook the first part failed
    ("Can't detach views in-place", torch 2.14): the hook made the blocks' outputs views."""
    from torch.distributed.pipelining._backward import stage_backward_input, stage_backward_weight

    torch.manual_seed(0)
    model = nn.Sequential(block(), block(), block())
    x = torch.randn(3, 4, requires_grad=True)
    grad_out = torch.randn(3, 4)
    model(x).backward(grad_out)
    expected = (x.grad.clone(), [p.grad.clone() for p in model.parameters()])
    x.grad = None
    model.zero_grad(set_to_none=True)

    recorder = Recorder(tmp_path / "events.arrows", rank=0, flush_every_steps=100)
    probe = PipelineProbe(recorder, PhaseHooks(recorder))
    probe.add_stage(0, 2, model.named_children())
    out = model(x)
    input_grads, groups = stage_backward_input([out], [grad_out], [x], model.parameters())
    stage_backward_weight(model.parameters(), groups)
    probe._close_backward(time.perf_counter_ns())
    assert torch.allclose(input_grads[0], expected[0])
    for p, want in zip(model.parameters(), expected[1], strict=True):
        assert torch.allclose(p.grad, want)
    timed = [b.name for b in probe.blocks if b.backward_ns.get(recorder.step, 0) > 0]
    assert timed == ["0", "1", "2"]
    recorder.close()


def test_a_pipeline_ranks_layers_are_its_stages_when_no_model_is_stepped(tmp_path):
    from types import SimpleNamespace

    from scalescope.probe.bootstrap import model_layer_shares

    recorder = Recorder(tmp_path / "events.arrows", rank=0, flush_every_steps=100)
    pipeline = PipelineProbe(recorder, PhaseHooks(recorder))
    pipeline.add_stage(0, 2, [("tok", nn.Embedding(10, 4)), ("0", nn.Linear(4, 4, bias=False))])
    probe = SimpleNamespace(phases=SimpleNamespace(watched=None), pipeline=pipeline)
    assert model_layer_shares(probe) == {"embedding": 71.43, "linear": 28.57}
    probe.phases.watched = nn.Linear(2, 2)
    assert model_layer_shares(probe) == {"linear": 100.0}, "a stepped model comes first"
    recorder.close()


class Block(nn.Module):
    """A transformer-like block: a custom module with layers of its own."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(width, width), nn.ReLU(), nn.Linear(width, width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.mlp(x)


class ListedStage(nn.Module):
    """A stage as torchtitan builds one: ``embed``, its blocks in an ``nn.ModuleList``
    (``blocks``, no forward of its own), ``head``."""

    def __init__(self, blocks: int, width: int) -> None:
        super().__init__()
        self.embed = nn.Linear(16, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(blocks))
        self.head = nn.Linear(width, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


STEPS = 3
"""Steps of the ModuleList test: each block's fastest is its own time (one step on a shared
core once gave the head 25 ms of backward against the blocks' 40)."""


def test_blocks_in_a_module_list_are_timed_one_by_one(tmp_path):
    """The ModuleList is 5 blocks, each timed forward and backward, not one entry of 0 ms with
    the blocks' backward counted in the head's (the issue's 'blocks 0.0 ms, head 112 ms')."""
    torch.manual_seed(0)
    model = ListedStage(blocks=5, width=384)
    recorder = Recorder(tmp_path / "events.arrows", rank=0, flush_every_steps=100)
    probe = PipelineProbe(recorder, PhaseHooks(recorder))
    probe.add_stage(0, 2, model.named_children())
    x = torch.randn(256, 16)
    for step in range(STEPS):
        recorder.step = step
        for mb in range(2):
            out = probe.timed("forward", mb, model, x)
            probe.timed("backward", mb, out.square().mean().backward)
    meta = probe.meta(steps=STEPS)
    names = [b.name for b in meta.blocks]
    assert names == ["embed", *(f"blocks.{i}" for i in range(5)), "head"]
    fwd = {b.name: min(b.forward_ns) for b in meta.blocks}  # a step the machine took is not
    bwd = {b.name: min(b.backward_ns) for b in meta.blocks}  # the block's own time
    assert all(v > 0 for v in fwd.values()) and all(v > 0 for v in bwd.values())
    blocks_bwd = sum(bwd[f"blocks.{i}"] for i in range(5))
    assert bwd["head"] < blocks_bwd / 2, "the head's backward is its own, not the blocks'"
    assert sum(fwd[f"blocks.{i}"] for i in range(5)) > fwd["head"]
    recorder.close()


def test_containers_are_opened_down_to_the_blocks_and_a_blocks_layers_stay_whole():
    """A ModuleDict of ModuleLists is opened twice; a Sequential of blocks is opened; a
    Sequential of plain layers (pp_train.py's block) and a custom block stay one block each;
    an empty list stays an entry."""
    from scalescope.probe.pipeline import blocks_of

    layer = nn.Sequential(nn.Linear(4, 4), nn.ReLU())
    stage = nn.ModuleDict({
        "embed": nn.Embedding(10, 4),
        "layers": nn.ModuleDict({"a": nn.ModuleList([Block(4), Block(4)]), "b": Block(4)}),
        "trunk": nn.Sequential(Block(4), layer),
        "mlp": nn.Sequential(nn.Linear(4, 4), nn.ReLU()),
        "none": nn.ModuleList(),
    })  # fmt: skip
    named = blocks_of(stage.named_children())
    assert [n for n, _ in named] == [
        "embed", "layers.a.0", "layers.a.1", "layers.b", "trunk.0", "trunk.1", "mlp", "none",
    ]  # fmt: skip
    assert named[4][1] is stage["trunk"][0] and named[5][1] is layer
