"""Every collective, on a torch without process-group hooks: the c10d ops intercepted at the
dispatcher, in C++ (probe/native_dispatch.cpp).

Whatever issues a collective (``dist.*``, DDP's reducer, FSDP2, DTensor, functional
collectives, send and recv), the process group runs it through the dispatcher's c10d op
(``c10d::allreduce_``, ``c10d::_allgather_base_``, ...), where torch 2.14 fires its group
hooks. The probe's C++ kernels there record the same row as its C++ hooks, at their cost; the
``dist.*`` wrappers (+8 µs a call in Python) remain for a machine that cannot build them.
``SCALESCOPE_COLLECTIVES=dispatcher`` takes this way on a torch with hooks too (the tests of
it run on torch 2.14).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

import torch

from scalescope.probe import native
from scalescope.probe.collectives import GroupNames
from scalescope.probe.completion import HostCompletions
from scalescope.probe.group_discovery import GroupDiscovery
from scalescope.probe.native_rows import NativeRows
from scalescope.probe.recorder import Recorder

OPS: dict[str, tuple[str, str, bool, str]] = {
    "allreduce_": ("all_reduce", "tensors", False, ""),
    "allreduce_coalesced_": ("all_reduce", "tensors", False, ""),
    "broadcast_": ("broadcast", "tensors", False, ""),
    "reduce_": ("reduce", "tensors", False, ""),
    "allgather_": ("all_gather", "output_tensors", False, ""),
    "_allgather_base_": ("all_gather", "output_tensor", False, ""),
    "allgather_coalesced_": ("all_gather", "output_lists", False, ""),
    "allgather_into_tensor_coalesced_": ("all_gather", "outputs", False, ""),
    "reduce_scatter_": ("reduce_scatter", "input_tensors", False, ""),
    "_reduce_scatter_base_": ("reduce_scatter", "input_tensor", False, ""),
    "reduce_scatter_tensor_coalesced_": ("reduce_scatter", "inputs", False, ""),
    "alltoall_": ("all_to_all", "input_tensors", False, ""),
    "alltoall_base_": ("all_to_all", "input", False, ""),
    "gather_": ("gather", "input_tensors", True, ""),
    "gather_into_tensor_": ("gather", "input_tensor", True, ""),
    "scatter_": ("scatter", "output_tensors", True, ""),
    "barrier": ("barrier", "", False, ""),
    "send": ("send", "tensors", False, "dst"),
    "recv_": ("recv", "tensors", False, "src"),
    "recv_any_source_": ("recv", "tensors", False, ""),
}
"""c10d op -> (the probe's op, the argument whose tensors are its bytes by the nccl-tests
convention, whether that is one rank's part of the group's, a send's or recv's group-rank
peer argument): what torch 2.14's Ops.cpp gives its group hooks for each. Not
``monitored_barrier_``, which fires no hook either. An op this torch lacks is skipped."""

OP_NAMES = tuple(dict.fromkeys(op for op, *_ in OPS.values()))
"""The probe's ops, by the code the C++ side records."""


def specs() -> list[tuple[str, int, str, bool, str, bool]]:
    return [
        (name, OP_NAMES.index(op), sized, times_group, peer, op in ("send", "recv"))
        for name, (op, sized, times_group, peer) in OPS.items()
    ]


def ready() -> ModuleType | None:
    """The built module, where it can time every collective this machine may run: without
    CUDA, or built with its device timing; else None."""
    module = native.load()
    if module is None:
        return None
    if torch.cuda.is_available() and not module.device_timing():
        return None
    return module


class DispatchedCollectives(GroupDiscovery):
    """The C++ kernels of the c10d ops, and the groups whose collectives they record."""

    def __init__(self, recorder: Recorder, groups: GroupNames, module: ModuleType) -> None:
        super().__init__(recorder, groups)
        self.module = module
        ops = dict(enumerate(OP_NAMES))
        self.completions = HostCompletions(recorder)
        self.native = NativeRows(
            module,
            recorder,
            ops,
            self._error,
            groups.global_rank,
            groups.live_slot,
            self.completions,
        )

    def install(self) -> bool:
        """Intercept the c10d ops and watch every group; False (said once) when none could
        be intercepted: the caller records through the wrappers instead."""
        for problem in self.module.intercept(specs()):
            self._error(f"a c10d op not intercepted: {problem}")
        if not self.module.intercepted():
            self.module.release()
            self._error(
                f"the c10d ops could not be intercepted (torch {torch.__version__}): the probe "
                "records through its dist.* wrappers"
            )
            return False
        super().install()
        return True

    def uninstall(self) -> None:
        super().uninstall()
        self.module.release()
        self.native.stop()
        self.completions.uninstall()

    def _attach(self, pg: Any, label: str) -> None:
        self.native.watch(pg, label)

    def _detach(self, pg: Any) -> None:
        self.native.unwatch(pg)


def kernels() -> list[str]:
    """The c10d ops the C++ side intercepts now, each unboxed or boxed (for docs and tests)."""
    module = native.load()
    return list(module.intercepted()) if module is not None else []
