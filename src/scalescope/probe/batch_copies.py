"""The ``to_device`` phase: copies of the batches the DataLoader gave to another device.

Between a batch's fetch and the forward that takes it, ``Tensor.to``, ``Tensor.cuda`` and the
conversions of ``METHODS`` are wrapped (and only then: outside that window they are torch's
own, at no cost). A call on one of the batch's tensors whose result lies on another device
is a copy: its bytes, its host time, and whether the source was pinned. The copies of one
batch become one phase row (``nbytes``: their bytes, ``count``: the tensors, ``tag``:
``pinned``, ``pageable`` or ``mixed``). On CUDA its duration is the device time between
events recorded before the first copy and after the last, as the other phases are timed:
from when the stream was free (a wait for the previous phases' kernels stays theirs) to the
last copy's end, the driver's staging of pageable memory included (docs/gpu.md).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Mapping
from typing import Any

import torch

from scalescope.events.schema import TO_DEVICE
from scalescope.probe.cuda_timing import CudaTimings
from scalescope.probe.recorder import Recorder

__all__ = ["TO_DEVICE", "BatchCopies", "batch_tensors"]
PINNED, PAGEABLE, MIXED = "pinned", "pageable", "mixed"
_NBYTES, _COUNT, _TAG = 5, 6, 10
"""Indexes of a recorder row's fields."""
METHODS = ("to", "cuda", "float", "half", "bfloat16", "long", "int", "contiguous")
"""What a loop calls on a batch: the copies, and conversions on the host before one
(``images.float().cuda()``), whose results are then the batch's."""
MAX_DEPTH = 4
"""How deep a batch's nesting is searched for tensors (lists, tuples, mappings)."""


def batch_tensors(batch: Any, depth: int = 0) -> list[torch.Tensor]:
    """The tensors of a batch: itself, or those in its lists, tuples and mappings."""
    if isinstance(batch, torch.Tensor):
        return [batch]
    if depth >= MAX_DEPTH:
        return []
    if isinstance(batch, Mapping):
        batch = list(batch.values())
    if isinstance(batch, (list, tuple)):
        return [t for item in batch for t in batch_tensors(item, depth + 1)]
    return []


class BatchCopies:
    def __init__(self, recorder: Recorder, cuda: CudaTimings) -> None:
        self.recorder = recorder
        self.cuda = cuda
        self.on_cuda = False
        """Time the copies with CUDA events (the watched model is on a CUDA device)."""
        self._pending: dict[int, torch.Tensor] = {}
        """The fetched batches' tensors by id (held, so no id is reused meanwhile)."""
        self._saved: dict[str, Callable] = {}
        self._first: tuple[int, Any] | None = None
        self._last: tuple[int, Any] | None = None
        self._nbytes = self._count = 0
        self._pinned: set[bool] = set()

    def fetched(self, batch: Any) -> None:
        """A batch the DataLoader gave: watch copies of its tensors until ``close``."""
        for tensor in batch_tensors(batch):
            self._pending[id(tensor)] = tensor
        if self._pending and not self._saved:
            self._wrap()

    def close(self, name: str = TO_DEVICE) -> None:
        """The forward begins (or the step ends): the copies so far are one phase row,
        ``name``d ``eval`` when an evaluation's forward takes the batch."""
        if self._saved:
            self._unwrap()
        self._pending.clear()
        if self._first is None or self._last is None:
            return
        (start, first_event), (end, last_event) = self._first, self._last
        row = self.recorder.phase(name, start, end)
        row[_NBYTES], row[_COUNT] = self._nbytes, self._count
        row[_TAG] = MIXED if len(self._pinned) > 1 else PINNED if True in self._pinned else PAGEABLE
        if first_event is not None and last_event is not None:
            self.cuda.span(row, first_event, last_event)
        self._first = self._last = None
        self._nbytes = self._count = 0
        self._pinned = set()

    def _wrap(self) -> None:
        self._saved = {name: getattr(torch.Tensor, name) for name in METHODS}
        for name, original in self._saved.items():
            setattr(torch.Tensor, name, self._watched(original))

    def _unwrap(self) -> None:
        for name, original in self._saved.items():
            setattr(torch.Tensor, name, original)
        self._saved = {}

    def _watched(self, original: Callable) -> Callable:
        @functools.wraps(original)
        def method(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
            if id(tensor) not in self._pending:
                return original(tensor, *args, **kwargs)
            first = self._first is None  # the phase's start: its CPU clocks read with it
            start = self.recorder.now() if first else time.perf_counter_ns()
            event = self.cuda.start() if self.on_cuda else None
            out = original(tensor, *args, **kwargs)
            if not isinstance(out, torch.Tensor) or out is tensor:
                return out
            if out.device != tensor.device:
                self._copied(tensor, start, event)
            else:  # a conversion on the host (``.to(torch.float)``): its copy is the batch's
                self._pending[id(out)] = out
            return out

        return method

    def _copied(self, tensor: torch.Tensor, start: int, event: Any) -> None:
        if self._first is None:
            self._first = (start, event)
            self.recorder.enter_phase(TO_DEVICE, start)
        self._last = (self.recorder.now(latest="copy"), self.cuda.start() if self.on_cuda else None)
        self._nbytes += tensor.numel() * tensor.element_size()
        self._count += 1
        self._pinned.add(bool(tensor.device.type == "cpu" and tensor.is_pinned()))
