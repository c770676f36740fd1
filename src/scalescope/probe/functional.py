"""Functional collectives (``torch.ops._c10d_functional``) on a torch without process-group
hooks: torch 2.11 on the first GPU machine had none (docs/gpu.md). There the ``dist.*``
wrappers see FSDP's all-gathers and reduce-scatters, but DTensor's redistribution and
``torch.distributed._functional_collectives`` call these ops, which reach the group in C++.

Each op is replaced in its namespace (``_functional_collectives`` looks it up there at every
call). The op returns its output at once; the collective completes when ``wait_tensor`` of
that output returns (on the CPU), or, on CUDA, when the current stream reaches an event
recorded after that wait. Output that is never waited for leaves its row incomplete.
Compiled graphs call the ops from C++ and are not seen.
"""

from __future__ import annotations

import functools
import time
import weakref
from collections.abc import Callable
from typing import Any

import torch

from scalescope.probe.collectives import dtype_name
from scalescope.probe.context import UNRECORDED, current_tag
from scalescope.probe.cuda_timing import CudaTimings
from scalescope.probe.recorder import Recorder

Sized = tuple[int, int, "torch.Tensor | None", str]
"""Bytes (nccl-tests convention), elements, the tensor naming dtype and device, group name."""


def _tensors(x: Any) -> list[torch.Tensor]:
    return list(x) if isinstance(x, list | tuple) else [x]


def _total(tensors: list[torch.Tensor], times: int, group: Any) -> Sized:
    nbytes = sum(t.nbytes for t in tensors) * times
    count = sum(t.numel() for t in tensors) * times
    return nbytes, count, tensors[0] if tensors else None, str(group)


def _reduce(a: tuple, kw: dict) -> Sized:
    """all_reduce(input, op, group_name), reduce_scatter_tensor(input, op, size, name)."""
    return _total(_tensors(a[0]), 1, a[-1])


def _gather(a: tuple, kw: dict) -> Sized:
    """all_gather_into_tensor(input, group_size, group_name): the gathered output's size."""
    return _total(_tensors(a[0]), int(a[1]), a[2])


def _to_all(a: tuple, kw: dict) -> Sized:
    """all_to_all_single(input, output_split_sizes, input_split_sizes, group_name)."""
    return _total(_tensors(a[0]), 1, a[3])


def _broadcast(a: tuple, kw: dict) -> Sized:
    """broadcast(input, src, group_name)."""
    return _total(_tensors(a[0]), 1, a[2])


OPS: dict[str, tuple[str, Callable[[tuple, dict], Sized]]] = {
    "all_reduce": ("all_reduce", _reduce),
    "all_reduce_coalesced": ("all_reduce", _reduce),
    "all_gather_into_tensor": ("all_gather", _gather),
    "all_gather_into_tensor_coalesced": ("all_gather", _gather),
    "reduce_scatter_tensor": ("reduce_scatter", _reduce),
    "reduce_scatter_tensor_coalesced": ("reduce_scatter", _reduce),
    "all_to_all_single": ("all_to_all", _to_all),
    "broadcast": ("broadcast", _broadcast),
}
"""The namespace's op -> (the op's name in the event table, its size)."""


class _Packet:
    """Calls ``call`` in place of an op packet; every attribute (``.default``, the schema,
    what torch's own lookups read) is still the original packet's."""

    def __init__(self, original: Any, call: Callable) -> None:
        self._original = original
        self._call = call
        functools.update_wrapper(self, call)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._original, name)


class FunctionalCollectives:
    def __init__(self, recorder: Recorder, cuda: CudaTimings) -> None:
        self.recorder = recorder
        self.cuda = cuda
        self._originals: dict[str, Any] = {}
        self._waiting: dict[int, tuple[weakref.ref, list]] = {}
        """id(output) -> (the output, [its row, its CUDA start event or None, waited])."""

    @staticmethod
    def namespace() -> Any:
        return getattr(torch.ops, "_c10d_functional", None)

    def install(self) -> None:
        ns = self.namespace()
        if ns is None:
            return
        for op, (name, size) in OPS.items():
            try:
                original = getattr(ns, op)
            except (AttributeError, RuntimeError):
                continue
            self._originals[op] = original
            setattr(ns, op, _Packet(original, self._wrap(name, size, original)))
        if (wait := getattr(ns, "wait_tensor", None)) is not None:
            self._originals["wait_tensor"] = wait
            ns.wait_tensor = _Packet(wait, self._wrap_wait(wait))

    def uninstall(self) -> None:
        ns = self.namespace()
        for op, original in self._originals.items():
            setattr(ns, op, original)
        self._originals.clear()
        self._waiting.clear()

    def _wrap(self, name: str, size: Callable[[tuple, dict], Sized], original: Any) -> Callable:
        recorder = self.recorder

        def op(*args: Any, **kwargs: Any) -> Any:
            tag = current_tag()
            try:
                nbytes, count, tensor, group = size(args, kwargs)
            except Exception:  # an unknown signature: run it unrecorded, never raise here
                return original(*args, **kwargs)
            if tag in UNRECORDED:
                return original(*args, **kwargs)
            on_device = tensor is not None and tensor.is_cuda
            row = recorder.collective(
                name, nbytes, count, dtype_name(tensor), group, tag, time.perf_counter_ns()
            )
            timer = self.cuda.start() if on_device else None
            out = original(*args, **kwargs)
            call = [row, timer, False]
            for t in _tensors(out):
                self._waiting[id(t)] = (weakref.ref(t), call)
            return out

        return op

    def _wrap_wait(self, original: Any) -> Callable:
        recorder = self.recorder

        def wait_tensor(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(tensor, *args, **kwargs)
            entry = self._waiting.pop(id(tensor), None)
            if entry is None or entry[0]() is not tensor or entry[1][2]:
                return out
            row, timer, _ = entry[1]
            entry[1][2] = True  # a coalesced call completes at its first output's wait
            if timer is not None:
                self.cuda.finish(row, timer, None)
                recorder.left(row, time.perf_counter_ns())
            else:
                recorder.completed(row, time.perf_counter_ns())
            return out

        return wait_tensor
