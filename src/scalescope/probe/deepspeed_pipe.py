"""DeepSpeed's pipeline engine (``PipelineEngine``, which ``deepspeed.initialize`` builds for
a ``PipelineModule``): the rank's stage in its meta, each microbatch's forward and backward,
the optimizer, the step, and the stages' sends and receives tagged.

``PipelineEngine.__init__`` gives the stage (``stage_id`` of ``num_stages``), the
microbatches (``micro_batches``: the gradient accumulation steps) and the ``PipelineModule``
whose layers (the children its forward runs) are the stage's blocks; they go to the rank's
``PipelineMeta`` through probe/pipeline.py, with the schedule ``TRAIN_SCHEDULE``.

``train_batch`` runs that schedule one instruction at a time, by the functions its class's
``_INSTRUCTION_MAP`` holds (patched there too): ``_exec_forward_pass`` and
``_exec_backward_pass`` are ``forward`` and ``backward`` rows with the microbatch in ``seq``
(the n-th of its kind in the step: a stage runs its microbatches in order), the generic phase
hooks standing aside (the engine's forward reaches its module's hooks, the last stage's
backward the engine's ``backward``); ``_exec_optimizer_step`` is the ``optimizer`` phase, the
torch optimizer's hooks standing aside (they would end the step there); the step ends when
``train_batch`` returns, after the loss is gathered over the stages. Samples are counted on
the first stage (micro batch x microbatches), as for torch's pipelining: the later stages
see them again.

The sends and receives go through ``deepspeed.comm`` to ``torch.distributed.send`` and
``recv`` (on torch >= 1.8; older torch broadcast over 2-rank groups), which the probe records
as point-to-point rows with their peer; the instructions that issue them tag them
``pipe_activations`` or ``pipe_grads`` (events/tags.py), and the engine's construction,
with its first exchange between the stages, ``parameters``. Nothing of DeepSpeed is imported
here; a DeepSpeed without these methods is left as it is.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from types import ModuleType
from typing import Any

import torch

from scalescope.events.schema import EVAL
from scalescope.events.tags import PARAMETERS, PIPE_ACTIVATIONS, PIPE_GRADS
from scalescope.probe.context import tagged
from scalescope.probe.deepspeed import tagging
from scalescope.probe.phases import PhaseHooks
from scalescope.probe.pipeline import PipelineProbe
from scalescope.probe.post_import import when_imported

PIPE_ENGINE = "deepspeed.runtime.pipe.engine"
TRAIN_SCHEDULE = "DeepSpeed TrainSchedule (1F1B)"
"""The schedule ``train_batch`` runs: one forward, one backward, after the warm-up."""
NEEDED = ("train_batch", "_exec_forward_pass", "_exec_backward_pass", "_exec_optimizer_step")
TAGGED = {
    "_exec_send_activations": PIPE_ACTIVATIONS,
    "_exec_recv_activations": PIPE_ACTIVATIONS,
    "_exec_send_grads": PIPE_GRADS,
    "_exec_recv_grads": PIPE_GRADS,
}
"""Instruction -> the tag of the sends and receives it issues."""


class DeepSpeedPipePatch:
    """Patches ``PipelineEngine`` once the script imports DeepSpeed's pipeline engine."""

    def __init__(self, phases: PhaseHooks, pipeline: PipelineProbe) -> None:
        self.phases = phases
        self.recorder = phases.recorder
        self.pipeline = pipeline
        self._counts = {"forward": 0, "backward": 0}
        """Microbatches of each kind run so far in the current step."""
        self._saved: list[tuple[Any, str, Any]] = []
        self._stops: list[Callable[[], None]] = []

    def install(self) -> None:
        self._stops.append(when_imported(PIPE_ENGINE, self._patch))

    def uninstall(self) -> None:
        for stop in self._stops:
            stop()
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        self._stops.clear()

    def _replace(self, cls: Any, name: str, wrap: Callable[[Any], Any]) -> dict[Any, Any]:
        """``cls.name`` wrapped; {original: wrapped} (empty where ``cls`` has no ``name``)."""
        original = cls.__dict__.get(name)
        if original is None:
            return {}
        self._saved.append((cls, name, original))
        setattr(cls, name, functools.wraps(original)(wrap(original)))
        return {original: cls.__dict__[name]}

    def _patch(self, module: ModuleType) -> None:
        cls = getattr(module, "PipelineEngine", None)
        if cls is None or not all(name in cls.__dict__ for name in NEEDED):
            return
        self._replace(cls, "__init__", self._init)
        self._replace(cls, "train_batch", self._train_batch)
        wrapped = {
            **self._replace(cls, "_exec_forward_pass", lambda f: self._microbatch(f, "forward")),
            **self._replace(cls, "_exec_backward_pass", lambda f: self._microbatch(f, "backward")),
            **self._replace(cls, "_exec_optimizer_step", self._optimizer),
        }
        for method, tag in TAGGED.items():
            wrapped |= self._replace(cls, method, lambda f, t=tag: tagging(f, t))
        instructions = cls.__dict__.get("_INSTRUCTION_MAP")
        if isinstance(instructions, dict):  # the schedule runs the functions it holds
            self._saved.append((cls, "_INSTRUCTION_MAP", instructions))
            cls._INSTRUCTION_MAP = {k: wrapped.get(f, f) for k, f in instructions.items()}

    def _init(self, original: Callable) -> Callable:
        def __init__(engine: Any, *args: Any, **kwargs: Any) -> None:
            with tagged(PARAMETERS):
                original(engine, *args, **kwargs)
            try:
                stage, stages = int(engine.stage_id), int(engine.num_stages)
                self.pipeline.add_stage(stage, stages, _layers(engine.module))
                self.pipeline.schedule = TRAIN_SCHEDULE
                self.pipeline.microbatches = int(engine.micro_batches)
            except Exception as exc:  # the engine is the user's: record, never raise
                self.pipeline.errors.append(
                    f"DeepSpeed pipeline stage not read: {type(exc).__name__}: {exc}"
                )

        return __init__

    def _microbatch(self, original: Callable, name: str) -> Callable:
        def run(engine: Any, *args: Any, **kwargs: Any) -> Any:
            training = torch.is_grad_enabled() and bool(getattr(engine.module, "training", True))
            kind = name if training or name == "backward" else EVAL
            if kind == "forward":
                self.phases.claim_batches(True)
            index = self._counts.get(kind, 0)
            self._counts[kind] = index + 1
            return self.pipeline.timed(kind, index, original, engine, *args, **kwargs)

        return run

    def _optimizer(self, original: Callable) -> Callable:
        phases, recorder = self.phases, self.recorder

        def step(engine: Any, *args: Any, **kwargs: Any) -> Any:
            start = recorder.now()
            recorder.enter_phase("optimizer", start)
            phases.engine_step = True
            try:
                return original(engine, *args, **kwargs)
            finally:
                phases.engine_step = False
                recorder.phase("optimizer", start, recorder.now())

        return step

    def _train_batch(self, original: Callable) -> Callable:
        def train_batch(engine: Any, *args: Any, **kwargs: Any) -> Any:
            self._counts = {"forward": 0, "backward": 0}
            result = original(engine, *args, **kwargs)
            end = time.perf_counter_ns()
            self.recorder.loader_samples = 0
            self.recorder.forward_samples = _samples(engine)
            self.recorder.end_step(end)
            return result

        return train_batch


def _layers(module: Any) -> list[tuple[str, Any]]:
    """The ``PipelineModule``'s children that are layers of its stage (those its forward
    runs), not its loss function or the tied modules' dict."""
    runs = {id(f) for f in getattr(module, "forward_funcs", ())}
    return [(name, child) for name, child in module.named_children() if id(child) in runs]


def _samples(engine: Any) -> int:
    """Micro batch x microbatches on the first stage, 0 on the others."""
    try:
        if int(engine.stage_id) != 0:
            return 0
        return int(engine.micro_batch_size) * int(engine.micro_batches)
    except (AttributeError, TypeError, ValueError):  # a DeepSpeed without these attributes
        return 0
