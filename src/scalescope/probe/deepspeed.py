"""DeepSpeed: the engine's phases and samples, and ZeRO's collectives tagged by role.

The engine (``DeepSpeedEngine``, an ``nn.Module``) has its forward watched as DDP's is; its
``backward(loss)`` is the backward phase (torch's backward inside it is not recorded twice)
and its ``step()`` the optimizer phase (the torch optimizer it steps inside is not timed on
its own). A step ends at the engine's step on a gradient-accumulation boundary, not at each
micro-batch; its samples are ``train_micro_batch_size_per_gpu`` × gradient accumulation
steps of the engine's configuration (per rank: the run sums them over the ranks).

Collectives are recorded by the group hooks whoever issues them; this only sets the tag
(events/tags.py) around the DeepSpeed methods that issue them, by call site: ZeRO 3's
parameter fetch (``PartitionedParameterCoordinator.fetch_sub_module``, prefetches included)
and ZeRO 1/2's gather of the updated partitions (``all_gather_dp_groups``) are parameter
all-gathers; ``reduce_ipg_grads``/``reduce_gradients`` (ZeRO 1/2) and ZeRO 3's
``__reduce_and_partition_ipg_grads`` are gradient reductions; the rest of a ZeRO optimizer's
``step`` is ``zero_step``; the engine's construction is ``parameters``. Nothing of DeepSpeed is
imported here: each module is patched once the script imports it. A DeepSpeed whose names
differ is left as it is (its collectives stay ``user``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any

from scalescope.events.tags import PARAMETERS, ZERO_GATHER, ZERO_REDUCE, ZERO_STEP
from scalescope.probe.context import tagged
from scalescope.probe.phases import PhaseHooks
from scalescope.probe.post_import import when_imported

ENGINE = "deepspeed.runtime.engine"
STAGE_1_AND_2 = "deepspeed.runtime.zero.stage_1_and_2"
STAGE_3 = "deepspeed.runtime.zero.stage3"
COORDINATOR = "deepspeed.runtime.zero.partitioned_param_coordinator"

TAGGED_METHODS: dict[tuple[str, str], dict[str, str]] = {
    (STAGE_1_AND_2, "DeepSpeedZeroOptimizer"): {
        "reduce_ipg_grads": ZERO_REDUCE,
        "reduce_gradients": ZERO_REDUCE,
        "step": ZERO_STEP,
    },
    (STAGE_3, "DeepSpeedZeroOptimizer_Stage3"): {
        "_DeepSpeedZeroOptimizer_Stage3__reduce_and_partition_ipg_grads": ZERO_REDUCE,
        "step": ZERO_STEP,
    },
    (COORDINATOR, "PartitionedParameterCoordinator"): {"fetch_sub_module": ZERO_GATHER},
}
"""(module, class) -> method -> the tag of the collectives it issues."""
TAGGED_FUNCTIONS = {(STAGE_1_AND_2, "all_gather_dp_groups"): ZERO_GATHER}
"""(module, function it imported) -> tag: patched in that module's namespace."""


def tagging(original: Callable, tag: str) -> Callable:
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        with tagged(tag):
            return original(*args, **kwargs)

    return call


class DeepSpeedPatch:
    """Patches DeepSpeed's engine and ZeRO optimizers once the script imports them."""

    def __init__(self, phases: PhaseHooks) -> None:
        self.phases = phases
        self.recorder = phases.recorder
        self.zero_stage: int | None = None
        """The ZeRO stage of the (last) engine built; None without one."""
        self._saved: list[tuple[Any, str, Any]] = []
        self._stops: list[Callable[[], None]] = []

    def install(self) -> None:
        self._stops.append(when_imported(ENGINE, self._patch_engine))
        modules = {m for m, _ in TAGGED_METHODS} | {m for m, _ in TAGGED_FUNCTIONS}
        for name in sorted(modules):
            self._stops.append(when_imported(name, self._patch_tags))

    def uninstall(self) -> None:
        for stop in self._stops:
            stop()
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)
        self._saved.clear()
        self._stops.clear()

    def _replace(self, owner: Any, name: str, wrap: Callable[[Any], Any]) -> None:
        original = getattr(owner, name, None)
        if original is not None and not any(o is owner and n == name for o, n, _ in self._saved):
            self._saved.append((owner, name, original))
            setattr(owner, name, wrap(original))

    def _patch_tags(self, module: ModuleType) -> None:
        for (mod, cls_name), methods in TAGGED_METHODS.items():
            cls = getattr(module, cls_name, None) if mod == module.__name__ else None
            for method, tag in methods.items() if cls is not None else ():
                self._replace(cls, method, lambda f, t=tag: tagging(f, t))
        for (mod, func), tag in TAGGED_FUNCTIONS.items():
            if mod == module.__name__:
                self._replace(module, func, lambda f, t=tag: tagging(f, t))

    def _patch_engine(self, module: ModuleType) -> None:
        cls = getattr(module, "DeepSpeedEngine", None)
        if cls is None or not all(hasattr(cls, n) for n in ("backward", "step")):
            return
        self._replace(cls, "__init__", self._init)
        self._replace(cls, "backward", self._backward)
        self._replace(cls, "step", self._step)

    def _init(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def __init__(engine: Any, *args: Any, **kwargs: Any) -> None:
            with tagged(PARAMETERS):
                original(engine, *args, **kwargs)
            self.phases.watch_forward(engine)
            stage = _call(engine, "zero_optimization_stage")
            self.zero_stage = int(stage) if stage is not None else None

        return __init__

    def _backward(self, original: Callable) -> Callable:
        phases, recorder = self.phases, self.recorder

        @functools.wraps(original)
        def backward(engine: Any, *args: Any, **kwargs: Any) -> Any:
            if phases.engine_backward or phases.paused:  # a pipeline's microbatch times it
                return original(engine, *args, **kwargs)
            start = recorder.now()
            recorder.enter_phase("backward", start)
            phases.engine_backward = True
            try:
                return original(engine, *args, **kwargs)
            finally:
                phases.engine_backward = False
                recorder.phase("backward", start, recorder.now())

        return backward

    def _step(self, original: Callable) -> Callable:
        phases, recorder = self.phases, self.recorder

        @functools.wraps(original)
        def step(engine: Any, *args: Any, **kwargs: Any) -> Any:
            if phases.engine_step:
                return original(engine, *args, **kwargs)
            boundary = _call(engine, "is_gradient_accumulation_boundary") is not False
            start = recorder.now()
            recorder.enter_phase("optimizer", start)
            phases.engine_step = True
            try:
                return original(engine, *args, **kwargs)
            finally:
                phases.engine_step = False
                end = recorder.now()
                recorder.phase("optimizer", start, end)
                if boundary:
                    self._end_step(engine, end)

        return step

    def _end_step(self, engine: Any, end: int) -> None:
        """The step's samples from the engine's batch configuration (the forwards' count
        when it cannot be read)."""
        micro = _call(engine, "train_micro_batch_size_per_gpu")
        accumulation = _call(engine, "gradient_accumulation_steps")
        if isinstance(micro, int) and isinstance(accumulation, int) and micro > 0:
            self.recorder.loader_samples = 0
            self.recorder.forward_samples = micro * max(accumulation, 1)
        self.recorder.end_step(end)


def _call(engine: Any, name: str) -> Any:
    """``engine.name()``, or None where the engine has no such method or it fails."""
    method = getattr(engine, name, None)
    try:
        return method() if callable(method) else None
    except Exception:  # a DeepSpeed whose accessor needs what this engine lacks
        return None
