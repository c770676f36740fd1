"""A rank's part of a ``torch.distributed.pipelining`` pipeline: its stage, the schedule,
each microbatch's forward and backward, and each block's time.

``_PipelineStageBase.__init__`` gives the stage (index, count, submodule) and
``_PipelineSchedule.__init__`` the schedule (its class, ``n_microbatches``). Each
``forward_one_chunk``, ``backward_one_chunk`` and ``backward_weight_one_chunk`` (a
zero-bubble schedule's weight gradients) is a ``forward`` or ``backward`` phase row with
the microbatch index in ``seq``; the generic phase hooks stand aside inside them
(``PhaseHooks.paused``), so a stage's forward is the sum of its microbatches', counted once.
Samples are counted on the first stage only (the inputs of its microbatches): the later
stages see the same samples again.

Blocks are the submodule's direct children, and in place of a container the blocks it
holds (``blocks_of``): an ``nn.ModuleList`` or ``nn.ModuleDict`` never runs as one module
(torchtitan's ``layers``), so it would read 0 ms and its blocks' backward would be counted
in the next block's; its children are timed one by one, named ``blocks.3``, and so are an
``nn.Sequential``'s where it holds blocks (children with children of their own) rather than
a block's layers. Forward hooks time each block's forward. A
block's backward runs from the moment the gradient of its output is ready (a hook on that
tensor, registered by the forward hook) to the next block's (autograd walks the chain
backwards), the last one to the chunk's end: a hook on the gradient of the block's input
would miss the first block, whose input needs none. Not a module full-backward hook: that
wraps the block's outputs in a custom autograd function, which a zero-bubble schedule's
split backward and in-place ops on those outputs (views then) refuse. Summed per step, kept
in memory and written in the rank's meta (``PipelineMeta.blocks``).
"""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Iterable
from typing import Any

import torch

from scalescope.events.run import BlockMeta, PipelineMeta
from scalescope.probe.phases import PhaseHooks, batch_size_of
from scalescope.probe.post_import import when_imported
from scalescope.probe.recorder import Recorder

_SEQ = 9
_LISTS = (torch.nn.ModuleList, torch.nn.ModuleDict)


def _holds_blocks(module: Any) -> bool:
    """A container whose children are blocks to time one by one: a list or dict of modules
    (it has no forward of its own), or a ``Sequential`` of modules with children."""
    if isinstance(module, _LISTS):
        return len(module) > 0
    if isinstance(module, torch.nn.Sequential):
        return any(next(child.children(), None) is not None for child in module)
    return False


def blocks_of(children: Iterable[tuple[str, Any]], prefix: str = "") -> list[tuple[str, Any]]:
    """The blocks to time: each (name, module) of ``children``, a container replaced by its
    children (``blocks.3``), recursively where a container holds containers."""
    out: list[tuple[str, Any]] = []
    for name, child in children:
        if _holds_blocks(child):
            out += blocks_of(child.named_children(), f"{prefix}{name}.")
        else:
            out.append((prefix + name, child))
    return out


class BlockClock:
    """Forward and backward time of one block, summed per step."""

    def __init__(self, name: str, module: Any, recorder: Recorder, marks: list) -> None:
        self.name = name
        self.recorder = recorder
        self.forward_ns: dict[int, int] = {}
        self.backward_ns: dict[int, int] = {}
        self._fwd_start: int | None = None
        self._marks = marks
        module.register_forward_pre_hook(self._fwd_pre)
        module.register_forward_hook(self._fwd_post)

    def add(self, into: dict[int, int], ns: int) -> None:
        step = self.recorder.step
        into[step] = into.get(step, 0) + ns

    def _fwd_pre(self, _module: Any, _args: Any) -> None:
        self._fwd_start = time.perf_counter_ns()

    def _fwd_post(self, _module: Any, _args: Any, out: Any) -> None:
        if self._fwd_start is not None:
            self.add(self.forward_ns, time.perf_counter_ns() - self._fwd_start)
            self._fwd_start = None
        tensor = first_grad_tensor(out)
        if tensor is not None:
            with contextlib.suppress(RuntimeError):  # no hook taken: the block's backward untimed
                tensor.register_hook(self._gradient_ready)

    def _gradient_ready(self, _grad: Any) -> None:
        self._marks.append((self, time.perf_counter_ns()))

    def per_step(self, steps: int) -> tuple[list[int], list[int]]:
        return (
            [self.forward_ns.get(s, 0) for s in range(steps)],
            [self.backward_ns.get(s, 0) for s in range(steps)],
        )


def first_grad_tensor(out: Any, depth: int = 2) -> Any:
    """The first tensor of a block's output (a tensor, or a tuple, list or dict of them)
    whose gradient autograd will compute; None where there is none."""
    if isinstance(out, torch.Tensor):
        return out if out.requires_grad else None
    if depth == 0:
        return None
    items = out.values() if isinstance(out, dict) else out if isinstance(out, list | tuple) else ()
    for item in items:
        if (found := first_grad_tensor(item, depth - 1)) is not None:
            return found
    return None


class PipelineProbe:
    """Wraps the stage's and the schedule's methods; never fails the user's pipeline."""

    def __init__(self, recorder: Recorder, phases: PhaseHooks) -> None:
        self.recorder = recorder
        self.phases = phases
        self.stage_indices: list[int] = []
        self.stages = 0
        self.schedule = ""
        self.microbatches = 0
        self.blocks: list[BlockClock] = []
        self.modules: list[Any] = []
        """The blocks' modules, of every stage the rank holds."""
        self._marks: list[tuple[BlockClock, int]] = []
        """(block, when its backward began) in the current backward chunk."""
        self.errors: list[str] = []
        self._saved: list[tuple[Any, str, Any]] = []
        self._stops: list[Any] = []

    def install(self) -> None:
        self._stops = [
            when_imported("torch.distributed.pipelining.stage", self._patch_stage),
            when_imported("torch.distributed.pipelining.schedules", self._patch_schedule),
        ]

    def uninstall(self) -> None:
        for stop in self._stops:
            stop()
        for cls, name, original in reversed(self._saved):
            setattr(cls, name, original)
        self._saved, self._stops = [], []

    def _wrap(self, cls: Any, name: str, make: Any) -> None:
        original = cls.__dict__.get(name)
        if original is None:
            return
        self._saved.append((cls, name, original))
        setattr(cls, name, functools.wraps(original)(make(original)))

    def _patch_stage(self, module: Any) -> None:
        cls = getattr(module, "_PipelineStageBase", None)
        if cls is None:
            return
        self._wrap(cls, "__init__", self._stage_init)
        self._wrap(cls, "forward_one_chunk", lambda f: self._chunk(f, "forward"))
        self._wrap(cls, "backward_one_chunk", lambda f: self._chunk(f, "backward"))
        self._wrap(cls, "backward_weight_one_chunk", lambda f: self._chunk(f, "backward"))

    def _patch_schedule(self, module: Any) -> None:
        cls = getattr(module, "_PipelineSchedule", None)
        if cls is not None:
            self._wrap(cls, "__init__", self._schedule_init)

    def _stage_init(self, original: Any) -> Any:
        def __init__(stage: Any, *args: Any, **kwargs: Any) -> None:
            original(stage, *args, **kwargs)
            try:
                self._add_stage(stage)
            except Exception as exc:  # the stage is the user's: record, never raise
                self.errors.append(f"pipeline stage not read: {type(exc).__name__}: {exc}")

        return __init__

    def _add_stage(self, stage: Any) -> None:
        self.add_stage(int(stage.stage_index), int(stage.num_stages), stage.submod.named_children())

    def add_stage(self, index: int, stages: int, blocks: Iterable[tuple[str, Any]]) -> None:
        """Stage ``index`` of ``stages`` held by this rank, with its submodule's children
        (name, module), containers opened (``blocks_of``) (probe/deepspeed_pipe.py adds
        DeepSpeed's stages here too)."""
        self.stage_indices.append(index)
        self.stages = stages
        if len(self.stage_indices) == 2:  # the rank holds several: each block named by its stage
            for block in self.blocks:
                block.name = f"stage{self.stage_indices[0]}.{block.name}"
        prefix = f"stage{index}." if len(self.stage_indices) > 1 else ""
        for name, child in blocks_of(blocks):
            self.blocks.append(BlockClock(prefix + name, child, self.recorder, self._marks))
            self.modules.append(child)

    def _schedule_init(self, original: Any) -> Any:
        def __init__(schedule: Any, *args: Any, **kwargs: Any) -> None:
            original(schedule, *args, **kwargs)
            self.schedule = type(schedule).__name__
            self.microbatches = int(getattr(schedule, "_n_microbatches", 0) or 0)

        return __init__

    def _chunk(self, original: Any, name: str) -> Any:
        recorder = self.recorder

        def chunk(stage: Any, chunk_id: int, *args: Any, **kwargs: Any) -> Any:
            if name == "forward" and getattr(stage, "is_first", False) and args:
                recorder.forward_samples += batch_size_of(args[0])
            return self.timed(name, int(chunk_id), original, stage, chunk_id, *args, **kwargs)

        return chunk

    def timed(self, name: str, microbatch: int, call: Any, *args: Any, **kwargs: Any) -> Any:
        """``call(*args, **kwargs)`` as a ``name`` phase row (``forward``, ``backward``) of
        ``microbatch``; the generic phase hooks stand aside inside it."""
        recorder, phases = self.recorder, self.phases
        start = recorder.now()
        recorder.enter_phase(name, start)
        phases.paused += 1
        try:
            return call(*args, **kwargs)
        finally:
            phases.paused -= 1
            end = recorder.now()
            row = recorder.phase(name, start, end)
            row[_SEQ] = microbatch
            if name == "backward":
                try:
                    self._close_backward(end)
                except Exception as exc:  # the blocks' times are ours: never the rank's end
                    self.errors.append(f"blocks' backward not timed: {type(exc).__name__}: {exc}")
                    self._marks.clear()

    def _close_backward(self, end_ns: int) -> None:
        """Each marked block's backward: until the next block's began, the last one's until
        the chunk's end."""
        marks = self._marks
        ends = [t for _, t in marks[1:]] + [end_ns] if marks else []
        for (block, at), then in zip(marks, ends, strict=True):
            block.add(block.backward_ns, then - at)
        marks.clear()

    def meta(self, steps: int) -> PipelineMeta | None:
        """The rank's ``PipelineMeta``; None where no stage was built."""
        if not self.stage_indices:
            return None
        blocks = []
        for b in self.blocks:
            fwd, bwd = b.per_step(steps)
            blocks.append(BlockMeta(name=b.name, forward_ns=fwd, backward_ns=bwd))
        return PipelineMeta(
            stage=min(self.stage_indices),
            stages=self.stages,
            stages_held=sorted(self.stage_indices),
            schedule=self.schedule,
            microbatches=self.microbatches,
            blocks=blocks,
        )
