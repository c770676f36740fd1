"""Every collective that reaches a process group, whoever issues it: torch's group hooks.

torch calls a process group's pre and post hooks (``ProcessGroup.register_pre_hook``) for
each collective it runs, on gloo and NCCL alike: the ``dist.*`` functions, DDP's reducer,
FSDP2's all-gathers and reduce-scatters, DTensor's redistribution, functional collectives,
coalesced calls, send and recv. The probe registers one pair on every group as torch
creates it. Wrapping the Python functions instead misses what C++ or a new function issues
(FSDP2 calls ``all_gather_single``, functional collectives go through the dispatcher), so
the wrappers (probe/collectives.py) remain only for a torch without these hooks.

The pre hook appends the collective's row at issue; the post hook hands the work to
``HostCompletions`` (probe/completion.py), which completes the row when the work's wait
returns or its future completes. docs/probe.md compares this with the Flight Recorder and with
wrapping and gives the cost per call (benchmarks/collective_cost.py).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

import torch

from scalescope.probe import native
from scalescope.probe.collectives import DTYPE_NAMES, GroupNames, dtype_name
from scalescope.probe.completion import HostCompletions
from scalescope.probe.context import UNRECORDED, current_tag
from scalescope.probe.cuda_timing import CudaTimings
from scalescope.probe.group_discovery import GroupDiscovery
from scalescope.probe.native_rows import NativeRows, native_takes
from scalescope.probe.recorder import Recorder

HOOK_ID = 0x5CA1E5C0
"""The id of the probe's hooks on every group (torch keys hooks by an id per group)."""


available = native.hooks_available


Sized = tuple[int, int, "torch.Tensor | None"]
"""Bytes, elements, and the tensor that names the dtype and the device (None: no payload)."""


def _total(tensors: list[torch.Tensor], times: int = 1) -> Sized:
    if not tensors:
        return 0, 0, None
    if len(tensors) == 1:  # the usual case, on the hot path
        return tensors[0].nbytes * times, tensors[0].numel() * times, tensors[0]
    nbytes, count = sum(t.nbytes for t in tensors), sum(t.numel() for t in tensors)
    return nbytes * times, count * times, tensors[0]


def _inputs(args: Any, n: int) -> Sized:
    return _total(args.input_tensors)


def _outputs(args: Any, n: int) -> Sized:
    return _total(args.output_tensors)


def _inputs_times_group(args: Any, n: int) -> Sized:
    return _total(args.input_tensors, n)


def _outputs_times_group(args: Any, n: int) -> Sized:
    return _total(args.output_tensors, n)


def _received(args: Any, n: int) -> Sized:
    return _total(args.output_tensors or args.input_tensors)


SIZES: dict[str, tuple[str, Callable[[Any, int], Sized]]] = {
    "ALLREDUCE": ("all_reduce", _inputs),
    "BROADCAST": ("broadcast", _inputs),
    "REDUCE": ("reduce", _inputs),
    "ALLGATHER": ("all_gather", _outputs),
    "REDUCE_SCATTER": ("reduce_scatter", _inputs),
    "ALLTOALL": ("all_to_all", _inputs),
    "GATHER": ("gather", _inputs_times_group),
    "SCATTER": ("scatter", _outputs_times_group),
    "BARRIER": ("barrier", lambda args, n: (0, 0, None)),
    "SEND": ("send", _inputs),
    "RECV": ("recv", _received),
}
"""torch's hook op name -> (the probe's op name, its bytes and elements by the nccl-tests
convention: all-gather counts what each rank ends with, reduce-scatter what it starts with,
gather and scatter one rank's part times the group). Each reads only the tensors it needs:
every attribute of torch's hook arguments builds Python objects."""


def sizes_by_hook_op() -> dict[Any, tuple[str, Callable[[Any, int], Sized]]]:
    """``SIZES`` keyed by torch's ``HookOpName`` values (a dict lookup on the hot path)."""
    names = torch._C._distributed_c10d.HookOpName
    return {getattr(names, k): v for k, v in SIZES.items() if hasattr(names, k)}


class GroupHooks(GroupDiscovery):
    """Registers the probe's hooks on every process group as torch creates it."""

    def __init__(
        self, recorder: Recorder, groups: GroupNames, cuda: CudaTimings, compiled: bool = True
    ) -> None:
        """``compiled``: use the C++ hooks where they are built (False: Python hooks only)."""
        super().__init__(recorder, groups)
        self.cuda = cuda
        self.completions = HostCompletions(recorder)
        module = native.load() if compiled else None
        self.native = (
            None
            if module is None or not module.has_group_hooks()
            else NativeRows(
                module,
                recorder,
                self._op_names(),
                self._error,
                groups.global_rank,
                groups.live_slot,
                self.completions,
            )
        )
        """The C++ hooks, for the groups they can time; the others get Python hooks."""
        self._native_groups: set[int] = set()

    @staticmethod
    def _op_names() -> dict[int, str]:
        return {int(code.value): op for code, (op, _) in sizes_by_hook_op().items()}

    def uninstall(self) -> None:
        """Remove every hook and patch; the recorder's last flush then hooks nothing again."""
        super().uninstall()
        self.completions.uninstall()
        if self.native is not None:
            self.native.stop()

    def _attach(self, pg: Any, label: str) -> None:
        if self.native is not None and native_takes(pg, self.native.device_timing):
            self.native.attach(pg, HOOK_ID, label)
            self._native_groups.add(id(pg))
            return
        self.completions.install()  # Work.wait wrapped only where Python hooks need it
        if self.native is None and (problem := self.completions.watch_tensor_waits()):
            self._error(f"{problem}: functional collectives on gloo are left incomplete")
        pre, post = self._hooks(label, pg.size())
        pg.register_pre_hook(HOOK_ID, pre)
        pg.register_post_hook(HOOK_ID, post)

    def _detach(self, pg: Any) -> None:
        if id(pg) in self._native_groups and self.native is not None:
            self._native_groups.discard(id(pg))
            with contextlib.suppress(Exception):  # a destroyed group
                self.native.detach(pg, HOOK_ID)
        else:
            _unregister(pg)

    def _hooks(self, group: str, size: int) -> tuple[Callable, Callable]:
        recorder, cuda, clock = self.recorder, self.cuda, time.perf_counter_ns
        completions, sizes, dtypes = self.completions, sizes_by_hook_op(), DTYPE_NAMES
        p2p, global_rank = _p2p_ops(), self.groups.global_rank
        issued: dict[int, tuple[list, Any, tuple[int, ...]]] = {}
        """op id -> row and CUDA start event, from the pre hook to the post hook (two threads
        may issue on one group: DDP's reducer and the main thread)."""

        def pre(args: Any) -> None:
            completions.settle()
            tag = current_tag()
            if tag in UNRECORDED:
                return
            try:
                op, size_of = sizes[args.name]
                nbytes, count, first = size_of(args, size)
                on_device = first is not None and first.is_cuda
                dtype = "" if first is None else dtypes.get(first.dtype) or dtype_name(first)
                peer = global_rank(group, args.root) if args.name in p2p else -1
                row = recorder.collective(op, nbytes, count, dtype, group, tag, clock(), peer)
                timer = cuda.start() if on_device else None
                issued[args.op_id] = (row, timer, () if on_device else _storages(args))
            except Exception as exc:  # never raise inside a rank's collective
                self._error(f"a collective on group {group} not recorded: {exc!r}")

        def post(args: Any) -> None:
            try:
                row, timer, storages = issued.pop(args.op_id, (None, None, ()))
                if row is None:
                    return
                if timer is not None:
                    cuda.finish(row, timer, args.work)
                    recorder.left(row, clock())
                else:
                    completions.watch(row, args.work, args.async_op, storages)
            except Exception as exc:
                self._error(f"a collective on group {group} has no completion: {exc!r}")

        return pre, post


def _storages(args: Any) -> tuple[int, ...]:
    """The storages of a collective's first output and input: a functional collective's
    ``wait_tensor`` of one completes it (probe/completion.py)."""
    first = [*args.output_tensors[:1], *args.input_tensors[:1]]
    return tuple(t.untyped_storage().data_ptr() for t in first)


def _p2p_ops() -> frozenset:
    """torch's hook op names of a send and a recv (their ``root`` is the group-local peer)."""
    names = torch._C._distributed_c10d.HookOpName
    return frozenset(getattr(names, k) for k in ("SEND", "RECV") if hasattr(names, k))


def _unregister(pg: Any) -> None:
    for unregister in (pg.unregister_pre_hook, pg.unregister_post_hook):
        with contextlib.suppress(Exception):  # a destroyed group
            unregister(HOOK_ID)
