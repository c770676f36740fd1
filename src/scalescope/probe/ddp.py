"""DistributedDataParallel: tag its broadcasts, time its forward, observe its gradient buckets.

DDP's bucket allreduces are issued from C++, so wrapping Python functions alone misses
them. The probe registers a comm hook that runs DDP's default allreduce (or the hook the
user registers later, which it then wraps), so every bucket's collective passes through
the wrapped ``dist.all_reduce`` with tag ``gradients``.
"""

from __future__ import annotations

import functools
import time
from typing import Any

import torch.distributed as dist
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.nn.parallel import DistributedDataParallel as DDP

from scalescope.probe.collectives import GroupNames
from scalescope.probe.context import current_tag, tagged
from scalescope.probe.recorder import Recorder


class CommHookState:
    """State of the probe's comm hook: the hook that really reduces, and its state."""

    def __init__(self, process_group: Any, on_bucket: Any) -> None:
        self.process_group = process_group
        self.on_bucket = on_bucket
        self.inner_hook: Any = default_hooks.allreduce_hook
        self.inner_state: Any = process_group
        self.user_registered = False


def probe_comm_hook(state, bucket):  # noqa: ANN001, ANN201
    """Left unannotated: DDP rejects a hook whose annotations are strings (PEP 563)."""
    state.on_bucket(time.perf_counter_ns())
    with tagged("gradients"):
        return state.inner_hook(state.inner_state, bucket)


_BUILTIN = {
    "ALLREDUCE": default_hooks.allreduce_hook,
    "FP16_COMPRESS": default_hooks.fp16_compress_hook,
}


class DDPPatch:
    """Patches the DDP class (construction, comm hook registration) for this process."""

    def __init__(self, recorder: Recorder, phases: Any, groups: GroupNames) -> None:
        self.recorder = recorder
        self.phases = phases
        self.groups = groups
        self._saved: dict[str, Any] = {}

    def install(self) -> None:
        self._saved = {
            "__init__": DDP.__init__,
            "register_comm_hook": DDP.register_comm_hook,
            "_register_builtin_comm_hook": DDP._register_builtin_comm_hook,
        }
        self._saved_broadcast = dist._broadcast_coalesced
        DDP.__init__ = self._patched_init(DDP.__init__)
        DDP.register_comm_hook = _patched_register(DDP.register_comm_hook)
        DDP._register_builtin_comm_hook = _patched_builtin(DDP._register_builtin_comm_hook)
        dist._broadcast_coalesced = self._patched_broadcast(dist._broadcast_coalesced)

    def uninstall(self) -> None:
        for name, value in self._saved.items():
            setattr(DDP, name, value)
        if self._saved:
            dist._broadcast_coalesced = self._saved_broadcast
        self._saved = {}

    def _patched_init(self, original: Any) -> Any:
        patch = self

        @functools.wraps(original)
        def __init__(ddp: DDP, *args: Any, **kwargs: Any) -> None:
            with tagged("parameters"):
                original(ddp, *args, **kwargs)
            patch.attach(ddp)

        return __init__

    def attach(self, ddp: DDP) -> None:
        self.phases.watch_forward(ddp)
        state = CommHookState(ddp.process_group, self.phases.on_bucket)
        try:
            self._saved["register_comm_hook"](ddp, state, probe_comm_hook)
        except Exception as exc:
            self.recorder.errors.append(f"DDP gradient buckets not observed: {exc}")
            return
        ddp._scalescope_comm = state

    def _patched_broadcast(self, original: Any) -> Any:
        """DDP's coalesced broadcasts: parameters at construction, buffers before forward."""
        recorder, groups = self.recorder, self.groups

        @functools.wraps(original)
        def broadcast_coalesced(process_group: Any, tensors: list, *args: Any, **kwargs: Any):
            tag = current_tag()
            tag = "buffers" if tag == "user" else tag
            nbytes = sum(t.numel() * t.element_size() for t in tensors)
            count = sum(t.numel() for t in tensors)
            dtype = str(tensors[0].dtype).removeprefix("torch.") if tensors else ""
            start = time.perf_counter_ns()
            group = groups.label(process_group)
            row = recorder.collective("broadcast", nbytes, count, dtype, group, tag, start)
            result = original(process_group, tensors, *args, **kwargs)
            row[4] = time.perf_counter_ns() - start
            return result

        return broadcast_coalesced


def _patched_register(original: Any) -> Any:
    @functools.wraps(original)
    def register_comm_hook(ddp: DDP, state: object, hook: Any) -> None:
        probe_state = getattr(ddp, "_scalescope_comm", None)
        if probe_state is None:
            return original(ddp, state, hook)
        if probe_state.user_registered:
            raise RuntimeError(
                "register_comm_hook or register_builtin_comm_hook can only be called once."
            )
        probe_state.inner_hook, probe_state.inner_state = hook, state
        probe_state.user_registered = True

    return register_comm_hook


def _patched_builtin(original: Any) -> Any:
    @functools.wraps(original)
    def register_builtin(ddp: DDP, comm_hook_type: Any) -> None:
        probe_state = getattr(ddp, "_scalescope_comm", None)
        hook = _BUILTIN.get(getattr(comm_hook_type, "name", ""))
        if probe_state is None or hook is None:
            return original(ddp, comm_hook_type)
        DDP.register_comm_hook(ddp, ddp.process_group, hook)

    return register_builtin
